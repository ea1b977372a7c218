#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `commhost run`: the environment ranks see, prefixed whole lines, failure propagation
# (exit status, signal), stopping the others within the grace period, Ctrl-C, --set.
#   run_test.sh <commhost binary> <source dir>
set -euo pipefail
commhost=$1
src=$2
tmp=$(mktemp -d)
export TMPDIR="$tmp"  # flight-recorder dumps (default dump_dir: $TMPDIR/commhost-traces-UID) stay in this run's dir
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; [ -f "$tmp/out" ] && cat "$tmp/out"; exit 1; }
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done

"$commhost" run -n 2 -c "$src/configs/gloo.yaml" -- sh -c \
  'echo "R=$RANK W=$WORLD_SIZE L=$LOCAL_RANK LW=$LOCAL_WORLD_SIZE M=$MASTER_ADDR:$MASTER_PORT C=$COMMHOST_CONFIG"' >"$tmp/out" 2>&1 ||
  fail "a job of two successful ranks failed"
grep -Eq "^\[0\] R=0 W=2 L=0 LW=2 M=127.0.0.1:[0-9]+ C=$src/configs/gloo.yaml$" "$tmp/out" || fail "rank 0 environment"
grep -Eq "^\[1\] R=1 W=2 L=1 LW=2 M=127.0.0.1:[0-9]+ C=" "$tmp/out" || fail "rank 1 environment"
echo "ok: ranks see RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR/PORT, COMMHOST_CONFIG"

# As torchrun: one OpenMP thread per rank when ranks share the host, unless the user chose.
( unset OMP_NUM_THREADS
  "$commhost" run -n 2 -- sh -c 'echo "omp=${OMP_NUM_THREADS:-unset}"' >"$tmp/out" 2>&1 ) || fail "the OMP job failed"
[ "$(grep -c '^\[[01]\] omp=1$' "$tmp/out")" = 2 ] || fail "ranks sharing a host did not get OMP_NUM_THREADS=1"
( unset OMP_NUM_THREADS
  "$commhost" run -n 1 -- sh -c 'echo "omp=${OMP_NUM_THREADS:-unset}"' >"$tmp/out" 2>&1 ) || fail "the OMP job failed"
grep -q '^\[0\] omp=unset$' "$tmp/out" || fail "a rank alone on its host got OMP_NUM_THREADS"
OMP_NUM_THREADS=3 "$commhost" run -n 2 -- sh -c 'echo "omp=$OMP_NUM_THREADS"' >"$tmp/out" 2>&1 || fail "the OMP job failed"
[ "$(grep -c '^\[[01]\] omp=3$' "$tmp/out")" = 2 ] || fail "the user's OMP_NUM_THREADS was not kept"
echo "ok: OMP_NUM_THREADS=1 per rank when ranks share the host, as torchrun; the user's value kept"

"$commhost" run -n 1 -- sh -c 'printf "part1-"; sleep 0.3; echo part2; printf "no newline at exit"' >"$tmp/out" 2>&1
grep -q "^\[0\] part1-part2$" "$tmp/out" || fail "a line written in two pieces was not kept whole"
grep -q "^\[0\] no newline at exit$" "$tmp/out" || fail "the last partial line was lost"
echo "ok: lines are kept whole and prefixed"

start=$(date +%s)
status=0
"$commhost" run -n 3 --grace 2 -- sh -c '[ "$RANK" = 1 ] && exit 3; exec sleep 60' >"$tmp/out" 2>&1 || status=$?
elapsed=$(( $(date +%s) - start ))
[ "$status" = 3 ] || fail "exit status $status, expected rank 1's 3"
[ "$elapsed" -lt 15 ] || fail "the others were not stopped in time (${elapsed}s)"
grep -q "rank 1 failed (exit 3)" "$tmp/out" || fail "the summary does not name rank 1"
grep -Eq "^ +1 +[0-9]+ +exit 3 .*failed first" "$tmp/out" || fail "the summary table lacks the failing rank"
grep -Eq "^ +0 +[0-9]+ +signal 15" "$tmp/out" || fail "rank 0 was not stopped with SIGTERM"
echo "ok: a rank exiting 3 makes run exit 3 and stops the others (${elapsed}s)"

status=0
"$commhost" run -n 2 --grace 1 -- sh -c '[ "$RANK" = 0 ] && kill -KILL $$; exec sleep 60' >"$tmp/out" 2>&1 || status=$?
[ "$status" = 137 ] || fail "exit status $status, expected 128+9 for a rank killed by SIGKILL"
grep -q "signal 9" "$tmp/out" || fail "the summary does not show the signal"
echo "ok: a rank killed by a signal gives 128+signal"

"$commhost" run -n 2 --grace 1 -- sh -c "trap '' TERM; echo \$\$ > $tmp/pid.\$RANK; exec sleep 60" >"$tmp/out" 2>&1 &
launcher=$!
for _ in $(seq 50); do [ -f "$tmp/pid.0" ] && [ -f "$tmp/pid.1" ] && break; sleep 0.1; done
kill -INT $launcher
status=0
wait $launcher || status=$?
[ "$status" = 130 ] || fail "exit status $status after Ctrl-C, expected 130"
for r in 0 1; do
  pid=$(cat "$tmp/pid.$r")
  ! kill -0 "$pid" 2>/dev/null || fail "rank $r (pid $pid) outlived the launcher"
done
echo "ok: Ctrl-C reaches every rank (SIGKILL after the grace period for ones ignoring SIGTERM)"

"$commhost" run -n 1 --set group.timeout=7s -- sh -c 'echo "O=$COMMHOST_OVERRIDES"' >"$tmp/out" 2>&1
grep -q "O=group.timeout=7s" "$tmp/out" || fail "--set did not reach the rank"
echo "ok: --set reaches the ranks"

status=0
"$commhost" run -n 1 -- /nonexistent/program >"$tmp/out" 2>&1 || status=$?
[ "$status" = 127 ] || fail "exit status $status for a missing program, expected 127"
grep -q "cannot start '/nonexistent/program' for rank 0" "$tmp/out" || fail "no message for a missing program"
echo "ok: a missing program is reported"

printf 'group: { timout: 1s }\n' >"$tmp/bad.yaml"
status=0
"$commhost" run -n 2 -c "$tmp/bad.yaml" -- true >"$tmp/out" 2>&1 || status=$?
[ "$status" != 0 ] || fail "a bad config was accepted"
grep -q "bad.yaml:1:10" "$tmp/out" || fail "the config error lacks file:line:col"
echo "ok: a bad config is refused once, before any rank starts"

# Two "nodes" on this host: the same command with --nnodes 2 and each --node-rank.
port=$((20000 + RANDOM % 12000))  # below the ephemeral range, where other tests' connections take ports
for node in 0 1; do
  "$commhost" run -n 2 --nnodes 2 --node-rank $node --master 127.0.0.1:$port -c "$src/configs/gloo.yaml" -- \
    "$(dirname "$commhost")/commhost_all_collectives" --elements 64 >"$tmp/node$node" 2>&1 &
done
wait %1 || fail "node 0 failed: $(cat "$tmp/node0")"
wait %2 || fail "node 1 failed: $(cat "$tmp/node1")"
for r in 0 1 2 3; do
  node=$((r / 2))
  grep -q "^\[$r\] \[rank $r\] all collectives correct: 4 ranks" "$tmp/node$node" || fail "rank $r on node $node"
done
echo "ok: two launchers with --nnodes 2 form one 4-rank job with global rank numbers"

# Launch reports (commhost/sdk/launch_report.h): the launcher learns why a rank failed from the
# rank's report channel, not from its output. The ranks' output goes to /dev/null here, so
# nothing the launcher prints below was read from what they wrote.
quiet=(sh -c 'exec "$0" "$@" >/dev/null 2>&1')
status=0
"$commhost" run -n 3 -c "$src/configs/gloo.yaml" -- "${quiet[@]}" "$commhost" bench --op allreduce --sizes 1K \
  --iters 200 --warmup 0 --inject exit:1@5 >"$tmp/out" 2>&1 || status=$?
[ "$status" = 1 ] || fail "exit status $status, expected 1 (a survivor's)"
# A survivor may see the other survivor leave (it exits on its own error) before it learns
# of rank 1: it then names that peer first, and rank 1 after it.
others='(peer [02] lost: [^;]*; )?'
grep -Eq "stopped the job: rank [02] failed \(exit 1: \[peer-lost\] \[group main rank [02]\] allreduce seq 5: ${others}peer 1 lost" \
  "$tmp/out" || fail "the stop reason lacks the survivor's reported error"
for r in 0 2; do
  grep -Eq "^  rank $r: \[peer-lost\] \[group main rank $r\] allreduce seq 5: ${others}peer 1 lost: .*saw it go\.$" "$tmp/out" ||
    fail "the summary lacks rank $r's own account (its first sentence)"
done
echo "ok: each survivor's reported error (code, group, op, seq, peer) is in the summary, its output unread"

status=0
"$commhost" run -n 2 -c "$src/configs/gloo.yaml" -- "${quiet[@]}" sh -c \
  '[ "$RANK" = 1 ] && export COMMHOST_OVERRIDES=group.timeout=banana; exec "$0" "$@"' \
  "$(dirname "$commhost")/commhost_all_collectives" --elements 64 >"$tmp/out" 2>&1 || status=$?
[ "$status" = 2 ] || fail "exit status $status, expected rank 1's 2 (a config error)"
grep -Eq "^  rank 1: \[config\] config .*gloo.yaml has 1 error: --set group.timeout=banana .* is not a duration" \
  "$tmp/out" || fail "rank 1's init failure was not reported on one line"
echo "ok: a rank whose init fails reports its ConfigError to the launcher"

# A rank that closes its report channel (a program that closes the descriptors it did not
# open) leaves the launcher idle, not woken by the closed end in a loop: over a 2 s rank,
# a spinning launcher would use about 2 s of CPU.
TIMEFORMAT='%U %S'  # bash's own `time`: user and system seconds of the launcher and its rank
{ time "$commhost" run -n 1 -- sh -c 'eval "exec ${COMMHOST_LAUNCH_REPORT_FD}>&-"; sleep 2' >"$tmp/out" 2>&1; } \
  2>"$tmp/cpu" || fail "the job that closed its channel failed"
cpu=$(awk '{ printf "%d", ($1 + $2) * 1000 }' "$tmp/cpu")
[ "$cpu" -lt 1000 ] || fail "the launcher used ${cpu} ms of CPU over a 2 s rank that closed its report channel: a busy loop"
echo "ok: a rank that closes its report channel costs the launcher ${cpu} ms of CPU over 2 s"

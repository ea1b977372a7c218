#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The shm backend's faults with real processes (configs/shm.yaml):
#   1. a rank issues a 3-element allreduce where the others issue 256 elements
#      (bench --check --inject mismatch): every rank fails naming both ranks and both
#      sizes, and the job exits non-zero (before: wrong sums and exit 0);
#   2. a rank is stopped (SIGSTOP) in an inline allreduce loop: the survivor fails with
#      "peer 1 lost" soon after heartbeat.timeout (2 s), long before group.timeout (60 s);
#      resumed 7+ s later, the stopped rank says it was not scheduled, and blames no
#      backend call;
#   3. a rank stopped for 6 s inside a wait (timeout 3 s): its error says this process was
#      not scheduled, instead of only blaming the peer it waited for.
#   shm_faults_test.sh <commhost binary> <config> [scenarios, default "1 2 2r 3"; 2r: 2's
#   resumed rank]
# The gloo_faults test runs scenario 2 on configs/gloo.yaml, whose small ops run on the
# caller (inline_max) as shm's do, without 2r: a gloo rank resumed after its peer exited
# may wait in Gloo until the group timeout (README, the gloo backend).
set -euo pipefail
commhost=$1
config=$2
scenarios=" ${3:-1 2 2r 3} "
wanted() { [[ "$scenarios" == *" $1 "* ]]; }
tmp=$(mktemp -d)
export TMPDIR="$tmp"  # flight-recorder dumps (default dump_dir: $TMPDIR/commhost-traces-UID) stay in this run's dir
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -KILL "$p" 2>/dev/null || true; done
  [ -n "${KEEP_TMP:-}" ] && echo "logs in $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -30 "$f"; }; done; exit 1; }
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
below() { awk -v x="$1" -v lim="$2" 'BEGIN { exit !(x < lim) }'; }

if wanted 1; then
echo "== 1. rank 1 issues a 3-element allreduce as seq 3 (the others: 1 KiB = 256 x f32)"
status=0
timeout 60 "$commhost" run -n 2 -c "$config" --set supervisor.flight_recorder.dump_dir="$tmp/traces" -- \
  "$commhost" bench --op allreduce --sizes 1K --check --iters 5 \
  --warmup 1 --inject mismatch:1@3 >"$tmp/mismatch.log" 2>&1 || status=$?
[ "$status" -ne 0 ] || fail "the mismatched job exited 0"
[ "$status" -ne 124 ] || fail "the mismatched job hung"
for r in 0 1; do
  line=$(grep -E "^\[$r\] commhost: " "$tmp/mismatch.log" || true)
  [ -n "$line" ] || fail "rank $r reported no error"
  for want in "rank $r] allreduce seq 3" "rank 0 issued allreduce of 256 x f32 (1024 bytes, sum)" \
              "rank 1 issued allreduce of 3 x f32 (12 bytes, sum)"; do
    grep -qF "$want" <<<"$line" || fail "rank $r's error lacks '$want': $line"
  done
done
echo "ok: both ranks fail naming both sizes; the job exits $status"
fi

if wanted 2; then
echo "== 2. rank 1 stopped (SIGSTOP) mid-loop; heartbeat timeout 2 s, group timeout 60 s"
port=$((20000 + RANDOM % 12000))  # below the ephemeral range, where other tests' connections take ports
common=(WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COMMHOST_CONFIG=$config)
loop=(bench --op allreduce --sizes 1K --iters 100000000 --warmup 0 --set group.timeout=60s
      --set supervisor.heartbeat.interval=200ms --set supervisor.heartbeat.timeout=2s
      --set supervisor.flight_recorder.dump_dir="$tmp/traces")
env RANK=0 LOCAL_RANK=0 "${common[@]}" "$commhost" "${loop[@]}" >"$tmp/survivor.log" 2>&1 &
survivor=$!
pids+=($survivor)
env RANK=1 LOCAL_RANK=1 "${common[@]}" "$commhost" "${loop[@]}" >"$tmp/stopped.log" 2>&1 &
stopped=$!
pids+=($stopped)
sleep 3  # set up, and well inside the loop
kill -0 $survivor 2>/dev/null || fail "the survivor ended before its peer was stopped"
kill -STOP $stopped
start=$(now)
for _ in $(seq 300); do kill -0 $survivor 2>/dev/null || break; sleep 0.1; done
kill -0 $survivor 2>/dev/null && fail "the survivor still runs 30 s after its peer was stopped"
took=$(since "$start")
status=0
wait $survivor || status=$?
echo "survivor exited $status, $took s after its peer was stopped"
[ "$status" -ne 0 ] || fail "the survivor exited 0"
line=$(grep -E "commhost: " "$tmp/survivor.log" | tail -1)
grep -q "rank 0\] allreduce seq [0-9]*: peer 1 lost: no heartbeat" <<<"$line" ||
  fail "the survivor's error does not say peer 1 lost: $line"
below "$took" 15 || fail "the survivor failed only after $took s (heartbeat timeout 2 s, group timeout 60 s)"
echo "ok: the survivor failed with 'peer 1 lost' after $took s"
fi
if wanted 2r; then

# Resume the stopped rank after 7+ s: its own threads stood still all that time.
while below "$(since "$start")" 7.5; do sleep 0.2; done
kill -CONT $stopped
for _ in $(seq 300); do kill -0 $stopped 2>/dev/null || break; sleep 0.1; done
kill -0 $stopped 2>/dev/null && fail "the resumed rank still runs 30 s later"
status=0
wait $stopped || status=$?
[ "$status" -ne 0 ] || fail "the resumed rank exited 0"
grep -q "this process was not scheduled for [0-9.]*m\?s" "$tmp/stopped.log" ||
  fail "the resumed rank does not say it was not scheduled"
! grep -q "is blocked" "$tmp/stopped.log" || fail "the resumed rank blames a blocked backend call"
echo "ok: the resumed rank says it was not scheduled (exit $status)"
fi

if wanted 3; then
echo "== 3. rank 1 stopped (SIGSTOP) for 6 s while it waits for rank 0 (hung at seq 5); timeout 3 s"
port=$((20000 + RANDOM % 12000))  # below the ephemeral range, where other tests' connections take ports
common=(WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COMMHOST_CONFIG=$config)
hang=(bench --op allreduce --sizes 1K --iters 100 --warmup 0 --inject hang:0@5 --set group.timeout=3s
      --set supervisor.flight_recorder.dump_dir="$tmp/traces")
env RANK=0 LOCAL_RANK=0 "${common[@]}" "$commhost" "${hang[@]}" >"$tmp/hung.log" 2>&1 &
hung=$!
pids+=($hung)
env RANK=1 LOCAL_RANK=1 "${common[@]}" "$commhost" "${hang[@]}" >"$tmp/waiter.log" 2>&1 &
waiter=$!
pids+=($waiter)
for _ in $(seq 300); do grep -q "inject at seq 5: hanging" "$tmp/hung.log" && break; sleep 0.1; done
grep -q "inject at seq 5: hanging" "$tmp/hung.log" || fail "rank 0 never reached its hang"
sleep 0.3  # rank 1 is waiting in seq 5 now (its timeout: 3 s)
kill -STOP $waiter
sleep 6
kill -CONT $waiter
for _ in $(seq 300); do kill -0 $waiter 2>/dev/null || break; sleep 0.1; done
kill -0 $waiter 2>/dev/null && fail "the resumed rank still runs 30 s later"
status=0
wait $waiter || status=$?
[ "$status" -ne 0 ] || fail "the resumed rank exited 0"
# Any of its error lines (a log line of the heartbeat's may come after it).
line=$(grep -E "commhost: .*allreduce seq 5" "$tmp/waiter.log" || true)
grep -q "allreduce seq 5.*this process itself was not scheduled for [0-9]* ms" <<<"$line" ||
  fail "the resumed rank's error does not say it was not scheduled: $line"
kill -KILL $hung 2>/dev/null || true
echo "ok: the resumed rank's error says it was not scheduled"
fi

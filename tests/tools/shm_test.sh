#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The shm backend across processes (configs/shm.yaml: shm for what it serves, gloo for
# the rest): `commhost bench --check` of every op at 2 and 3 ranks, the all_collectives
# example at 3 ranks, and a rank killed mid-allreduce: the survivor fails within the
# timeout naming rank, op, seq and the lost peer within 3 s of the kill (the backend's own
# evidence, not the heartbeat's verdict), and nothing is left in /dev/shm.
#   shm_test.sh <commhost binary> <all_collectives binary> <shm config>
set -euo pipefail
commhost=$1
collectives=$2
config=$3
tmp=$(mktemp -d)
export TMPDIR="$tmp"  # flight-recorder dumps (default dump_dir: $TMPDIR/commhost-traces-UID) stay in this run's dir
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  [ -n "${KEEP_TMP:-}" ] && echo "logs in $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -25 "$f"; }; done; exit 1; }
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done
segments() { ls /dev/shm | grep -c '^commhost-shm-' || true; }
before=$(segments)

# Every op checked, sizes up to 1 MiB (several 256 KiB chunks; one- and two-shot allreduce).
for n in 2 3; do
  "$commhost" run -n $n -c "$config" -- "$commhost" bench --op all --check --sizes 8:1M --factor 8 \
    --iters 3 --warmup 1 >"$tmp/bench$n.log" 2>&1 || fail "bench --check at $n ranks"
  rows=$(grep -E '^\[0\] +[0-9]+ +[0-9]+ ' "$tmp/bench$n.log" | wc -l)
  wrong=$(grep -E '^\[0\] +[0-9]+ +[0-9]+ ' "$tmp/bench$n.log" | awk '$NF != 0' | wc -l)
  [ "$rows" -ge 50 ] || fail "expected every op's rows at $n ranks, got $rows"
  [ "$wrong" -eq 0 ] || fail "rows with wrong elements at $n ranks"
  echo "ok: every op checked through shm (gloo for the rest) at $n ranks"
done

"$commhost" run -n 3 -c "$config" -- "$collectives" --elements 100003 >"$tmp/collectives.log" 2>&1 ||
  fail "all_collectives at 3 ranks"
echo "ok: all_collectives at 3 ranks"

# A rank killed (SIGKILL) in the middle of an allreduce loop, started as a launcher would.
port=$((20000 + RANDOM % 12000))  # below the ephemeral range, where other tests' connections take ports
common=(WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COMMHOST_CONFIG=$config)
loop=(bench --op allreduce --sizes 1M:1M --iters 1000000 --warmup 0)
env RANK=0 LOCAL_RANK=0 "${common[@]}" "$commhost" "${loop[@]}" >"$tmp/survivor.log" 2>&1 &
survivor=$!
pids+=($survivor)
env RANK=1 LOCAL_RANK=1 "${common[@]}" "$commhost" "${loop[@]}" >"$tmp/victim.log" 2>&1 &
victim=$!
pids+=($victim)
sleep 3  # set up, and well inside the loop
kill -0 $survivor 2>/dev/null || fail "the survivor ended before its peer was killed"
kill -KILL $victim
start=$(date +%s.%N)
# The backend sees the process gone: the error must not wait for the heartbeat's
# verdict (heartbeat.timeout, 10 s). 6 s leaves room for a loaded sanitizer build.
for _ in $(seq 400); do grep -q "commhost: .*exited" "$tmp/survivor.log" && break; sleep 0.05; done
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
grep -q "commhost: .*exited" "$tmp/survivor.log" || fail "no error from the survivor 20 s after its peer died"
awk -v t="$took" 'BEGIN { exit !(t < 6) }' || fail "the survivor's error came $took s after the kill (want < 6 s)"
for _ in $(seq 200); do kill -0 $survivor 2>/dev/null || break; sleep 0.1; done
kill -0 $survivor 2>/dev/null && fail "the survivor still runs 10 s after its error"
status=0
wait $survivor || status=$?
echo "survivor reported the death $took s after the kill, exited $status"
[ "$status" -ne 0 ] || fail "the survivor exited 0"
[ "$status" -lt 128 ] || fail "the survivor died of signal $((status - 128))"
grep -q "rank 0\] allreduce seq [0-9]* (peer 1)" "$tmp/survivor.log" || fail "the error does not name rank, op, seq, peer"
grep -q "commhost: .*peer 1 lost: .*rank 1 (pid $victim) exited" "$tmp/survivor.log" ||
  fail "the error does not say peer 1 is lost because its process exited"
echo "ok: the survivor failed cleanly naming the lost peer"

# The launcher's fault injection: a rank exits at seq 20; the job ends with an error.
status=0
"$commhost" run -n 2 -c "$config" -- "$commhost" bench --op allreduce --sizes 64K:64K --iters 100 \
  --inject exit:1@20 >"$tmp/inject.log" 2>&1 || status=$?
[ "$status" -ne 0 ] || fail "the job with an exiting rank exited 0"
echo "ok: a rank exiting mid-allreduce ends the job with status $status"

after=$(segments)
[ "$after" -le "$before" ] || { ls -l /dev/shm; fail "segments left in /dev/shm ($before before, $after after)"; }
echo "ok: nothing left in /dev/shm"

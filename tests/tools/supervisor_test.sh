#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The supervisor end to end, with real ranks under `commhost run` and faults injected by
# `commhost bench --inject`:
#   1. a rank hangs: the others fail within the timeout naming the rank and the seq, every
#      rank dumps its flight recorder, and `trace analyze` / `trace export` read the dumps;
#   2. a rank exits mid-loop under a long collective timeout: the heartbeat reports
#      "peer N lost" and the job ends long before the collective timeout;
#   3. a rank issues a different collective with debug.check_collectives: a diff, no hang;
#   4. a rank sent SIGTERM (as a launcher ends a job) while it waits in a collective: it says
#      which op and seq it was in, dumps, and ends by SIGTERM (supervisor.on_sigterm: report);
#      with on_sigterm: off it ends silently, as before.
#   supervisor_test.sh <commhost> <repo root>
set -euo pipefail
commhost=$1
root=$2
tmp=$(mktemp -d)
export TMPDIR="$tmp"  # flight-recorder dumps (default dump_dir: $TMPDIR/commhost-traces-UID) stay in this run's dir
trap 'rm -rf "$tmp"' EXIT
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done
fail() { echo "FAIL: $*"; exit 1; }
now() { date +%s.%N; }
elapsed_below() { awk -v a="$1" -v b="$(now)" -v lim="$2" 'BEGIN { exit !(b - a < lim) }'; }
# The lines "commhost: ..." are the errors the ranks ended with.
errors() { grep -E '^\[[0-9]+\] commhost: ' "$1" || true; }

echo "== 1. rank 2 hangs at allreduce seq 10 (4 ranks, timeout 2s)"
dumps=$tmp/dumps
start=$(now)
status=0
"$commhost" run -n 4 -c "$root/configs/gloo.yaml" --set group.timeout=2s \
  --set supervisor.flight_recorder.dump_dir="$dumps" -- \
  "$commhost" bench --op allreduce --sizes 1K --iters 100 --warmup 0 --inject hang:2@10 >"$tmp/hang.log" 2>&1 || status=$?
elapsed_below "$start" 8 || { cat "$tmp/hang.log"; fail "the hung job took more than 8 s to end"; }
[ "$status" -ne 0 ] || { cat "$tmp/hang.log"; fail "the launcher exited 0"; }
for r in 0 1 3; do
  line=$(grep -E "^\[$r\] commhost: " "$tmp/hang.log" || true)
  [ -n "$line" ] || { cat "$tmp/hang.log"; fail "rank $r reported no error"; }
  grep -q "allreduce seq 10" <<<"$line" || fail "rank $r's error does not name allreduce seq 10: $line"
  grep -q "Rank 2 never joined allreduce seq 10" <<<"$line" || fail "rank $r's error does not name rank 2: $line"
done
# Each rank's own measure of how long it waited: the timeout plus at most a second.
errors "$tmp/hang.log" | grep -o 'issued [0-9]*ms ago' | grep -o '[0-9]*' | while read -r ms; do
  [ "$ms" -lt 3000 ] || fail "a rank reported the hang only after ${ms} ms (timeout 2 s)"
done
for r in 0 1 2 3; do [ -s "$dumps/rank$r.json" ] || fail "no flight recorder dump for rank $r in $dumps"; done
"$commhost" trace analyze "$dumps" >"$tmp/analyze.txt" || { cat "$tmp/analyze.txt"; fail "trace analyze failed"; }
cat "$tmp/analyze.txt"
grep -q "allreduce seq 10" "$tmp/analyze.txt" || fail "trace analyze does not name allreduce seq 10"
grep -q "Rank 2 never issued it" "$tmp/analyze.txt" || fail "trace analyze does not name rank 2"
"$commhost" trace export "$dumps" --chrome "$tmp/trace.json"
python3 - "$tmp/trace.json" <<'EOF' || fail "trace export did not write a Chrome trace with a track per rank"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
pids = {e["pid"] for e in events if e.get("ph") == "X"}
assert len(pids) == 4, pids
assert any("seq 10" in e.get("name", "") or e.get("args", {}).get("seq") == 10 for e in events)
EOF

echo "== 2. rank 1 exits at seq 20 (3 ranks, collective timeout 60s, heartbeat timeout 3s)"
start=$(now)
status=0
"$commhost" run -n 3 -c "$root/configs/gloo.yaml" --set group.timeout=60s --set supervisor.heartbeat.timeout=3s -- \
  "$commhost" bench --op allreduce --sizes 1K --iters 1000 --warmup 0 --inject exit:1@20 >"$tmp/exit.log" 2>&1 || status=$?
elapsed_below "$start" 10 || { cat "$tmp/exit.log"; fail "the job took more than 10 s to end"; }
[ "$status" -ne 0 ] || { cat "$tmp/exit.log"; fail "the launcher exited 0"; }
for r in 0 2; do
  line=$(grep -E "^\[$r\] commhost: " "$tmp/exit.log" || true)
  grep -q "peer 1 lost" <<<"$line" || { cat "$tmp/exit.log"; fail "rank $r's error does not say peer 1 lost: $line"; }
done
# No dump_dir was given: the default is under $TMPDIR (this run's $tmp), not the working directory.
[ -s "$tmp/commhost-traces-$(id -u)/rank0.json" ] || fail "no dump in the default dump dir \$TMPDIR/commhost-traces-UID"

echo "== 3. rank 1 issues a different allreduce at seq 5 with debug.check_collectives"
start=$(now)
status=0
"$commhost" run -n 3 -c "$root/configs/gloo.yaml" --set group.timeout=30s --set debug.check_collectives=true -- \
  "$commhost" bench --op allreduce --sizes 1K --iters 100 --warmup 0 --inject mismatch:1@5 >"$tmp/mismatch.log" 2>&1 || status=$?
elapsed_below "$start" 10 || { cat "$tmp/mismatch.log"; fail "the mismatch was not caught at once"; }
[ "$status" -ne 0 ] || { cat "$tmp/mismatch.log"; fail "the launcher exited 0"; }
for r in 0 1 2; do
  line=$(grep -E "^\[$r\] commhost: " "$tmp/mismatch.log" || true)
  grep -q "ranks disagree on collective seq 5" <<<"$line" || { cat "$tmp/mismatch.log"; fail "rank $r gave no diff: $line"; }
  grep -q "rank 1 called allreduce(tensor=f32\[3\]" <<<"$line" || fail "rank $r's diff does not name rank 1's call: $line"
done

echo "== 4. rank 0 sent SIGTERM while rank 1 hangs at allreduce seq 20 (2 ranks, timeout 60s)"
# rank_pid LAUNCHER R: the pid of rank R among that launcher's children (their RANK
# variable): never a rank of another job running on the machine meanwhile.
rank_pid() {
  local pid
  for pid in $(pgrep -P "$1"); do
    tr '\0' '\n' </proc/$pid/environ 2>/dev/null | grep -qx "RANK=$2" && { echo "$pid"; return; }
  done
  true
}
for mode in report off; do
  "$commhost" run -n 2 -c "$root/configs/gloo.yaml" --set group.timeout=60s --set supervisor.on_sigterm=$mode -- \
    "$commhost" bench --op allreduce --sizes 1K --iters 1000 --warmup 0 --inject hang:1@20 >"$tmp/term.log" 2>&1 &
  job=$!
  pid=""
  for _ in $(seq 100); do pid=$(rank_pid $job 0); [ -n "$pid" ] && grep -q "allreduce (route" "$tmp/term.log" && break; sleep 0.1; done
  [ -n "$pid" ] || { cat "$tmp/term.log"; fail "rank 0 did not start"; }
  sleep 1  # rank 0 now waits in seq 20 for rank 1
  kill -TERM "$pid"
  start=$(now)
  wait $job && fail "the launcher exited 0 after rank 0 was terminated"
  elapsed_below "$start" 20 || fail "the job took more than 20 s to end after SIGTERM"
  line=$(grep -E "^\[0\] .*terminated by SIGTERM" "$tmp/term.log" || true)
  if [ $mode = report ]; then
    grep -qE "\[group main rank 0\] allreduce seq 2[01]: terminated by SIGTERM while in it" <<<"$line" ||
      { cat "$tmp/term.log"; fail "rank 0 did not say which op it was in when terminated"; }
    grep -q "flight recorder dumped to" <<<"$line" || fail "rank 0 did not dump on SIGTERM: $line"
  else
    [ -z "$line" ] || fail "supervisor.on_sigterm: off still reported: $line"
  fi
  grep -qiE "rank 0.*(SIGTERM|signal 15|terminated)" "$tmp/term.log" || { cat "$tmp/term.log"; fail "the launcher did not say rank 0 ended by SIGTERM"; }
done
echo "ok: hang, lost peer, mismatch and SIGTERM are each reported, naming the rank and the seq"

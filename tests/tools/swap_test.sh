#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Hot swap under `commhost run -n 4` on loopback: `bench --swap-every --check` between a
# gloo config and an shm config (no wrong result, every swap's phase times, p50/p99),
# `trace analyze` and the Chrome export showing generations and swaps; then a rank killed
# in the middle of a swap (the failrank test plugin kills itself while building): the
# others exit with an error naming the reconfigure and the lost rank, in bounded time.
#   swap_test.sh <commhost binary> <test plugin dir (good/)>
set -euo pipefail
commhost=$1
plugins=$(cd "$2" && pwd)
tmp=$(mktemp -d)
export TMPDIR="$tmp"  # flight-recorder dumps (default dump_dir: $TMPDIR/commhost-traces-UID) stay in this run's dir
trap 'cp "$tmp/out" /tmp/swap_last_out 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out" 2>/dev/null; exit 1; }
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done
dumps="$tmp/dumps"

cat >"$tmp/gloo.yaml" <<YAML
group: { name: main, timeout: 20s }
backends: { gloo: { options: { threads: 1, contexts: 2 } } }
routes: [{ device: cpu, backend: gloo }]
supervisor: { flight_recorder: { dump_dir: $dumps } }
logging: { level: warn }
YAML
cat >"$tmp/shm.yaml" <<YAML
group: { name: main, timeout: 20s }
backends: { gloo: { options: { threads: 1, contexts: 2 } }, shm: {} }
routes: [{ device: cpu, backend: [shm, gloo] }]
supervisor: { flight_recorder: { dump_dir: $dumps } }
logging: { level: warn }
YAML

timeout 120 "$commhost" run -n 4 -c "$tmp/gloo.yaml" -- "$commhost" bench --sizes 1K,64K --iters 20 --warmup 2 \
  --check --swap-every 5 --configs "$tmp/shm.yaml,$tmp/gloo.yaml" >"$tmp/out" 2>&1 || fail "bench --swap-every --check"
wrong=$(grep -E '^\[0\] +[0-9]+ +[0-9]+ ' "$tmp/out" | awk '$NF != 0' | wc -l)
[ "$(grep -cE '^\[0\] +[0-9]+ +[0-9]+ ' "$tmp/out")" -eq 2 ] || fail "expected 2 table rows"
[ "$wrong" -eq 0 ] || fail "wrong elements across swaps"
# (2 warmup + 20 timed + 1 check) x 2 sizes = 46 runs of the op: a swap before runs 6, 11, ... 46.
swaps=$(grep -c '^\[0\] # swap [0-9]* to .*check .* ms, drain .* ms, build .* ms, commit .* ms, total' "$tmp/out")
[ "$swaps" -eq 9 ] || fail "expected 9 swap lines, got $swaps"
grep -q 'swap 1 to .*shm.yaml: generation 1,.*kept gloo; built shm' "$tmp/out" || fail "the first swap is not to shm"
grep -q 'swap 2 to .*gloo.yaml: generation 2,.*kept gloo; built -' "$tmp/out" || fail "the second swap is not back to gloo"
grep -Eq '^\[0\] # 9 swaps: total p50 [0-9.]+ ms, p99 [0-9.]+ ms' "$tmp/out" || fail "no p50/p99 line"
echo "ok: bench --swap-every 5 --check: 9 swaps, no wrong element"

# The dumps show each op's generation and every swap.
"$commhost" run -n 4 -c "$tmp/gloo.yaml" -- "$commhost" bench --sizes 1K --iters 4 --warmup 0 --swap-every 2 \
  --configs "$tmp/shm.yaml,$tmp/gloo.yaml" --inject hang:1@4 --set group.timeout=2s >"$tmp/out" 2>&1 && fail "the hang was not reported"
"$commhost" trace analyze "$dumps" >"$tmp/out" 2>&1 || fail "trace analyze"
grep -q 'Group main: .* hot swap record.*the last on each rank' "$tmp/out" || fail "analyze lists no swaps"
grep -q 'rank 0: generation 0 -> 1 committed (check .* ms, drain .* ms, build .* ms, commit .* ms)' "$tmp/out" ||
  fail "analyze lacks rank 0's swap and its phase times"
grep -q 'allreduce seq 4 (f32, 256 elements, shm, config generation 1)' "$tmp/out" || fail "analyze lacks the generation"
"$commhost" trace export "$dumps" --chrome "$tmp/trace.json" >"$tmp/out" 2>&1 || fail "trace export"
grep -q '"generation":1' "$tmp/trace.json" || fail "the Chrome trace has no generation"
grep -q '"name":"swap main 0->1 (committed)"' "$tmp/trace.json" || fail "the Chrome trace has no swap slice"
echo "ok: trace analyze and the Chrome export show generations and swaps"

# Shadow mode: shm serves, gloo re-runs every allreduce (sample: 1) and the results are
# compared; bench prints the tally, a dump carries every comparison, analyze sums them.
cat >"$tmp/shadow.yaml" <<YAML
group: { name: main, timeout: 20s }
plugin_path: [ $plugins ]
backends: { gloo: { options: { threads: 1, contexts: 2 } }, shm: {}, off: { plugin: offbyone } }
routes: [{ device: cpu, backend: [shm, gloo] }, { device: cpu, op: allreduce, backend: shm, shadow: gloo, sample: 1 }]
supervisor: { flight_recorder: { dump_dir: $dumps } }
logging: { level: warn }
YAML
rm -rf "$dumps"
timeout 120 "$commhost" run -n 4 -c "$tmp/shadow.yaml" -- "$commhost" bench --sizes 1K,64K --iters 10 --warmup 0 \
  --check >"$tmp/out" 2>&1 || fail "bench with a gloo shadow"
grep -Eq '^\[0\] # shadow: allreduce on shm, shadow gloo, up to 1024 bytes: ([0-9]+)/\1 agree; the shadow took [0-9.]+x the time' \
  "$tmp/out" || fail "bench printed no agreeing 1 KiB shadow tally"
grep -Eq '^\[0\] # shadow: allreduce on shm, shadow gloo, up to 65536 bytes: ([0-9]+)/\1 agree' "$tmp/out" ||
  fail "bench printed no agreeing 64 KiB shadow tally"
! grep -q disagree "$tmp/out" || fail "a disagreement between shm and gloo"
# A wrong shadow (off by one) is caught, and the caller still gets shm's right result.
# No settling: hundreds of in-place sums would take the data to where adding one changes
# nothing (the tally must be all disagreements).
sed 's/shadow: gloo/shadow: off/' "$tmp/shadow.yaml" >"$tmp/wrong.yaml"
timeout 120 "$commhost" run -n 4 -c "$tmp/wrong.yaml" -- "$commhost" bench --sizes 1K \
  --iters 4 --warmup 0 --settle 0 --check >"$tmp/out" 2>&1 || fail "bench with a wrong shadow (the primary's results are right)"
grep -Eq '^\[0\] # shadow: allreduce on shm, shadow off, up to 1024 bytes: 0/[0-9]+ agree, [0-9]+ disagree' "$tmp/out" ||
  fail "the wrong shadow's disagreements are not counted"
grep -q '^\[0\] #   first disagreement: .*element 0' "$tmp/out" || fail "no first disagreement with the element"
# A hang dumps every rank's flight recorder; analyze sums the comparisons over the ranks.
timeout 120 "$commhost" run -n 4 -c "$tmp/shadow.yaml" -- "$commhost" bench --sizes 1K --iters 6 --warmup 0 \
  --inject hang:1@5 --set group.timeout=2s >"$tmp/out" 2>&1 && fail "the hang was not reported"
"$commhost" trace analyze "$dumps" >"$tmp/out" 2>&1 || fail "trace analyze (shadow)"
# Every comparison agrees, except that the hung op itself may be counted as failed on the
# ranks whose primary timed out before their dump (a race with the dump, not a disagreement).
line=$(grep -E '^Group main: allreduce on shm, shadow gloo, up to 1 KiB: ' "$tmp/out") ||
  fail "analyze does not sum the shadow comparisons"
[[ $line =~ :\ ([0-9]+)/([0-9]+)\ agree(,\ ([0-9]+)\ failed)?\;\ the\ shadow\ took ]] ||
  fail "analyze's shadow line is not 'A/N agree[, F failed]; the shadow took ...': $line"
agreed=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]} failed=${BASH_REMATCH[4]:-0}
((agreed > 0 && agreed + failed == total && failed <= 4)) ||
  fail "analyze's shadow tally is off (want agreements plus at most one failed per rank): $line"
echo "ok: shadow mode: gloo agrees with shm, an off-by-one shadow is caught, analyze sums the dumps"

# Rank 2 dies while building the new backends; the others are inside the rendezvous.
cat >"$tmp/kill.yaml" <<YAML
group: { name: main, timeout: 20s }
plugin_path: [ $plugins ]
backends:
  gloo: { options: { threads: 1, contexts: 2 } }
  fr: { plugin: failrank, options: { fail_rank: 2, fail: kill } }
routes: [{ device: cpu, backend: gloo }, { device: cpu, op: allreduce, backend: fr }]
supervisor: { heartbeat: { interval: 200ms, timeout: 2s }, flight_recorder: { dump_dir: $dumps } }
logging: { level: warn }
YAML
# The group's plugin registry comes from the config the job starts with: it must find failrank.
sed -i "s|^supervisor:.*|supervisor: { heartbeat: { interval: 200ms, timeout: 2s }, flight_recorder: { dump_dir: $dumps } }|" "$tmp/gloo.yaml"
echo "plugin_path: [ $plugins ]" >>"$tmp/gloo.yaml"
start=$(date +%s)
status=0
timeout 60 "$commhost" run -n 4 --settle 10 -c "$tmp/gloo.yaml" -- "$commhost" bench --sizes 1K --iters 10 --warmup 0 \
  --swap-every 3 --configs "$tmp/kill.yaml" >"$tmp/out" 2>&1 || status=$?
elapsed=$(( $(date +%s) - start ))
[ "$status" -ne 0 ] || fail "the job exited 0 though rank 2 died"
[ "$status" -ne 124 ] || fail "the job hung (60 s)"
[ "$elapsed" -lt 20 ] || fail "the survivors took ${elapsed} s (group.timeout is 20 s; the heartbeat's is 2 s)"
for r in 0 1 3; do
  grep -q "^\[$r\] commhost: .*\[group main rank $r\] reconfigure: .*peer 2 lost" "$tmp/out" ||
    fail "rank $r's error does not name the reconfigure and the lost rank 2"
done
echo "ok: rank 2 killed mid-swap; ranks 0, 1, 3 named it and exited in ${elapsed} s"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Live re-routing (`tune: live`) in real jobs under `commhost run`: a route listing gloo then
# shm moves each size class bench runs to shm at 2 and 4 ranks, with every result checked,
# and `config check` lists the candidates; a candidate that is faster but wrong (offbyone,
# against a backend slowed by 20 ms an op) is dropped at the first round and never chosen,
# while the caller's results stay right, also beside a right candidate (gloo, off, shm: shm
# is chosen); a hang's dumps show the switches in `trace analyze`.
#   live_test.sh <commhost binary> <test plugin dir>
set -euo pipefail
commhost=$1
plugins=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/check_lib.sh"
tmp=$(mktemp -d)
export TMPDIR="$tmp"
trap 'rm -rf "$tmp"' EXIT
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done
dumps=$tmp/dumps

cat >"$tmp/live.yaml" <<YAML
group: { name: main, timeout: 60s }
tune: { live_every: 10, live_window: 8 }
backends: { gloo: { options: { threads: 1 } }, shm: {} }
routes: [{ device: cpu, backend: [gloo, shm], tune: live, sample: 0.25 }]
supervisor: { flight_recorder: { dump_dir: $dumps } }
logging: { level: warn }
YAML

step "config check lists the live candidates"
run "$commhost" config check "$tmp/live.yaml"
expect_rc0 "config check"
expect_regex "config check" "cpu allreduce .*-> gloo \\(live candidates shm\\)"
pass "allreduce on gloo, shm sampled beside it"

# Each size runs 1000 iterations: once nothing changes the rounds back off up to 64 x
# live_every = 640 sync points apart, so a size must outlast that (plus the 32 its window
# of 8 takes at sample 0.25) for a round to see it while it runs. With 300 a class was
# sometimes never decided: its round came after bench had ended.
for n in 2 4; do
  step "$n ranks: bench moves every size class it runs from gloo to shm"
  run timeout 300 "$commhost" run -n $n -c "$tmp/live.yaml" -- "$commhost" bench --op allreduce --sizes 8,4K,256K \
    --iters 1000 --warmup 0 --check
  expect_rc0 "bench at $n ranks"
  expect_text "bench at $n ranks" "live routing moved these during the run"
  for range in "5..8" "2049..4096" "131073..262144"; do
    expect_regex "bench at $n ranks" "^\\[0\\] # live: cpu allreduce f32 sum $range bytes -> shm: tune: live: shm took"
  done
  ! grep -q "disagree" <<<"$out" || fail "gloo and shm disagreed"
  pass "8 B, 4 KiB and 256 KiB moved to shm; every result checked"
done

step "a faster but wrong candidate is dropped and never chosen"
cat >"$tmp/wrong.yaml" <<YAML
group: { name: main, timeout: 60s }
plugin_path: [ $plugins ]
tune: { live_every: 4, live_window: 2, live_margin: 0 }
backends: { slow: { plugin: storecoll, options: { op_delay: 20ms } }, off: { plugin: offbyone } }
routes: [{ device: cpu, backend: [slow, off], tune: live, sample: 1 }]
logging: { level: info }
YAML
run timeout 300 "$commhost" run -n 2 -c "$tmp/wrong.yaml" -- "$commhost" bench --op allreduce --sizes 4K --iters 20 \
  --warmup 0 --settle 0 --check
expect_rc0 "bench with a wrong candidate (the routed backend's results are right)"
expect_regex "the drop" "dropped off from live routing until a hot swap or membership change rebuilds the routes: on rank [01], allreduce f32 sum 2049..4096 B, it did not match slow"
! grep -q "# live:" <<<"$out" || fail "the wrong candidate was chosen"
pass "dropped at the first round; the route stayed on slow"

step "three candidates: the wrong one is dropped, the right fast one chosen"
cat >"$tmp/three.yaml" <<YAML
group: { name: main, timeout: 60s }
plugin_path: [ $plugins ]
tune: { live_every: 10, live_window: 8 }
backends: { gloo: { options: { threads: 1 } }, shm: {}, off: { plugin: offbyone } }
routes: [{ device: cpu, backend: [gloo, off, shm], tune: live, sample: 0.5 }]
logging: { level: info }
YAML
run timeout 300 "$commhost" run -n 2 -c "$tmp/three.yaml" -- "$commhost" bench --op allreduce --sizes 4K --iters 200 \
  --warmup 0 --settle 0 --check
expect_rc0 "bench over gloo with candidates off and shm"
expect_regex "the drop" "dropped off from live routing until a hot swap or membership change rebuilds the routes"
expect_regex "the move" "^\\[0\\] # live: cpu allreduce f32 sum 2049..4096 bytes -> shm: tune: live: shm took"
! grep -qE "# live: .* -> off" <<<"$out" || fail "the wrong candidate was chosen"
pass "the candidates took turns; off dropped, shm chosen"

step "trace analyze shows the switches from a hang's dumps"
run timeout 300 "$commhost" run -n 2 -c "$tmp/live.yaml" -- "$commhost" bench --op allreduce --sizes 4K --iters 200 \
  --warmup 0 --inject hang:1@150 --set group.timeout=3s
expect_rc_nonzero "the injected hang"
run "$commhost" trace analyze "$dumps"
expect_rc0 "trace analyze"
expect_regex "trace analyze" "^Group main: live routing \\(tune: live\\) changed the routes [0-9]+ times?; rank 0's record:"
expect_regex "trace analyze" "^  generation 0 -> 1: allreduce f32 sum 2049..4096 B: gloo -> shm: shm took"
pass "the switch, its generations and why"
echo "ok: live re-routing moves to the faster candidate, never to a wrong one, and is in the flight recorder"

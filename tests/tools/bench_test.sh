#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `commhost bench --check` for every op at 2 and 3 ranks on gloo; --json FILE rows that
# parse and match the table; nccl-tests' flags and side-by-side columns; conflicting and
# bad arguments refused before any store; a specialised backend (the allreduceonly test
# plugin: f32 sum allreduce only) measured, with the bench's bookkeeping off its routes.
#   bench_test.sh <commhost binary> <gloo config> <test plugin dir (good/)>
set -euo pipefail
commhost=$1
config=$2
plugins=$3
tmp=$(mktemp -d)
export TMPDIR="$tmp"  # flight-recorder dumps (default dump_dir: $TMPDIR/commhost-traces-UID) stay in this run's dir
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out" 2>/dev/null; exit 1; }
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done
args=(--op all --check --sizes 8:64K --factor 16 --iters 2 --warmup 1)

for n in 2 3; do
  "$commhost" run -n $n -c "$config" -- "$commhost" bench "${args[@]}" >"$tmp/out" 2>&1 || fail "bench --check at $n ranks"
  rows=$(grep -Ec '^\[0\] +[0-9]+ +[0-9]+ ' "$tmp/out")
  [ "$rows" -eq 37 ] || fail "expected 37 rows (9 ops x 4 sizes + barrier), got $rows"
  wrong=$(grep -E '^\[0\] +[0-9]+ +[0-9]+ ' "$tmp/out" | awk '$NF != 0' | wc -l)
  [ "$wrong" -eq 0 ] || fail "rows with wrong elements at $n ranks"
  [ "$(grep -c 'avg bus bandwidth' "$tmp/out")" -eq 10 ] || fail "missing average lines"
  echo "ok: every op checked at $n ranks"
done

"$commhost" run -n 2 -c "$config" -- "$commhost" bench --op allgather --sizes 1K:16K --factor 4 \
  --json "$tmp/rows.jsonl" >"$tmp/table" 2>&1 || fail "bench --json FILE"
python3 - "$tmp/rows.jsonl" "$tmp/table" <<'PY' || fail "JSON rows do not match the table"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]  # every line a bare object: no "[0] " prefix
table = [l.split()[1:3] for l in open(sys.argv[2]) if l.startswith("[0]") and l.split()[1].isdigit()]
keys = {"op", "size", "count", "dtype", "device", "redop", "root", "inplace", "time_us", "algbw", "busbw", "wrong", "iters",
        "min_us", "p50_us", "p99_us", "max_us", "unstable"}
assert len(rows) == 3 and len(table) == 3, (rows, table)
for r, t in zip(rows, table):
    assert set(r) == keys, r
    assert [str(r["size"]), str(r["count"])] == t, (r, t)
    assert r["op"] == "allgather" and r["dtype"] == "f32" and r["device"] == "cpu" and abs(r["busbw"] - r["algbw"] / 2) < 1e-3
    assert r["wrong"] is None and r["root"] is None and r["inplace"] is True, r
    # No -n: at least 20 iterations, more where 20 would not fill --min-time (0.1 s).
    assert r["iters"] >= 20, r
    assert 0 < r["min_us"] <= r["p50_us"] <= r["p99_us"] <= r["max_us"], r
print("ok: --json FILE rows parse and match the table, with the spread")
PY
grep -q "iters >= 20 filling 0.1 s, warmup 5" "$tmp/table" || fail "the header does not say how iterations are chosen"

# At 1 rank sendrecv has no peer (a barrier stands in): its bus bandwidth is 0, not size/time.
"$commhost" run -n 1 -c "$config" -- "$commhost" bench --op sendrecv --sizes 1M -n 3 -w 1 \
  --json "$tmp/one.jsonl" >"$tmp/out" 2>&1 || fail "bench --op sendrecv at 1 rank"
python3 -c 'import json, sys; r = json.loads(open(sys.argv[1]).readline()); assert r["busbw"] == 0, r' "$tmp/one.jsonl" ||
  fail "sendrecv at 1 rank reports a bus bandwidth"
echo "ok: sendrecv at 1 rank reports no bus bandwidth"
# Each single-placement row: [0] size count type redop root inplc time p50 p99 algbw busbw #wrong.
awk '/^\[0\] +[0-9]+ +[0-9]+ / && (NF != 13 || $9 > $10) { bad = 1 } END { exit bad }' "$tmp/table" ||
  fail "a row lacks the p50 and p99 columns"

# --repeat K: K timed rounds per size; the row is the median round, every round in the JSON.
"$commhost" run -n 2 -c "$config" -- "$commhost" bench --op allreduce --sizes 8,4K --repeat 3 -n 5 -w 1 --check \
  --json "$tmp/repeat.jsonl" >"$tmp/out" 2>&1 || fail "bench --repeat 3"
grep -q "iters 5, 3 rounds (the median shown), warmup 1" "$tmp/out" || fail "the header does not show --repeat"
python3 -c '
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 2, rows
for r in rows:
    assert r["iters"] == 5 and r["wrong"] == 0 and len(r["round_means_us"]) == 3, r
    assert abs(r["time_us"] - statistics.median(r["round_means_us"])) < 1e-6, r
' "$tmp/repeat.jsonl" || fail "--repeat rows"
echo "ok: --repeat 3 reports the median round and every round"

# --timing loop: one clock read per timed loop (as the peers time theirs): the mean only,
# no percentiles in the JSON or the table, results still checked.
"$commhost" run -n 2 -c "$config" -- "$commhost" bench --op allreduce --sizes 8,4K --timing loop -n 50 -w 1 --check \
  --json "$tmp/loop.jsonl" >"$tmp/out" 2>&1 || fail "bench --timing loop"
python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 2, rows
for r in rows:
    assert r["iters"] == 50 and r["wrong"] == 0 and r["time_us"] > 0, r
    assert r["min_us"] is None and r["p50_us"] is None and r["p99_us"] is None and r["max_us"] is None, r
' "$tmp/loop.jsonl" || fail "--timing loop rows"
awk '/^\[0\] +[0-9]+ +[0-9]+ / { rows++; if ($9 != "-" || $10 != "-") bad = 1 } END { exit bad || rows != 2 }' "$tmp/out" ||
  fail "--timing loop: the table shows percentiles it did not measure"
echo "ok: --timing loop reports the loop's mean and no percentiles"

# No warmup, so no estimate: the first pass runs --iters (20), falls short of --min-time,
# and every rank runs on to the count its pace asks for. A row flagged unstable says why.
"$commhost" run -n 2 -c "$config" -- "$commhost" bench --op allreduce --sizes 8 -w 0 --min-time 0.5 \
  --json "$tmp/paced.jsonl" >"$tmp/out" 2>&1 || fail "bench -w 0 --min-time 0.5"
python3 -c '
import json, sys
(r,) = [json.loads(l) for l in open(sys.argv[1])]
assert r["iters"] > 20, r  # 20 iterations of an 8-byte allreduce take well under 0.5 s
assert r["unstable"] is None or "the median" in r["unstable"], r
' "$tmp/paced.jsonl" || fail "-w 0: the first pass did not correct the count"
echo "ok: without a warmup the first timed pass sets the count"

# nccl-tests' flags: -b -e -f -n -w -c, and both placements side by side.
"$commhost" run -n 2 -c "$config" -- "$commhost" bench --op allgather -b 8 -e 1K -f 4 -n 2 -w 1 -c 1 --side-by-side \
  --json "$tmp/both.jsonl" >"$tmp/out" 2>&1 || fail "bench -b -e -f -n -w -c --side-by-side"
grep -qF "iters 2, warmup 1 (the first size settles 0.2 s), out-of-place and in-place, checked" "$tmp/out" ||
  fail "the header does not show -n/-w/-c"
sizes=$(grep -E '^\[0\] +[0-9]+ +[0-9]+ ' "$tmp/out" | awk '{print $2}' | tr '\n' ' ')
[ "$sizes" = "8 32 128 512 " ] || fail "-b 8 -e 1K -f 4 ran sizes '$sizes'"
grep -q "out-of-place *in-place" "$tmp/out" || fail "no side-by-side column titles"
# Each row: [0] size count type redop root, then time algbw busbw #wrong twice.
awk '/^\[0\] +[0-9]+ +[0-9]+ / && (NF != 14 || $10 != 0 || $14 != 0) { bad = 1 } END { exit bad }' "$tmp/out" ||
  fail "a side-by-side row is not two checked measurements"
python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["inplace"] for r in rows] == [False, True] * 4, rows
assert all(r["wrong"] == 0 for r in rows), rows
' "$tmp/both.jsonl" || fail "side-by-side JSON rows"
echo "ok: -b -e -f -n -w -c and --side-by-side"

# --settle S: the first size runs untimed until the slowest rank spent S on it, before
# anything is timed, so the job lasts at least S (a lower bound settling guarantees, not a
# speed figure); 0 turns it off. (--swap-every, which counts runs, leaves it out:
# swap_test.sh counts the swaps.)
start=$(date +%s%N)
"$commhost" run -n 2 -c "$config" -- "$commhost" bench --sizes 8 -n 2 -w 0 --settle 2 >"$tmp/out" 2>&1 ||
  fail "bench --settle 2"
[ $((($(date +%s%N) - start) / 1000000)) -ge 2000 ] || fail "--settle 2: the job ended within 2 s"
grep -qF "warmup 0 (the first size settles 2 s)," "$tmp/out" || fail "the header does not show --settle 2"
"$commhost" run -n 2 -c "$config" -- "$commhost" bench --sizes 8 -n 2 -w 0 --settle 0 >"$tmp/out" 2>&1 ||
  fail "bench --settle 0"
grep -qF "iters 2, warmup 0, in-place" "$tmp/out" || fail "--settle 0: the header still shows settling"
echo "ok: --settle runs the first size untimed for that long; 0 does not"

# Conflicting flags are refused, naming both.
refused() { # refused "message" bench-args...
  local want=$1 status=0
  shift
  timeout 20 "$commhost" bench "$@" >"$tmp/out" 2>&1 || status=$?
  [ "$status" = 1 ] || fail "bench $* exited $status, want 1"
  grep -qF -- "$want" "$tmp/out" || fail "bench $*: no '$want'"
}
refused "--inplace and --out-of-place conflict" --inplace --out-of-place
refused "--side-by-side and --inplace conflict" --side-by-side --inplace
refused "--sizes and -b conflict" --sizes 8:1K -b 16
refused "--check and -c 0 conflict" --check -c 0
refused "--factor (-f) and --step (-i) conflict" -f 4 --step 8
refused "-c 2: want -c 0 (no check) or -c 1 (check)" -c 2
refused "--timing every: want each (a clock read per iteration) or loop (one per loop)" --timing every
refused "a config goes to \`commhost run -c FILE\`" -c configs/gloo.yaml
echo "ok: conflicting flags are refused"

# Argument errors come before any store: with serve: never nobody serves the store, so a
# bench that reached init() would wait up to group.timeout (60 s) for it.
for bad in "--sizes bogus" "--redop bogus" "--device gpu" "--iters 0" "--repeat 0" "--min-time -1" "--settle -1" \
  "--root 5" "-b 6" \
  "--json $tmp/no/such/dir/x.jsonl"; do
  start=$(date +%s)
  status=0
  # shellcheck disable=SC2086
  timeout 30 "$commhost" run -n 2 -c "$config" --set store.options.serve=never --set group.timeout=60s -- \
    "$commhost" bench $bad >"$tmp/out" 2>&1 || status=$?
  [ "$status" != 0 ] && [ "$status" != 124 ] || fail "bench $bad: exit $status (124: it waited for the store)"
  [ $(($(date +%s) - start)) -lt 10 ] || fail "bench $bad took over 10 s to fail"
  grep -qF -- "${bad%% *}" <(grep "commhost: " "$tmp/out") || fail "bench $bad: the error does not name ${bad%% *}"
done
echo "ok: bad arguments fail at once under commhost run, before any store"

status=0
"$commhost" run -n 1 -c "$config" -- "$commhost" bench --op allreduse >"$tmp/out" 2>&1 || status=$?
[ "$status" != 0 ] || fail "an unknown op was accepted"
grep -q "did you mean 'allreduce'" "$tmp/out" || fail "no hint for a misspelt op"
echo "ok: a misspelt op gets a hint"

# A size that is not a whole number of elements is refused, not silently run smaller.
status=0
"$commhost" run -n 1 -c "$config" -- "$commhost" bench --sizes 6 --iters 1 --warmup 0 >"$tmp/out" 2>&1 || status=$?
[ "$status" != 0 ] || fail "--sizes 6 with f32 ran"
grep -q "6 is not a whole number of f32 elements (4 bytes each); use 4 or 8" "$tmp/out" || fail "no message for --sizes 6"
"$commhost" run -n 1 -c "$config" -- "$commhost" bench --sizes 8:64 --factor 1.5 --iters 1 --warmup 0 >"$tmp/out" 2>&1 ||
  fail "a --factor 1.5 sweep"
sizes=$(grep -E '^\[0\] +[0-9]+ +[0-9]+ ' "$tmp/out" | awk '{print $2}' | tr '\n' ' ')
[ "$sizes" = "8 12 16 24 36 52 " ] || fail "a --factor 1.5 sweep ran sizes '$sizes', want whole f32 elements"
echo "ok: sizes are whole elements"

# A config with no store: gets the embedded tcp store, so two processes can join.
printf 'backends: { gloo: {} }\nroutes: [{ device: cpu, backend: gloo }]\n' >"$tmp/nostore.yaml"
"$commhost" run -n 2 -c "$tmp/nostore.yaml" -- "$commhost" bench --sizes 8 --iters 1 --warmup 0 --check >"$tmp/out" 2>&1 ||
  fail "two ranks on a config without store:"
echo "ok: no store: means the tcp store"

# A specialised backend. `fast` (allreduceonly) serves f32 sum allreduce and nothing else;
# the bench's barriers, timings (f64) and #wrong sums never go through it.
cat >"$tmp/special.yaml" <<YAML
plugin_path: [ "$plugins" ]
backends:
  gloo: { plugin: gloo }
  fast: { plugin: allreduceonly }
  broken: { plugin: probed }
routes:
  - { device: cpu, backend: gloo }
  - { device: cpu, op: allreduce, backend: fast }
YAML
"$commhost" run -n 2 -c "$tmp/special.yaml" -- "$commhost" bench --op allreduce --check --sizes 8:1K --factor 4 \
  -n 2 -w 1 >"$tmp/out" 2>&1 || fail "allreduce routed to a backend that serves only allreduce"
grep -q "^\[0\] # allreduce -> fast$" "$tmp/out" || fail "the header does not name allreduce's route"
[ "$(grep -Ec '^\[0\] +[0-9]+ +[0-9]+ .* 0$' "$tmp/out")" -eq 4 ] || fail "want 4 checked allreduce rows through fast"
echo "ok: a config routing allreduce to a one-op backend is measured"

# --backend moves only the ops under test, and says up front which it cannot serve.
sed -i '/op: allreduce, backend: fast/d' "$tmp/special.yaml"
"$commhost" run -n 2 -c "$tmp/special.yaml" -- "$commhost" bench --op all --backend fast --check --sizes 8:64 \
  --factor 8 -n 2 -w 1 >"$tmp/out" 2>&1 || fail "--backend fast --op all"
grep -q "^\[0\] # skipped broadcast: --backend fast does not serve broadcast$" "$tmp/out" || fail "no skipped line"
grep -q "^\[0\] # skipped sendrecv: --backend fast does not serve send, recv$" "$tmp/out" || fail "no sendrecv line"
[ "$(grep -c '^\[0\] # skipped ' "$tmp/out")" -eq 9 ] || fail "want 9 skipped ops"
grep -q "^\[0\] # allreduce -> fast$" "$tmp/out" || fail "allreduce not routed to fast"
[ "$(grep -Ec '^\[0\] +[0-9]+ +[0-9]+ .* 0$' "$tmp/out")" -eq 2 ] || fail "want 2 checked allreduce rows"
export COMMHOST_CONFIG=$tmp/special.yaml  # as `commhost run -c` would set it, for the single-process refusals
refused "--backend fast (plugin allreduceonly) serves none of the selected ops (does not serve reduce op max)" \
  --op allreduce --backend fast --redop max
refused "--backend fats: no such backend" --backend fats

refused "--backend broken (plugin probed) does not serve cpu tensors, which the bench measures; it serves cuda" \
  --backend broken
unset COMMHOST_CONFIG
# A route without a device but naming the dtype is more specific than one naming only op
# and device: --backend's route names the bench's dtype and reduce op too, so it still wins.
cat >"$tmp/outranked.yaml" <<YAML
plugin_path: [ "$plugins" ]
backends: { gloo: { plugin: gloo }, fast: { plugin: allreduceonly } }
routes:
  - { device: cpu, backend: gloo }
  - { op: allreduce, dtype: f32, backend: gloo }
YAML
"$commhost" run -n 2 -c "$tmp/outranked.yaml" -- "$commhost" bench --op allreduce --backend fast --check --sizes 8 \
  -n 1 -w 0 >"$tmp/out" 2>&1 || fail "--backend fast against a dtype route"
grep -q "^\[0\] # allreduce -> fast$" "$tmp/out" || fail "a dtype route outranked --backend fast"
echo "ok: --backend serves the ops under test only and names the ones it cannot"

# A cell no route serves (here: f64, which the only backend lacks) is refused before any store.
cat >"$tmp/partial.yaml" <<YAML
plugin_path: [ "$plugins" ]
backends: { p: { plugin: partial } }
routes: [{ device: cpu, backend: p }]
YAML
COMMHOST_CONFIG=$tmp/partial.yaml refused \
  "bench --op allreduce: no route serves allreduce f64 sum on cpu for 0+ bytes (route at $tmp/partial.yaml:3:10: 'p' lacks the dtype)" \
  --op allreduce --dtype f64 --sizes 8
echo "ok: an unserved dtype is refused up front, naming the route"

# The header comes before a failure that happens later: this backend's factory throws.
cat >"$tmp/throwing.yaml" <<YAML
plugin_path: [ "$plugins" ]
backends:
  gloo: { plugin: gloo }
  broken: { plugin: throwing }
routes:
  - { device: cpu, backend: gloo }
YAML
status=0
"$commhost" run -n 2 -c "$tmp/throwing.yaml" -- "$commhost" bench --op allreduce --backend broken --sizes 8 -n 1 \
  -w 0 >"$tmp/out" 2>&1 || status=$?
[ "$status" != 0 ] || fail "a bench through a failing backend passed"
header=$(grep -n "^\[0\] # allreduce -> broken$" "$tmp/out" | cut -d: -f1 || true)
error=$(grep -n "^\[0\] commhost: " "$tmp/out" | head -1 | cut -d: -f1 || true)
[ -n "$header" ] && [ -n "$error" ] && [ "$header" -lt "$error" ] || fail "the header does not precede the error"
echo "ok: the header precedes a backend's failure"

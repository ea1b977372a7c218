#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `commhost bench --check` for every op at 2 and 3 ranks on gloo, and --json rows that
# parse and match the table.
#   bench_test.sh <commhost binary> <gloo config>
set -euo pipefail
commhost=$1
config=$2
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

"$commhost" run -n 2 -c "$config" -- "$commhost" bench --op allgather --sizes 1K:16K --factor 4 --json >"$tmp/json" 2>&1 ||
  fail "bench --json"
"$commhost" run -n 2 -c "$config" -- "$commhost" bench --op allgather --sizes 1K:16K --factor 4 >"$tmp/table" 2>&1 ||
  fail "bench table"
python3 - "$tmp/json" "$tmp/table" <<'PY' || fail "JSON rows do not match the table"
import json, sys
rows = [json.loads(l.split("] ", 1)[1]) for l in open(sys.argv[1]) if l.startswith("[0] {")]
table = [l.split()[1:3] for l in open(sys.argv[2]) if l.startswith("[0]") and l.split()[1].isdigit()]
keys = {"op", "size", "count", "dtype", "redop", "root", "inplace", "time_us", "algbw", "busbw", "wrong"}
assert len(rows) == 3 and len(table) == 3, (rows, table)
for r, t in zip(rows, table):
    assert set(r) == keys, r
    assert [str(r["size"]), str(r["count"])] == t, (r, t)
    assert r["op"] == "allgather" and r["dtype"] == "f32" and abs(r["busbw"] - r["algbw"] / 2) < 1e-3
print("ok: JSON rows parse and match the table")
PY

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

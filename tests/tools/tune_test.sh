#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `commhost tune` under `commhost run` at 2 and 4 ranks, candidates gloo, shm and a backend
# whose allreduce adds one (the offbyone test plugin): the written config loads, routes
# every size to gloo or shm and never to the wrong one (the table says "wrong" in its
# column), agrees with bench where bench finds one backend clearly faster (1.5x, both
# measured in the same job, alternating rounds), and passes `bench --check`. The measured
# table (`--table`) read by the built-in `measured` tuner routes each size as the tuned
# config does, only at the world size it was measured at, and bench is right under it. Also what
# tune refuses: an op it does not tune, and a config no backend of which serves the op.
#   tune_test.sh <commhost binary> <test plugin dir>
set -euo pipefail
commhost=$1
plugins=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/check_lib.sh"
tmp=$(mktemp -d)
export TMPDIR="$tmp"
trap 'rm -rf "$tmp"' EXIT
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done

cat >"$tmp/three.yaml" <<YAML
group: { timeout: 60s }
plugin_path: [ $plugins ]
backends: { gloo: { options: { threads: 1 } }, shm: {}, off: { plugin: offbyone } }
routes: [{ device: cpu, backend: gloo }]
logging: { level: warn }
YAML
sizes=8,4K,256K

# The backend `config check` resolves allreduce of BYTES to in FILE.
routed() {
  "$commhost" config check "$2" | awk -v b="$1" '$1 == "#" && $2 == "cpu" && $3 == "allreduce" {
    split($4, r, /\.\.|\+/); if (b >= r[1] && (r[2] == "" || b <= r[2])) print $NF }'
}

# The backend the table `config check --world WORLD` prints for f32 sum allreduce of BYTES
# in FILE: rows "cpu allreduce [DTYPES] [REDUCE_OPS] RANGE bytes -> BACKEND" before the
# notes sections, the lists (when shown) holding f32 and sum.
tuner_routed() {
  "$commhost" config check "$2" --world "$3" | awk -v b="$1" '
    /fell back|chosen by|unserved/ { done = 1 }
    !done && $1 == "#" && $2 == "cpu" && $3 == "allreduce" {
      k = 0; for (i = 4; i <= NF; i++) if ($i == "bytes") { k = i; break }
      if (!k) next
      ok = 1
      for (i = 4; i < k - 1; i++) { n = split($i, l, ","); hit = 0
        for (j = 1; j <= n; j++) if (l[j] == "f32" || l[j] == "sum") hit = 1
        if (!hit) ok = 0 }
      split($(k - 1), r, /\.\.|\+/)
      if (ok && b >= r[1] && (r[2] == "" || b <= r[2])) print $(k + 2) }'
}

for n in 2 4; do
  step "tune at $n ranks: gloo, shm, and off (adds one)"
  run timeout 300 "$commhost" run -n "$n" -c "$tmp/three.yaml" -- "$commhost" tune --sizes "$sizes" --min-time 0.02 \
    --repeat 2 -o "$tmp/tuned$n.yaml" --table "$tmp/measured$n.json"
  expect_rc0 "tune at $n ranks"
  expect_line "the file" "[0] commhost tune: wrote $tmp/tuned$n.yaml"
  expect_text "the measured table" "[0] commhost tune: wrote $tmp/measured$n.json"
  expect_regex "the table's columns" '^\[0\] #         bytes       gloo        off        shm  -> route$'
  for s in 8 4096 262144; do
    expect_regex "off is wrong at $s bytes" "^\\[0\\] # +$s +[0-9.]+ +wrong +[0-9.]+  -> (gloo|shm)$"
  done
  grep -q "backend: off" "$tmp/tuned$n.yaml" && fail "the tuned config routes to off: $(cat "$tmp/tuned$n.yaml")"
  head -1 "$tmp/tuned$n.yaml" | grep -q "^# commhost tune: $n ranks" || fail "no header: $(head -3 "$tmp/tuned$n.yaml")"
  run "$commhost" config check "$tmp/tuned$n.yaml"
  expect_rc0 "config check of the tuned config"
  pass "off never chosen; the config loads"

  step "at $n ranks the tuned routes agree with bench where one backend is clearly faster"
  # Both backends' figures from one job each, alternating: gloo, shm, gloo, shm.
  for round in 1 2; do
    for b in gloo shm; do
      "$commhost" run -n "$n" -c "$tmp/three.yaml" -- "$commhost" bench --op allreduce --sizes "$sizes" \
        --backend "$b" --min-time 0.05 >"$tmp/bench.$b.$round" 2>&1 || fail "bench on $b: $(cat "$tmp/bench.$b.$round")"
    done
  done
  python3 - "$tmp" <<'PY' >"$tmp/faster" || fail "reading the bench tables"
import re, statistics, sys
tmp = sys.argv[1]
def times(b):
    out = {}
    for r in (1, 2):
        for line in open(f"{tmp}/bench.{b}.{r}"):
            m = re.match(r"^\[0\] +(\d+) +\d+ +f32 +sum +- +\S+ +([0-9.]+)", line)
            if m: out.setdefault(int(m.group(1)), []).append(float(m.group(2)))
    return {s: statistics.median(v) for s, v in out.items()}
g, s = times("gloo"), times("shm")
for size in sorted(g):
    if g[size] > 1.5 * s[size]: print(size, "shm", "%.1f" % g[size], "%.1f" % s[size])
    elif s[size] > 1.5 * g[size]: print(size, "gloo", "%.1f" % g[size], "%.1f" % s[size])
PY
  [[ -s $tmp/faster ]] || fail "bench found no size where one backend is 1.5x faster: $(cat "$tmp"/bench.*)"
  while read -r size want gus sus; do
    got=$(routed "$size" "$tmp/tuned$n.yaml")
    [[ $got == "$want" ]] || fail "at $size bytes bench found $want faster (gloo $gus us, shm $sus us) but tune routed $got"
    echo "   $size bytes: $want (bench: gloo $gus us, shm $sus us)"
  done <"$tmp/faster"
  pass "tune chose as bench measured"

  step "at $n ranks the measured tuner routes as the tuned config does, at the world size it measured only"
  # One route listing all three (off, which adds one, before shm): the tuner reorders it.
  sed -e 's/routes: .*/routes: [{ device: cpu, backend: [gloo, off, shm] }]/' "$tmp/three.yaml" >"$tmp/tuner$n.yaml"
  echo "tuner: { plugin: measured, options: { table: $tmp/measured$n.json, min_gain: 0 } }" >>"$tmp/tuner$n.yaml"
  run "$commhost" config check "$tmp/tuner$n.yaml" --world "$n"
  expect_rc0 "config check --world $n of the tuner config"
  expect_text "the tuner's choices" "tuner 'measured', a group of $n ranks"
  for s in 8 4096 262144; do
    want=$(routed "$s" "$tmp/tuned$n.yaml")
    [[ -n $want ]] || fail "no route for $s bytes in $tmp/tuned$n.yaml"
    got=$(tuner_routed "$s" "$tmp/tuner$n.yaml" "$n")
    [[ $got == "$want" ]] || fail "at $s bytes the tuned config routes to $want but the measured tuner to '$got'"
  done
  other=$((n + 1))
  run "$commhost" config check "$tmp/tuner$n.yaml" --world "$other"
  expect_rc0 "config check --world $other"
  expect_text "the table is the tuner's" "tuner 'measured', a group of $other ranks"
  grep -q "chosen by the tuner" <<<"$out" && fail "a table measured at $n ranks reordered a group of $other: $out"
  run timeout 120 "$commhost" run -n "$n" -c "$tmp/tuner$n.yaml" -- "$commhost" bench --op allreduce --sizes "$sizes" \
    --check --iters 5
  expect_rc0 "bench --check under the measured tuner (off, listed before shm, never chosen)"
  pass "the measured tuner agrees with tune -o, and bench is right under it"

  step "the tuned config at $n ranks passes bench --check"
  run timeout 120 "$commhost" run -n "$n" -c "$tmp/tuned$n.yaml" -- "$commhost" bench --op allreduce --sizes "$sizes" \
    --check --iters 5
  expect_rc0 "bench --check on the tuned config"
  pass "right at every size"
done

step "tune --op all at 2 ranks: every op with a size gets routes, in the bytes the dispatcher counts"
run timeout 300 "$commhost" run -n 2 -c "$tmp/three.yaml" -- "$commhost" tune --op all --backends gloo,shm \
  --sizes 8,64K --min-time 0.02 --repeat 1 -o "$tmp/all.yaml"
expect_rc0 "tune --op all"
# allgather's 64 KiB message is one rank's 32 KiB block: the row and the route say 32768.
expect_regex "allgather's routed bytes" '^\[0\] # +32768 +[0-9.]+ +[0-9.]+  -> (gloo|shm)$'
run "$commhost" config check "$tmp/all.yaml"
expect_rc0 "config check of the tuned config"
for op in allreduce broadcast reduce allgather_into_tensor reduce_scatter_tensor alltoall_single gather scatter send recv; do
  grep -q "{device: cpu, op: $op, " "$tmp/all.yaml" || fail "no tuned route for $op: $(cat "$tmp/all.yaml")"
done
run timeout 120 "$commhost" run -n 2 -c "$tmp/all.yaml" -- "$commhost" bench --op all --sizes 8,64K --check --iters 3
expect_rc0 "bench --op all --check on the tuned config"
pass "every op routed, all right"

step "tune refuses an op it does not tune, and a config that cannot serve the op"
run "$commhost" tune --op barrier -o "$tmp/x.yaml"
expect_rc_nonzero "tune --op barrier"
expect_text "the refusal" "a barrier has no size to tune"
printf 'plugin_path: [ %s ]\nbackends: { ar: { plugin: allreduceonly }, gloo: {} }\nroutes: [{ device: cpu, backend: [ar, gloo] }]\n' \
  "$plugins" >"$tmp/ar.yaml"
run env COMMHOST_CONFIG="$tmp/ar.yaml" "$commhost" tune --op broadcast --backends ar -o "$tmp/x.yaml"
expect_rc_nonzero "tune --op broadcast on allreduceonly"
expect_text "the refusal" "no backend of $tmp/ar.yaml can serve broadcast on cpu"
[[ ! -e $tmp/x.yaml ]] || fail "a refused tune wrote its output"
pass "refused before any rank joins"

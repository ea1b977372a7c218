#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `commhost train` as real ranks under `commhost run` (loopback only, every run bounded
# by `timeout`): --check at 2 and 4 ranks on gloo and on shm (the
# parameters agree with one process on the global batch, the held-out loss falls), the
# --json rows, lossy hooks (fp16_compress, powersgd: deviation printed, not an error), --check
# failing when the deviation is above --tolerance, and bad flags refused with a clear
# error before any store.
#   train_test.sh <commhost binary> <gloo config> <shm config>
set -euo pipefail
commhost=$1
gloo=$2
shm=$3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/check_lib.sh"
tmp=$(mktemp -d)
export TMPDIR="$tmp"  # flight-recorder dumps stay in this run's dir
trap 'rm -rf "$tmp"' EXIT
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done
short=(--epochs 2 --steps-per-epoch 10 --hidden 64)

# The loss lines of rank 0: "epoch 0/2 loss X ...", one per epoch and one before.
loss_falls() {
  python3 - "$1" <<'PY' || fail "$2: the held-out loss did not fall epoch by epoch"
import re, sys
losses = [float(m.group(1)) for m in re.finditer(r"^\[0\] epoch \d+/\d+  loss ([0-9.]+)", sys.argv[1], re.M)]
assert len(losses) >= 3, losses
assert all(b < a for a, b in zip(losses, losses[1:])), losses
PY
}

for spec in "gloo:$gloo:2" "shm:$shm:2" "gloo:$gloo:4" "shm:$shm:4"; do
  IFS=: read -r name config n <<<"$spec"
  step "train --check at $n ranks on $name"
  run timeout 90 "$commhost" run -n "$n" -c "$config" -- "$commhost" train --check "${short[@]}"
  expect_rc0 "train --check at $n ranks on $name"
  expect_regex "the check line" '^\[0\] check: after 20 steps the largest parameter deviation .* \(hook allreduce \(the default: the config has no hooks.gradient\): within --tolerance\)'
  expect_text "the loss check" "check: the held-out loss fell"
  expect_regex "the summary" '^\[0\] time per step [0-9.]+ ms; [0-9]+ bytes per step handed to the hook in [0-9.]+ buckets, [0-9]+ sent by its collectives; [0-9]+% of communication hidden'
  [[ $(grep -c '^\[0\] epoch ' <<<"$out") -eq 3 ]] || fail "expected 3 epoch lines (0, 1, 2) from rank 0"
  [[ $(grep -c '^\[1\] epoch ' <<<"$out") -eq 0 ]] || fail "rank 1 printed epoch lines"
  loss_falls "$out" "$name at $n ranks"
  pass "parameters agree with one process, the loss falls"
done

step "train --json FILE: one row per step"
run timeout 90 "$commhost" run -n 2 -c "$gloo" -- "$commhost" train "${short[@]}" --json "$tmp/steps.jsonl"
expect_rc0 "train --json"
python3 - "$tmp/steps.jsonl" <<'PY' || fail "the --json rows"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["step"] for r in rows] == list(range(20)), rows
keys = ["step", "epoch", "loss", "step_ms", "backward_ms", "comm_ms", "wait_ms", "hidden", "bytes", "wire_bytes", "buckets",
        "generation", "config", "world", "end_unix_ms"]
for r in rows:
    assert list(r) == keys, r
    assert r["bytes"] > 0 and r["buckets"] >= 1 and 0 <= r["hidden"] <= 1 and r["step_ms"] > 0, r
    assert r["wire_bytes"] >= r["bytes"], r  # the allreduce hook sends every gradient byte
assert [r["epoch"] for r in rows] == [1] * 10 + [2] * 10
assert all(r["generation"] == 0 for r in rows), rows  # no swap
PY
pass "20 rows with every key"

step "train --swap-every: gloo -> shm -> gloo at 4 ranks, still exact"
run timeout 90 "$commhost" run -n 4 -c "$gloo" -- "$commhost" train --check "${short[@]}" --swap-every 7 \
  --configs "$gloo,$shm" --json "$tmp/swap.jsonl"
expect_rc0 "train --swap-every 7"
expect_regex "the check line" '^\[0\] check: after 20 steps the largest parameter deviation .*within --tolerance'
loss_falls "$out" "train --swap-every"
for g in 0 1 2; do
  expect_regex "generation $g's step time" "^\[0\] generation $g \(.*\.yaml, hash [0-9a-f]{8}, backends [a-z,]+\): [0-9]+ ranks, steps [0-9]+\.\.[0-9]+, time per step [0-9.]+ ms"
done
# gloo and shm generations are told apart by their backends, not only the file name.
expect_regex "generation 1's backends" '^\[0\] generation 1 \(.*shm\.yaml, hash [0-9a-f]{8}, backends [a-z,]*shm'
expect_regex "the swap lines" '^\[0\] # swap 2 to .*gloo.yaml: generation 2, check [0-9.]+ ms, drain [0-9.]+ ms, build [0-9.]+ ms, commit [0-9.]+ ms'
python3 - "$tmp/swap.jsonl" "$shm" <<'PY' || fail "the generations in the --json rows"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
# Swaps before steps 7 and 14: to shm (the next config after the job's gloo), then back.
assert [r["generation"] for r in rows] == [0] * 7 + [1] * 7 + [2] * 6, [r["generation"] for r in rows]
assert all(r["config"] == sys.argv[2] for r in rows if r["generation"] == 1), rows
PY
run timeout 20 "$commhost" train --swap-every 5
expect_rc_nonzero "train --swap-every without --configs"
expect_text "--swap-every" "--swap-every needs --configs a.yaml,b.yaml"
run timeout 20 "$commhost" train --swap-every 5 --configs "$tmp/missing.yaml"
expect_rc_nonzero "train --configs with a missing file"
expect_text "the missing file" "missing.yaml"
pass "parameters agree with one process across two swaps; each generation's step time printed"

# A shadowed route under train: the tally bench prints comes out of train too.
cat >"$tmp/shadow.yaml" <<YAML
group: { name: main, timeout: 20s }
backends: { gloo: { options: { threads: 1 } }, shm: {} }
routes: [{ device: cpu, backend: [shm, gloo] }, { device: cpu, op: allreduce, backend: shm, shadow: gloo, sample: 1 }]
YAML
step "train on a shadowed route prints the shadow's tally"
run timeout 90 "$commhost" run -n 2 -c "$tmp/shadow.yaml" -- "$commhost" train --check "${short[@]}"
expect_rc0 "train with a gloo shadow"
expect_regex "the shadow tally" '^\[0\] # shadow: allreduce on shm, shadow gloo, up to [0-9]+ bytes: ([0-9]+)/\1 agree'
pass "the tally, every comparison agreeing"

step "lossy hooks: --check prints the deviation, not an error, and the loss still falls"
run timeout 90 "$commhost" run -n 2 -c "$shm" -- "$commhost" train --check "${short[@]}" --hook fp16_compress
expect_rc0 "train --hook fp16_compress --check"
expect_regex "the check line" '^\[0\] check: after 20 steps .*\(hook fp16_compress: lossy, so not an error\)'
expect_text "the header" "hook fp16_compress"
loss_falls "$out" "fp16_compress"
# PowerSGD compressing from step 2 (its default start_iter is 1000): --hook, then --set
# adds to the entry it made.
run timeout 90 "$commhost" run -n 2 -c "$gloo" -- "$commhost" train --check "${short[@]}" --hook powersgd \
  --set hooks.gradient.options.start_iter=2 --json "$tmp/powersgd.jsonl"
expect_rc0 "train --hook powersgd --check"
python3 - "$tmp/powersgd.jsonl" <<'PY' || fail "powersgd's wire bytes"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
# Compressing from step 2: its collectives carry P and Q, far less than the gradients.
assert all(r["wire_bytes"] < r["bytes"] / 2 for r in rows[3:]), [(r["bytes"], r["wire_bytes"]) for r in rows]
PY
expect_regex "the check line" '^\[0\] check: after 20 steps .*\(hook powersgd: lossy, so not an error\)'
loss_falls "$out" "powersgd"
pass "fp16_compress and powersgd: the loss falls, the deviation is printed"

step "--check fails above --tolerance, naming the deviation and where"
run timeout 90 "$commhost" run -n 3 -c "$gloo" -- "$commhost" train --check "${short[@]}" --batch 100 --tolerance 1e-30
expect_rc_nonzero "train --check --tolerance 1e-30"
expect_regex "the error" 'commhost train: group main, rank [0-9] of 3: check: after 20 steps the largest parameter deviation from one process on the global batch is [0-9.e-]+, at layer [0-9] (weight|bias) \[.*\] element [0-9]+'
expect_text "what to do" "above --tolerance 1e-30"
pass "a deviation above --tolerance is an error naming the parameter"

step "bad flags: clear errors, at once"
run timeout 20 "$commhost" train --epochs 0
expect_rc_nonzero "train --epochs 0"
expect_text "--epochs 0" "--epochs 0: must be at least 1 (e.g. --epochs 5)"
run timeout 20 "$commhost" train --lr -1
expect_rc_nonzero "train --lr -1"
expect_text "--lr -1" "--lr -1: must be a number above 0"
run timeout 20 "$commhost" train --seed -1
expect_rc_nonzero "train --seed -1"
expect_text "--seed -1" "--seed -1: must be at least 0"
run timeout 20 "$commhost" train --json "$tmp/no/such/dir/steps.jsonl"
expect_rc_nonzero "train --json into a missing directory"
expect_text "--json" "steps.jsonl: cannot write it (No such file or directory)"
[[ $out != *"store serving"* ]] || fail "--json FILE was opened after the store started"
run timeout 20 "$commhost" train --epochs many
expect_rc_nonzero "train --epochs many"
expect_text "--epochs many" "--epochs"
run timeout 20 "$commhost" train --no-such-flag
expect_rc_nonzero "train --no-such-flag"
expect_text "unknown flag" "--no-such-flag"
run timeout 30 "$commhost" run -n 2 -c "$gloo" -- "$commhost" train --batch 1
expect_rc_nonzero "train --batch 1 at 2 ranks"
expect_text "--batch 1" "--batch 1: the global batch is split over the job's 2 ranks"
run timeout 30 "$commhost" run -n 2 -c "$gloo" -- "$commhost" train --hook no_such_hook
expect_rc_nonzero "train --hook no_such_hook"
expect_regex "--hook no_such_hook" "hooks.gradient.*comm_hook plugin 'no_such_hook' not found"
run timeout 20 "$commhost" help train
expect_rc0 "help train"
expect_text "help train" "commhost run -n 4 -c configs/gloo.yaml -- commhost train"
pass "bad values refused naming the flag"
echo "train: all ok"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The nccl backend's GPU tests, on any machine with GPUs and the CUDA toolkit + NCCL:
#   tests/gpu/run.sh [BUILD_DIR]   (default: build-gpu beside the sources)
# Builds with CUDA and the tests (tools/setup), then runs every op x dtype on all visible
# GPUs as ranks, the timeout/abort/NaN-check/timing/compression-hook tests, the intra-node
# one-/two-shot kernels (IntraKernel* on one GPU; IntraCommGpu*, IntraGroup* with 2+), the
# cast kernels against the CPU casts, `commhost plugins inspect nccl`, and
# `commhost bench --device cuda --op all --check` over nccl, one rank per GPU.
# Exits 77 when no GPU is usable (the test program says why).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}

"$root/tools/setup" "$build" -DCOMMHOST_BUILD_TESTS=ON -DCOMMHOST_WITH_CUDA=ON
if [ ! -x "$build/bin/commhost_nccl_gpu_tests" ]; then
  echo "run.sh: the nccl GPU tests were not built (see 'nccl plugin' in $build/configure.log)" >&2
  exit 1
fi

echo "== commhost plugins inspect nccl"
"$build/bin/commhost" plugins inspect nccl | sed -n '1,12p'

echo "== device-independent nccl tests"
"$build/bin/commhost_nccl_tests"

echo "== GPU tests (every visible GPU is a rank)"
set +e
"$build/bin/commhost_nccl_gpu_tests" "$@"
rc=$?
set -e
[ "$rc" -eq 77 ] && { echo "run.sh: skipped, no usable GPU"; exit 77; }
[ "$rc" -ne 0 ] && exit "$rc"

echo "== cast kernels against the CPU casts, bit for bit (and the hook SDK's casts of CUDA tensors)"
"$build/bin/commhost_cast_gpu_tests"

# commhost bench on GPU tensors over nccl: one rank per visible GPU (LOCAL_RANK mod the
# device count), every op checked; barrier has no tensors and goes to gloo (cpu).
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "${ngpus:-0}" -ge 1 ] || ngpus=1
echo "== commhost bench --device cuda on nccl ($ngpus ranks)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'backends: { nccl: {}, gloo: {} }\nroutes: [{ device: cuda, backend: nccl }, { device: cpu, backend: gloo }]\n' \
  >"$tmp/nccl.yaml"
"$build/bin/commhost" run -n "$ngpus" -c "$tmp/nccl.yaml" -- "$build/bin/commhost" bench --device cuda --op all \
  --check --sizes 8:64M -f 8 -n 20 -w 5 --json "$tmp/rows.jsonl" | tee "$tmp/out"
for op in allreduce broadcast reduce allgather reduce_scatter alltoall gather scatter sendrecv; do
  grep -q "^\[0\] # $op -> nccl\$" "$tmp/out" || { echo "run.sh: bench did not route $op to nccl" >&2; exit 1; }
done
python3 - "$tmp/rows.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ops = {r["op"] for r in rows}
assert len(ops) == 10, ops
for r in rows:
    assert r["device"] == "cuda" and r["wrong"] == 0 and r["time_us"] > 0, r
print(f"bench: {len(rows)} rows on cuda, all checked (0 wrong)")
PY
echo "run.sh: all GPU tests passed"

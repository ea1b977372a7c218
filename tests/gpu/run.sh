#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The nccl backend's GPU tests, on any machine with GPUs and the CUDA toolkit + NCCL:
#   tests/gpu/run.sh [BUILD_DIR]        builds (default: build-gpu beside the sources), then runs
#   tests/gpu/run.sh --prebuilt DIR     runs over a build tree or a tests/gpu/bundle.sh bundle,
#                                       on a machine without commhost's build dependencies
# Builds with CUDA and the tests (tools/setup), then runs every op x dtype on all visible
# GPUs as ranks, the timeout/abort/NaN-check/timing/compression-hook tests, the intra-node
# one-/two-shot kernels (IntraKernel* on one GPU; IntraCommGpu*, IntraGroup* with 2+), the
# cast kernels against the CPU casts, `commhost plugins inspect nccl`,
# `commhost bench --device cuda --op all --check` over nccl, one rank per GPU, and one rank
# more than GPUs (refused, naming the shared GPU).
# Exits 77 when no GPU is usable (the test program says why).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${1:-}" = --prebuilt ]; then
  build=$(cd "${2:?--prebuilt needs a directory}" && pwd)
  shift 2
  # A bundle's own libraries; NCCL from the machine, or from the pip wheel PyTorch brings.
  [ -d "$build/extra" ] && export LD_LIBRARY_PATH="$build/extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if ! ldconfig -p | grep -q 'libnccl\.so\.2' && [ ! -e /usr/local/cuda/lib/libnccl.so.2 ]; then
    wheel=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
    [ -n "$wheel" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}:$wheel"
  fi
  [ -d /usr/local/cuda/lib64 ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64"
  if ldd "$build/lib/commhost/plugins/libcommhost_nccl.so" | grep "not found"; then
    echo "run.sh: the libraries above are missing for $build (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})" >&2
    exit 1
  fi
else
  build=${1:-$root/build-gpu}
  [ $# -gt 0 ] && shift
  "$root/tools/setup" "$build" -DCOMMHOST_BUILD_TESTS=ON -DCOMMHOST_WITH_CUDA=ON
fi
if [ ! -x "$build/bin/commhost_nccl_gpu_tests" ]; then
  echo "run.sh: the nccl GPU tests were not built (see 'nccl plugin' in $build/configure.log)" >&2
  exit 1
fi

echo "== commhost plugins inspect nccl"
# (exits 1 where the plugin is unavailable; the GPU tests below then say why and exit 77)
("$build/bin/commhost" plugins inspect nccl || true) | sed -n '1,12p'

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

# More ranks than GPUs: two ranks share a GPU, which NCCL refuses at communicator creation;
# every rank must fail saying so (not blame a disagreement on the op).
echo "== $((ngpus + 1)) ranks on $ngpus GPU(s): refused, naming the shared GPU"
if "$build/bin/commhost" run -n $((ngpus + 1)) -c "$tmp/nccl.yaml" -- "$build/bin/commhost" bench --device cuda \
  --op allreduce --sizes 8 -n 2 -w 1 >"$tmp/shared" 2>&1; then
  echo "run.sh: $((ngpus + 1)) ranks on $ngpus GPU(s) succeeded; NCCL should refuse a shared GPU" >&2
  exit 1
fi
grep -q "one GPU per rank" "$tmp/shared" || { cat "$tmp/shared"; echo "run.sh: no rank said 'one GPU per rank'" >&2; exit 1; }
grep -m1 "Duplicate GPU" "$tmp/shared"
echo "run.sh: all GPU tests passed"

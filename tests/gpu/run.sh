#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The nccl backend's GPU tests, on any machine with GPUs and the CUDA toolkit + NCCL:
#   tests/gpu/run.sh [BUILD_DIR]   (default: build-gpu beside the sources)
# Builds with CUDA and the tests (tools/setup), then runs every op x dtype on all visible
# GPUs as ranks, the timeout/abort/NaN-check tests, the intra-node one-/two-shot kernels
# (IntraKernel* on one GPU; IntraCommGpu*, IntraGroup* with 2+), and
# `commhost plugins inspect nccl`.
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

# commhost bench measures CPU tensors only for now: it refuses a backend that serves
# none (nccl serves cuda), which this shows rather than hides.
echo "== commhost bench --backend nccl"
cfg=$(mktemp --suffix=.yaml)
trap 'rm -f "$cfg"' EXIT
printf 'backends: { nccl: {} }\nroutes: [{ device: cuda, backend: nccl }]\n' >"$cfg"
if out=$(COMMHOST_CONFIG="$cfg" "$build/bin/commhost" bench --backend nccl 2>&1); then
  echo "$out"
elif grep -q "does not serve cpu tensors" <<<"$out"; then
  echo "bench: not measured (the bench drives CPU tensors; GPU tensors in bench are not done yet): $out"
else
  echo "$out" >&2
  exit 1
fi
echo "run.sh: all GPU tests passed"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packs what tests/gpu/run.sh runs into a small relocatable tree, for a GPU machine that has
# the driver, CUDA and NCCL but none of commhost's build dependencies:
#   tests/gpu/bundle.sh [BUILD_DIR] OUT_DIR     (BUILD_DIR: build-gpu beside the sources)
# then, on the GPU machine, in a checkout:  tests/gpu/run.sh --prebuilt OUT_DIR
# OUT_DIR keeps the build tree's layout (bin/, lib/, lib/commhost/plugins/), stripped, plus
# extra/: the shared libraries they load that are neither glibc, the C++ runtime, CUDA nor
# NCCL (yaml-cpp, spdlog, fmt, gloo, boost_filesystem, ...), copied from this machine.
# About 12 MB. The binaries need a glibc at least as new as this machine's.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ $# -eq 1 ]; then build=$root/build-gpu; out=$1; else build=${1:?build dir}; out=${2:?output dir}; fi
[ -d "$build" ] && build=$(cd "$build" && pwd)
[ -x "$build/bin/commhost_nccl_gpu_tests" ] || { echo "bundle.sh: $build has no commhost_nccl_gpu_tests (build with CUDA and tests first: tests/gpu/run.sh builds it)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib/commhost/plugins" "$out/extra"
out=$(cd "$out" && pwd)
for b in commhost commhost_nccl_gpu_tests commhost_cast_gpu_tests commhost_nccl_tests; do
  strip -o "$out/bin/$b" "$build/bin/$b"
done
cp -a "$build"/lib/libcommhost.so* "$out/lib/"
for f in "$out"/lib/libcommhost.so.*.*; do strip "$f"; done
for f in "$build"/lib/libcommhost_*.so "$build"/lib/commhost/plugins/*.so; do
  strip -o "$out/${f#"$build"/}" "$f"
done
# The libraries the machine may lack: everything resolved outside the bundle except the
# system's C and C++ runtimes and CUDA/NCCL, which the GPU machine brings in its own versions.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcuda|libcudart|libnccl)'
for f in "$out"/bin/* "$out"/lib/*.so "$out"/lib/commhost/plugins/*.so; do ldd "$f"; done 2>/dev/null |
  awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    case $path in "$build"/* | "$out"/*) continue ;; esac
    cp -L "$path" "$out/extra/$name"
  done
strip "$out"/extra/* 2>/dev/null || true
echo "bundle.sh: $(du -sh "$out" | cut -f1) in $out; run there: tests/gpu/run.sh --prebuilt $out"

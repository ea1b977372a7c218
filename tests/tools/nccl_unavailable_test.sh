#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nccl_unavailable_test.sh <path to commhost binary> <path to commhost_nccl_gpu_tests>
#
# The nccl plugin where no CUDA device is usable (no driver, or no GPU): it loads, `plugins
# list` and `plugins inspect nccl` show "unavailable: <the CUDA runtime's reason>", and a
# config routing cuda tensors to it passes `config check` with a warning naming the reason;
# `commhost bench --device cuda` fails at once naming the same reason, and the commhost
# binary itself does not link the CUDA runtime (only the bench's module, opened on demand).
# Skipped (77) where a device is usable: tests/gpu/run.sh covers that machine.
set -euo pipefail
commhost=$1
gpu_tests=$2
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
while read -r var; do unset "$var"; done < <(compgen -e | grep '^COMMHOST_' || true)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/commhost-nccl.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The GPU test program says why it skips: the same reason the probe gives.
set +e
reason_line=$("$gpu_tests" 2>&1)
gpu_rc=$?
set -e
[[ $gpu_rc -eq 77 ]] || { echo "a CUDA device is usable here: skipped (run tests/gpu/run.sh)"; exit 77; }
reason=$(sed -n 's/^skipped: no usable CUDA device (\(.*\))$/\1/p' <<<"$reason_line")
[[ "$reason" == "none found" ]] && reason="no CUDA-capable device is detected"
[[ -n "$reason" ]] || fail "the GPU test program gave no reason: $reason_line"

step "plugins list still works and shows nccl unavailable with the reason"
run "$commhost" plugins list
expect_rc0 "plugins list"
expect_regex "nccl row" "^nccl +backend +[^ ]+ +unavailable: $reason\$"
expect_regex "gloo still listed" "^gloo +backend +[^ ]+ +ok"

step "plugins inspect nccl shows the status, the manifest and the options"
run "$commhost" plugins inspect nccl
# (inspect exits 1 for an unavailable plugin, by design; its report is what matters)
expect_line "status" "status: unavailable: $reason"
expect_text "devices" "devices: cuda"
expect_text "reduce ops" "reduce ops: sum, avg, product, min, max, premul_sum"
expect_text "an option" "blocking_wait (bool, default: false)"

step "config check of a cuda route to nccl warns with the reason"
cat >"$tmp/nccl.yaml" <<'YAML'
store: hash
backends: { nccl: { options: { nan_check: true } }, gloo: {} }
routes: [{ device: cuda, backend: nccl }, { device: cpu, backend: gloo }]
YAML
run "$commhost" config check "$tmp/nccl.yaml"
expect_rc0 "config check"
expect_text "warning" "plugin 'nccl' is unavailable here ($reason)"

step "config check refuses a bad nccl option"
cat >"$tmp/bad.yaml" <<'YAML'
store: hash
backends: { nccl: { options: { max_ctas: 65 } } }
routes: [{ device: cuda, backend: nccl }]
YAML
run "$commhost" config check "$tmp/bad.yaml"
expect_rc_nonzero "config check (max_ctas 65)"
expect_text "range" "max_ctas"
step "the commhost binary does not need the CUDA runtime; the bench's cuda module does"
run readelf -d "$commhost"
expect_rc0 "readelf -d commhost"
grep -q 'NEEDED.*libcudart' <<<"$out" && fail "commhost links libcudart: commands that need no GPU would need CUDA"
module=$(dirname "$(dirname "$commhost")")/lib/libcommhost_bench_cuda.so
[[ -f "$module" ]] || fail "no $module"
run readelf -d "$module"
expect_text "the module links the CUDA runtime" "libcudart"

step "bench --device cuda fails at once, naming the CUDA runtime's reason and what to do"
# No launcher variables: rank 0 of 1; no store is reached (serve: never would wait for one).
start=$(date +%s)
run timeout 30 "$commhost" bench --device cuda --sizes 8 -n 1 -w 0 --set store.options.serve=never
[[ $rc -ne 124 ]] || fail "bench --device cuda waited (for the store?) instead of failing"
expect_rc_nonzero "bench --device cuda"
(( $(date +%s) - start < 10 )) || fail "bench --device cuda took over 10 s to fail"
expect_text "who" "bench --device cuda (rank 0, local rank 0): no usable CUDA device: cudaGetDeviceCount: $reason"
expect_text "what to do" "or use --device cpu"
[[ "$out" != *"# commhost bench"* ]] || fail "the header was printed before the device was checked"
echo "PASS"

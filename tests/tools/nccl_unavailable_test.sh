#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nccl_unavailable_test.sh <path to commhost binary> <path to commhost_nccl_gpu_tests>
#
# The nccl plugin where no CUDA device is usable (no driver, or no GPU): it loads, `plugins
# list` and `plugins inspect nccl` show "unavailable: <the CUDA runtime's reason>", and a
# config routing cuda tensors to it passes `config check` with a warning naming the reason.
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
echo "PASS"

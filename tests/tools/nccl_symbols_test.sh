#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nccl_symbols_test.sh <path to libcommhost_nccl.so>
#
# The nccl plugin is built against one nccl.h (2.28 here) but loads whatever libnccl.so.2
# the machine has. Every NCCL function it references strongly must exist in NCCL 2.18
# (ncclCommSplit's release), the oldest it supports; newer ones must be weak references
# tested for null before use, or an older NCCL makes the whole plugin fail to load (seen:
# "undefined symbol: ncclCommRevoke" on a CUDA image whose system NCCL predates 2.28).
set -euo pipefail
plugin=$1
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

# The NCCL release that introduced each function the plugin may use (NCCL's release notes;
# ncclCommRevoke: absent from 2.28.3, present in 2.28.9, both seen).
declare -A since=(
  [ncclAllGather]=2.0 [ncclAllReduce]=2.0 [ncclBroadcast]=2.0 [ncclReduce]=2.0
  [ncclReduceScatter]=2.0 [ncclCommDestroy]=2.0 [ncclCommCount]=2.0 [ncclCommUserRank]=2.0
  [ncclCommCuDevice]=2.0 [ncclGetErrorString]=2.0 [ncclGetUniqueId]=2.0 [ncclGroupStart]=2.0
  [ncclGroupEnd]=2.0 [ncclCommInitRank]=2.0 [ncclGetVersion]=2.3 [ncclCommAbort]=2.4
  [ncclCommGetAsyncError]=2.4 [ncclSend]=2.7 [ncclRecv]=2.7 [ncclRedOpCreatePreMulSum]=2.11
  [ncclRedOpDestroy]=2.11 [ncclGetLastError]=2.13 [ncclCommInitRankConfig]=2.14
  [ncclCommFinalize]=2.14 [ncclCommSplit]=2.18 [ncclCommRevoke]=2.28.9
)
newer() { [[ "$(printf '%s\n%s\n' "$1" 2.18 | sort -V | tail -1)" != 2.18 ]]; }

step "every NCCL function the plugin references is known, and those after 2.18 are weak"
run nm -D --undefined-only "$plugin"
expect_rc0 "nm -D $plugin"
count=0
while read -r kind name; do
  [[ $name == nccl* ]] || continue
  count=$((count + 1))
  [[ -n "${since[$name]:-}" ]] ||
    fail "$name: not in this test's table; add it with the NCCL release that introduced it (if after 2.18, reference it weakly: #pragma weak, then test it for null)"
  if newer "${since[$name]}"; then
    [[ $kind == w ]] || fail "$name (NCCL ${since[$name]}) is a strong reference: the plugin would not load on an NCCL before ${since[$name]}; use #pragma weak $name and test it for null"
  fi
done < <(awk 'NF == 2 {print $1, $2}' <<<"$out")
(( count >= 10 )) || fail "only $count NCCL symbols found: is $plugin the nccl plugin?"
pass "$count NCCL functions, the newer ones weak"
echo "PASS"

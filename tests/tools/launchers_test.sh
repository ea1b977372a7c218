#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Ranks started by launchers other than `commhost run` (loopback only, each run bounded by
# `timeout`): Open MPI's mpirun with MASTER_ADDR/MASTER_PORT exported, and Slurm and
# MPICH-Hydra (PMI_*) variables set by hand, each rank finding its rank, the world size and
# the store from them alone; `bench --check` proves they formed one job.
#   launchers_test.sh <commhost binary>
set -euo pipefail
commhost=$1
here=$(cd "$(dirname "$0")" && pwd)
source "$here/check_lib.sh"
tmp=$(mktemp -d)
export TMPDIR="$tmp"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for v in $(env | grep -oE '^(COMMHOST_|OMPI_|PMI_|SLURM_)[A-Z_]*'); do unset "$v"; done
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
bench=(bench --op allreduce --check --sizes 8:32K --factor 64 --iters 3 --warmup 1)

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# ranks_by_hand N VAR_TEMPLATE...: starts N ranks of bench in the background, rank i with
# the given variables ({i} replaced by i), and waits for all; $out is every rank's output.
ranks_by_hand() {
  local n=$1 i status=0
  shift
  pids=()
  for ((i = 0; i < n; i++)); do
    local vars=()
    for v in "$@"; do vars+=("${v//\{i\}/$i}"); done
    env "${vars[@]}" timeout 60 "$commhost" "${bench[@]}" >"$tmp/rank$i.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
  pids=()
  out=$(cat "$tmp"/rank*.log)
  rm -f "$tmp"/rank*.log
  rc=$status
}

# No MASTER_*: the ranks can only meet through the address and port Slurm's variables give.
step "Slurm variables by hand: 3 ranks, the store on the step's first host, port from the job id"
port=$(free_port)
while ((port < 29500 || port >= 39500)); do port=$(free_port); done
ranks_by_hand 3 SLURM_PROCID={i} SLURM_NTASKS=3 SLURM_LOCALID={i} SLURM_JOB_ID=$((port - 29500)) \
  SLURM_STEP_NODELIST=127.0.0.1 SLURM_JOB_NUM_NODES=1
expect_rc0 "3 ranks from Slurm variables"
expect_text "the header" "# commhost bench: 3 ranks"
expect_regex "the 32K row, checked" '^ +32768 +8192 +f32 +sum +- +1( +[0-9.]+){5} +0$'
pass "one job of 3 ranks"

step "MPICH / Intel MPI (Hydra) variables by hand: 2 ranks, MASTER_ADDR/MASTER_PORT"
port=$(free_port)
ranks_by_hand 2 PMI_RANK={i} PMI_SIZE=2 MPI_LOCALRANKID={i} MPI_LOCALNRANKS=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port
expect_rc0 "2 ranks from PMI variables"
expect_text "the header" "# commhost bench: 2 ranks"
expect_regex "the 32K row, checked" '^ +32768 +8192 +f32 +sum +- +1( +[0-9.]+){5} +0$'
pass "one job of 2 ranks"

step "Open MPI: mpirun -np 3 commhost bench --check with MASTER_ADDR/MASTER_PORT exported"
if ! command -v mpirun >/dev/null 2>&1; then
  echo "   skipped: mpirun not found (Debian: apt-get install openmpi-bin; tools/setup installs it)"
else
  export MASTER_ADDR=127.0.0.1 MASTER_PORT
  MASTER_PORT=$(free_port)
  # Root in CI containers: Open MPI refuses root unless told; --oversubscribe: 3 ranks on 2 cores.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  run timeout 90 mpirun --oversubscribe -np 3 -x MASTER_ADDR -x MASTER_PORT -x TMPDIR "$commhost" "${bench[@]}"
  expect_rc0 "mpirun -np 3"
  expect_text "the header" "# commhost bench: 3 ranks"
  expect_regex "the 32K row, checked" '^ +32768 +8192 +f32 +sum +- +1( +[0-9.]+){5} +0$'
  pass "one job of 3 ranks under mpirun"
fi
echo "launchers: all ok"

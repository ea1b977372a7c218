#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A real cluster engine launching commhost across hosts of a test bed (tools/testbed):
# Open MPI's mpirun on host1 starts its daemons on the other hosts through an rsh agent
# that enters their namespaces (tools/testbed rsh), and the ranks take rank, world size,
# local rank and local size from OMPI_* alone (the store address from MASTER_ADDR, which
# Open MPI does not set; the store binds it and gloo the address each host's name resolves
# to, with no option). Checked: every op (`bench --op all --check`) at 2 hosts x 2 ranks
# over flat gloo, and over hier (which must find the two hosts) by the README's mpirun line
# as written there, and a host lost mid-job
# (its cable pulled, its ranks killed): the survivors name its ranks within the
# heartbeat time and end, and nothing is left running or in `ip netns` afterwards.
#   engines_test.sh <commhost> <repo root>
# Needs root for the bed; without it (or without mpirun) it says why and exits 77 (skipped).
set -euo pipefail
commhost=$1
src=$2
source "$src/tests/tools/bed_lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (Debian's openmpi-bin)"; exit 77; }
bed_up 2
port=$((20000 + RANDOM % 12000))

# mpi CONFIG PROGRAM...: mpirun on host1 over host1:2 and host2:2, rank output in $tmp/out.
mpi() {
  local config=$1
  shift
  port=$((port + 1))
  "${testbed[@]}" exec --name "$bed" 1 -- env TESTBED_NAME="$bed" timeout 180 mpirun --allow-run-as-root \
    --oversubscribe --host host1:2,host2:2 -np 4 --mca plm_rsh_agent "${testbed[*]} rsh" \
    --mca oob_tcp_if_include eth0 --mca btl_tcp_if_include eth0 -x MASTER_ADDR=10.77.0.1 -x MASTER_PORT=$port \
    -x COMMHOST_CONFIG="$config" "$commhost" "$@" --set group.timeout=30s >"$tmp/out" 2>&1
}

mpi "$src/configs/gloo.yaml" bench --op all --check --sizes 8:64K --factor 16 -n 2 -w 1 ||
  fail "mpirun: bench --op all --check over gloo"
check_bench gloo mpirun
echo "ok: mpirun over host1:2,host2:2, gloo: every op checked, ranks from OMPI_* alone"

# The README's mpirun line (hier), as written there; what the bed needs (the rsh agent, the
# interface, root) comes through Open MPI's environment variables.
line=$(readme_block mpirun)
[[ $line == mpirun* ]] || fail "README.md has no mpirun line after <!-- engines-test: mpirun -->"
(cd "$src" && "${testbed[@]}" exec --name "$bed" 1 -- env TESTBED_NAME="$bed" PATH="$(dirname "$commhost"):$PATH" \
  OMPI_MCA_plm_rsh_agent="${testbed[*]} rsh" OMPI_MCA_oob_tcp_if_include=eth0 OMPI_MCA_btl_tcp_if_include=eth0 \
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  timeout 180 bash -c "$line" >"$tmp/out" 2>&1) || fail "the README's mpirun line"
check_bench hier "the README's mpirun line"
echo "ok: the README's mpirun line, hier over host1:2,host2:2: every op checked, the two hosts found"

# host2 lost mid-job: cable pulled (no reset reaches anyone), then its ranks killed.
mpi "$src/configs/gloo.yaml" bench --op allreduce --sizes 4K -n 1000000 -w 1 \
  --set supervisor.heartbeat.interval=500ms --set supervisor.heartbeat.timeout=5s &
job=$!
wait_started
# Its ranks die; Open MPI's daemon there stays, as on a host that is only unreachable (here
# the daemon is mpirun's own child through the agent: killing it would tell mpirun at once).
lose_host2
# mpirun itself waits for its daemon on the unreachable host (as over ssh) until its own
# timeouts: the operator ends it, and whatever is left on either host.
for h in 1 2; do "${testbed[@]}" pids --name "$bed" $h | xargs -r kill -KILL 2>/dev/null || true; done
wait $job && fail "mpirun reported success after host2 was lost"
sleep 1
left=$( ("${testbed[@]}" pids --name "$bed" 1; "${testbed[@]}" pids --name "$bed" 2) | wc -l)
[ "$left" -eq 0 ] || fail "$left processes left on the hosts after mpirun ended"
"${testbed[@]}" down --name "$bed"
! ip netns list | grep -q "chtb$bed-" || fail "namespaces left behind"
echo "ok: host2 lost under mpirun: the survivors named its ranks and ended in ${took} s; nothing left behind"

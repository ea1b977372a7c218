#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A real cluster engine launching commhost across hosts of a test bed (tools/testbed):
# Open MPI's mpirun on host1 starts its daemons on the other hosts through an rsh agent
# that enters their namespaces (tools/testbed rsh), and the ranks take rank, world size,
# local rank and local size from OMPI_* alone (the store address from MASTER_ADDR, which
# Open MPI does not set). Checked: every op (`bench --op all --check`) at 2 hosts x 2 ranks
# over flat gloo and over hier (which must find the two hosts), and a host lost mid-job
# (its cable pulled, its ranks killed): the survivors name its ranks within the
# heartbeat time and end, and nothing is left running or in `ip netns` afterwards.
#   engines_test.sh <commhost> <repo root>
# Needs root for the bed; without it (or without mpirun) it says why and exits 77 (skipped).
set -euo pipefail
commhost=$1
src=$2
tmp=$(mktemp -d)
export TMPDIR="$tmp"
for v in $(env | grep -oE '^(COMMHOST_|OMPI_|PMI_|SLURM_)[A-Z_]*'); do unset "$v"; done
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
bed=e$(($$ % 100000))
testbed=("$src/tools/testbed")
trap '"${testbed[@]}" down --name "$bed" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  [ -f "$tmp/out" ] && tail -40 "$tmp/out"
  exit 1
}
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (Debian's openmpi-bin)"; exit 77; }
set +e
"${testbed[@]}" probe
probed=$?
set -e
[ $probed = 0 ] || exit 77
"${testbed[@]}" up 2 --name "$bed" >/dev/null
port=$((20000 + RANDOM % 12000))

# mpi CONFIG PROGRAM...: mpirun on host1 over host1:2 and host2:2, rank output in $tmp/out.
mpi() {
  local config=$1
  shift
  port=$((port + 1))
  "${testbed[@]}" exec --name "$bed" 1 -- env TESTBED_NAME="$bed" timeout 180 mpirun --allow-run-as-root \
    --oversubscribe --host host1:2,host2:2 -np 4 --mca plm_rsh_agent "${testbed[*]} rsh" \
    --mca oob_tcp_if_include eth0 --mca btl_tcp_if_include eth0 -x MASTER_ADDR=10.77.0.1 -x MASTER_PORT=$port \
    -x COMMHOST_CONFIG="$config" "$commhost" "$@" --set store.options.bind=10.77.0.1 \
    --set backends.gloo.options.device=eth0 --set group.timeout=30s >"$tmp/out" 2>&1
}

bench=(bench --op all --check --sizes 8:64K --factor 16 -n 2 -w 1)
for cfg in gloo hier; do
  mpi "$src/configs/$cfg.yaml" "${bench[@]}" || fail "mpirun: bench --op all --check over $cfg"
  grep -q "# commhost bench: 4 ranks, config $src/configs/$cfg.yaml" "$tmp/out" || fail "$cfg: not one job of 4 ranks"
  rows=$(grep -Ec '^ +[0-9]+ +[0-9]+ ' "$tmp/out" || true)
  wrong=$( (grep -E '^ +[0-9]+ +[0-9]+ ' "$tmp/out" || true) | awk '$NF != 0' | wc -l)
  [ "$rows" -eq 37 ] && [ "$wrong" -eq 0 ] || fail "$cfg: $rows rows (want 37: 9 ops x 4 sizes + barrier), $wrong wrong"
  if [ $cfg = hier ]; then
    grep -q "hier backend 'hier': 2 hosts: \[0 1\] \[2 3\]; intra 'shm', inter 'gloo'" "$tmp/out" ||
      fail "hier under mpirun did not find 2 hosts of 2 ranks"
  fi
  echo "ok: mpirun over host1:2,host2:2, $cfg: every op checked, ranks from OMPI_* alone"
done

# host2 lost mid-job: cable pulled (no reset reaches anyone), then its ranks killed.
mpi "$src/configs/gloo.yaml" bench --op allreduce --sizes 4K -n 1000000 -w 1 \
  --set supervisor.heartbeat.interval=500ms --set supervisor.heartbeat.timeout=5s &
job=$!
for _ in $(seq 150); do grep -q "allreduce (route" "$tmp/out" 2>/dev/null && break; sleep 0.2; done
grep -q "allreduce (route" "$tmp/out" || fail "the job did not start"
sleep 1
"${testbed[@]}" cut --name "$bed" 2
# Its ranks die; Open MPI's daemon there stays, as on a host that is only unreachable (here
# the daemon is mpirun's own child through the agent: killing it would tell mpirun at once).
for pid in $("${testbed[@]}" pids --name "$bed" 2); do
  [ "$(cat /proc/$pid/comm 2>/dev/null)" = commhost ] && kill -KILL "$pid"
done
cut=$(date +%s)
# The survivors (host1's ranks) must end by themselves, naming the lost ranks.
ranks_on_host1() {
  for pid in $("${testbed[@]}" pids --name "$bed" 1); do
    [ "$(cat /proc/$pid/comm 2>/dev/null)" = commhost ] && echo "$pid"
  done
  true
}
for _ in $(seq 200); do [ -z "$(ranks_on_host1)" ] && break; sleep 0.2; done
took=$(($(date +%s) - cut))
[ -z "$(ranks_on_host1)" ] || fail "the survivors still run 40 s after host2 was lost (heartbeat timeout 5 s)"
grep -E "^commhost: " "$tmp/out" | grep -qE "peer [23] lost" || fail "no survivor named rank 2 or 3"
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

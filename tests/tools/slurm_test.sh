#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Slurm launching commhost across hosts of a test bed: a real slurmctld and a slurmd per
# host (tools/testbed slurm), and `srun -N 2 --ntasks-per-node 2 commhost ...` whose ranks
# take rank, world size, local rank and the store's address and port from Slurm's
# variables alone (no commhost run, no MASTER_ADDR, no --set): the store binds the first
# node's address and gloo the address each host's name resolves to. Checked: every op
# (`bench --op all --check`) over flat gloo and over hier; the README's batch script through
# `sbatch --wait`; a task killed mid-job, with and without --kill-on-bad-exit (the
# survivors report the lost peer, or what they were in when Slurm ended the step: never a
# hang); a host lost mid-job (its cable pulled, its ranks killed) named by the survivors,
# and the same loss in a hier job with on_peer_loss: shrink, where host1 goes on as a 1x2
# job and passes `commhost train --check`; nothing left running and no namespace left.
#   slurm_test.sh <commhost> <repo root>
# Needs root for the bed, and Debian's slurm-wlm and munge; without them it exits 77 (skipped).
set -euo pipefail
commhost=$1
src=$2
source "$src/tests/tools/bed_lib.sh"
for tool in srun sbatch slurmctld slurmd munged; do
  command -v $tool >/dev/null || { echo "SKIP: no $tool (Debian's slurm-wlm and munge)"; exit 77; }
done
bed_up 2
"${testbed[@]}" slurm --name "$bed" >"$tmp/slurm.up" || { cat "$tmp/slurm.up"; fail "Slurm did not start"; }
export SLURM_CONF=/run/commhost-testbed-slurm/$bed/slurm.conf
on1=("${testbed[@]}" exec --name "$bed" 1 --)

# srun ARGS... PROGRAM...: a step of 2 hosts x 2 tasks from host1, output in $tmp/out. It
# first waits (30 s at most) for the previous job to leave the queue: one still completing
# holds its nodes, and the new one would wait behind it.
srun_step() {
  for _ in $(seq 150); do [ -z "$("${on1[@]}" squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.2; done
  "${on1[@]}" timeout 180 srun -N 2 --ntasks-per-node 2 "$@" >"$tmp/out" 2>&1
}

bench=(bench --op all --check --sizes 8:64K --factor 16 -n 2 -w 1)
for cfg in gloo hier; do
  srun_step env COMMHOST_CONFIG="$src/configs/$cfg.yaml" "$commhost" "${bench[@]}" ||
    fail "srun: bench --op all --check over $cfg"
  check_bench $cfg srun
  echo "ok: srun -N 2 --ntasks-per-node 2, $cfg: every op checked, ranks and store from SLURM_* alone"
done

# The README's batch script, as written there.
readme_block "slurm batch script" >"$tmp/job.sh"
grep -q '^#SBATCH' "$tmp/job.sh" || fail "README.md has no batch script after <!-- engines-test: slurm batch script -->"
(cd "$src" && "${on1[@]}" env PATH="$(dirname "$commhost"):$PATH" timeout 180 sbatch --wait -o "$tmp/batch-%j.out" \
  "$tmp/job.sh" >"$tmp/out" 2>&1) || fail "sbatch --wait of the README's script"
cp "$tmp"/batch-*.out "$tmp/out"
check_bench hier sbatch
echo "ok: sbatch --wait of the README's script: every op checked on 2 hosts"

# kill_rank R: SIGKILL the task whose SLURM_PROCID is R (on host2).
kill_rank() {
  local pid
  for pid in $(ranks_on 2); do
    tr '\0' '\n' </proc/$pid/environ 2>/dev/null | grep -qx "SLURM_PROCID=$1" && kill -KILL "$pid"
  done
  true
}
long=(env COMMHOST_CONFIG="$src/configs/gloo.yaml" "$commhost" bench --op allreduce --sizes 4K -n 1000000 -w 1
  --set supervisor.heartbeat.interval=500ms --set supervisor.heartbeat.timeout=5s)

# A task killed, no --kill-on-bad-exit: the survivors find the lost peer, report it and
# exit, and srun ends with them.
srun_step "${long[@]}" &
job=$!
wait_started
kill_rank 3
wait $job && fail "srun reported success after task 3 was killed"
n=$(grep -cE "^commhost: \[group main rank [012]\] .*peer 3 lost" "$tmp/out" || true)
[ "$n" -eq 3 ] || fail "$n of the 3 survivors reported peer 3 lost"
echo "ok: task 3 killed under srun: the 3 survivors reported 'peer 3 lost' and srun ended"

# With --kill-on-bad-exit Slurm ends the step at once (SIGTERM), often before a survivor's
# own verdict: each survivor still says what it was in, or its verdict (supervisor.on_sigterm:
# report), one of them names the lost peer, and nothing hangs.
srun_step --kill-on-bad-exit=1 "${long[@]}" &
job=$!
wait_started
kill_rank 3
wait $job && fail "srun --kill-on-bad-exit reported success after task 3 was killed"
grep -q "task 3: Killed" "$tmp/out" || fail "srun did not name task 3"
for r in 0 1 2; do
  grep -qE "\[group main rank $r\] .*(peer 3 lost|terminated by SIGTERM)" "$tmp/out" ||
    fail "rank $r, ended by Slurm, did not report what it was in"
done
grep -qE "\[group main rank [012]\] .*peer 3 lost" "$tmp/out" || fail "no survivor named the lost peer"
[ -z "$(ranks_on 1)$(ranks_on 2)" ] || fail "ranks left running after srun --kill-on-bad-exit ended"
echo "ok: task 3 killed under srun --kill-on-bad-exit: Slurm ended the step, every survivor reported, nothing left running"

# host2 lost mid-job: cable pulled (no reset reaches anyone), then its ranks killed. The
# survivors (host1's ranks) must end by themselves, naming the lost ranks; srun waits for
# the unreachable node's slurmd until Slurm's own timeouts, so the operator cancels the job.
srun_step "${long[@]}" &
job=$!
wait_started
lose_host2
for j in $("${on1[@]}" squeue -h -o %i 2>/dev/null || true); do "${on1[@]}" scancel "$j" || true; done
kill "$job" 2>/dev/null || true
wait $job 2>/dev/null || true
echo "ok: host2 lost under srun: the survivors named its ranks and ended in ${took} s"

# The same loss in a hier job with supervisor.on_peer_loss: shrink: host1's two ranks shrink
# to a 1x2 job (hier on one host) and finish `commhost train --check`.
"${testbed[@]}" down --name "$bed" >/dev/null
bed_up 2
"${testbed[@]}" slurm --name "$bed" >/dev/null
srun_step env COMMHOST_CONFIG="$src/configs/hier.yaml" "$commhost" train --check --epochs 20 --steps-per-epoch 100 \
  --hidden 64 --set supervisor.on_peer_loss=shrink --set supervisor.heartbeat.interval=200ms \
  --set supervisor.heartbeat.timeout=2s &
job=$!
for _ in $(seq 150); do grep -q "^epoch 1/" "$tmp/out" 2>/dev/null && break; sleep 0.2; done
grep -q "^epoch 1/" "$tmp/out" || fail "the training did not start"
cut_host2
wait_host1_ended  # they finish the training
for r in 0 1; do
  grep -q "\[group main rank $r\] shrunk: 4 -> 2 ranks (removed 2, 3; this rank was $r)" "$tmp/out" ||
    fail "rank $r did not shrink to the 2 ranks of host1"
done
grep -q "hier backend 'hier': 1 host: \[0 1\]" "$tmp/out" || fail "hier was not rebuilt on one host"
grep -qE "^check: after 2000 steps .*within --tolerance" "$tmp/out" || fail "the shrunk job's --check did not pass"
for j in $("${on1[@]}" squeue -h -o %i 2>/dev/null || true); do "${on1[@]}" scancel "$j" || true; done
kill "$job" 2>/dev/null || true
wait $job 2>/dev/null || true
echo "ok: host2 lost from a 2x2 hier job with on_peer_loss: shrink: host1 went on as 1x2 and passed train --check"
"${testbed[@]}" down --name "$bed"
! ip netns list | grep -q "chtb$bed-" || fail "namespaces left behind"
[ ! -e "/run/commhost-testbed-slurm/$bed" ] || fail "Slurm's state left behind"
echo "ok: nothing left behind"

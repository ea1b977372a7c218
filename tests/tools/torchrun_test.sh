#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# torchrun across hosts of a test bed: two torch.distributed.run agents, one per host, meet
# through torch's c10d rendezvous on host1 and start 2 workers each; the workers train a
# small model with DDP on torch.distributed backend "commhost" (hier: shm inside a host,
# gloo between them) and compare every step's parameters with the same training over
# torch's own gloo (tools/examples/ddp_train.py --compare gloo), and launch commhost's
# bench (--no_python) over gloo and hier with every op checked. The README's torchrun
# line runs as written there. Then --max_restarts across hosts: a worker on host2 killed
# mid-run, both agents restart their workers, the job re-forms on commhost and ends well.
# And a host lost mid-run: the other host's workers name its ranks within the heartbeat
# timeout and exit; nothing is left in `ip netns` afterwards.
#   torchrun_test.sh <commhost> <repo root> <build dir>
# Needs root for the bed and Debian's python3-torch with the commhost module built; else
# it exits 77 (skipped).
set -euo pipefail
commhost=$1
src=$2
build=$3
source "$src/tests/tools/bed_lib.sh"
python=/usr/bin/python3
[ -d "$build/python/commhost" ] || { echo "SKIP: no commhost Python module in $build/python"; exit 77; }
$python -c "import torch.distributed.run" 2>/dev/null || { echo "SKIP: no torch.distributed.run for $python"; exit 77; }
bed_up 2

# agents LINE: LINE (a torch.distributed.run command line) on host1 and host2 at once, from
# the source tree; each host's output in $tmp/out1 and $tmp/out2 (both in $tmp/out).
agents() {
  local line=$1 h pids=() rc=0
  rm -f "$tmp/out1" "$tmp/out2"
  for h in 1 2; do
    (cd "$src" && "${testbed[@]}" exec --name "$bed" $h -- env PYTHONPATH="$build/python" \
      PATH="$(dirname "$python"):$PATH" timeout 240 bash -c "$line" >"$tmp/out$h" 2>&1) &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  cat "$tmp/out1" "$tmp/out2" >"$tmp/out"
  return $rc
}

# Every op checked with the agents launching commhost itself (--no_python): ranks from
# torchrun's RANK/WORLD_SIZE/LOCAL_*, the store on the MASTER_ADDR/MASTER_PORT it picked.
for cfg in gloo hier; do
  agents "COMMHOST_CONFIG=configs/$cfg.yaml python3 -m torch.distributed.run --nnodes 2 --nproc_per_node 2 \
    --rdzv_backend c10d --rdzv_endpoint host1:29400 --rdzv_id bench$cfg --redirects 1 --tee 1 --no_python \
    $commhost bench --op all --check --sizes 8:64K --factor 16 -n 2 -w 1" || fail "torchrun: bench over $cfg"
  sed -i 's/^\[default[0-9]*\]://' "$tmp/out"  # the agent's prefix of a tee'd line
  check_bench $cfg torchrun
  echo "ok: torchrun (2 agents) over host1 and host2, $cfg: every op checked, ranks from torchrun's variables"
done

line=$(readme_block torchrun)
[[ $line == *torch.distributed.run* ]] || fail "README.md has no torchrun line after <!-- engines-test: torchrun -->"
agents "$line" || fail "the README's torchrun line"
grep -q "hier backend 'hier': 2 hosts: \[0 1\] \[2 3\]" "$tmp/out" || fail "hier did not find 2 hosts of 2 workers"
grep -q "ddp_train: 4 ranks on backend commhost" "$tmp/out" || fail "not one job of 4 workers"
grep -qE "ddp_train: 10 steps, final loss .*parameters within rtol .* of gloo's at every step" "$tmp/out" ||
  fail "DDP on commhost did not match torch's gloo"
echo "ok: the README's torchrun line: 2 agents, 4 workers, DDP on commhost (hier across the hosts) matches gloo"

# --max_restarts 1: a worker on host2 killed once the job runs; the agents restart theirs.
restart=${line/--rdzv_id job1/--rdzv_id job2 --max_restarts 1}
restart=${restart/--steps 10/--steps 400}
restart=${restart/ --compare gloo/}
rm -f "$tmp/out1"
agents "$restart" &
job=$!
for _ in $(seq 300); do grep -q "step   0 loss" "$tmp/out1" 2>/dev/null && break; sleep 0.2; done
grep -q "step   0 loss" "$tmp/out1" || { cat "$tmp/out1" "$tmp/out2" >"$tmp/out"; fail "the job did not start"; }
killed=""
for pid in $("${testbed[@]}" pids --name "$bed" 2); do
  tr '\0' '\n' </proc/$pid/environ 2>/dev/null | grep -qx "LOCAL_RANK=1" && kill -KILL "$pid" && killed=$pid && break
done
[ -n "$killed" ] || fail "no worker found on host2"
wait $job || fail "the job did not end well after one worker was killed (--max_restarts 1)"
starts=$(grep -c "ddp_train: 4 ranks on backend commhost" "$tmp/out" || true)
[ "$starts" -eq 2 ] || fail "the workers started $starts times (want 2: the first run and one restart)"
grep -q "ddp_train: 400 steps, final loss" "$tmp/out" || fail "the restarted job did not finish its steps"
grep -E "Worker group FAILED|peer [0-9] lost|restart" "$tmp/out" | cut -c1-220 | head -8
echo "ok: torchrun --max_restarts 1 across hosts: a worker killed, both agents restarted theirs, the job ended well"
# host2 lost mid-run (its cable pulled, everything on it killed, its agent too): host1's
# workers name the lost ranks within the heartbeat timeout and exit. host1's agent then
# waits for its peer agent as torch's elastic agent does (its own timeouts): the operator
# ends it.
lost=${restart/--rdzv_id job2 --max_restarts 1/--rdzv_id job3}
lost=${lost/--steps 400/--steps 100000}
rm -f "$tmp/out1"
agents "COMMHOST_SUPERVISOR_HEARTBEAT_TIMEOUT=5s $lost" &
job=$!
for _ in $(seq 300); do grep -q "step   0 loss" "$tmp/out1" 2>/dev/null && break; sleep 0.2; done
grep -q "step   0 loss" "$tmp/out1" || fail "the job did not start"
"${testbed[@]}" cut --name "$bed" 2
"${testbed[@]}" pids --name "$bed" 2 | xargs -r kill -KILL
cut=$(date +%s)
workers_on_host1() {
  local pid
  for pid in $("${testbed[@]}" pids --name "$bed" 1); do
    tr '\0' '\n' </proc/$pid/environ 2>/dev/null | grep -q "^LOCAL_RANK=" && echo "$pid"
  done
  true
}
for _ in $(seq 200); do [ -z "$(workers_on_host1)" ] && break; sleep 0.2; done
took=$(($(date +%s) - cut))
[ -z "$(workers_on_host1)" ] || fail "host1's workers still run 40 s after host2 was lost (heartbeat timeout 5 s)"
grep -qE "RuntimeError: \[group main rank [01]\] .*peer [23] lost" "$tmp/out1" || fail "no worker on host1 named rank 2 or 3"
"${testbed[@]}" pids --name "$bed" 1 | xargs -r kill -KILL
wait $job && fail "torchrun reported success after host2 was lost"
echo "ok: host2 lost under torchrun: host1's workers named its ranks and ended in ${took} s"
"${testbed[@]}" down --name "$bed"
! ip netns list | grep -q "chtb$bed-" || fail "namespaces left behind"

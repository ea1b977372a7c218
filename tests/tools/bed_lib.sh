# SPDX-License-Identifier: Apache-2.0
# Shared by the tests that run a cluster engine on a test bed (tools/testbed): engines_test.sh
# (Open MPI) and slurm_test.sh. Source it with $src (the repo root) set; it makes $tmp, a
# bed named $bed (torn down on exit, even when the test fails) and clears the launch
# variables this shell may carry, so the ranks see only what the engine gives them.
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

# bed_up N: the bed, or exit 77 (skipped) saying why this machine cannot make one.
bed_up() {
  set +e
  "${testbed[@]}" probe
  local probed=$?
  set -e
  [ $probed = 0 ] || exit 77
  "${testbed[@]}" up "$1" --name "$bed" >/dev/null
}

# check_bench CONFIG-NAME LABEL: $tmp/out holds `bench --op all --check --sizes 8:64K
# --factor 16` of 4 ranks on 2 hosts: one job, every row right, hier across the 2 hosts.
check_bench() {
  local cfg=$1 label=$2 rows wrong
  grep -q "# commhost bench: 4 ranks, config .*/$cfg.yaml" "$tmp/out" || fail "$label, $cfg: not one job of 4 ranks"
  rows=$(grep -Ec '^ +[0-9]+ +[0-9]+ ' "$tmp/out" || true)
  wrong=$( (grep -E '^ +[0-9]+ +[0-9]+ ' "$tmp/out" || true) | awk '$NF != 0' | wc -l)
  [ "$rows" -eq 37 ] && [ "$wrong" -eq 0 ] || fail "$label, $cfg: $rows rows (want 37: 9 ops x 4 sizes + barrier), $wrong wrong"
  if [ "$cfg" = hier ]; then
    grep -q "hier backend 'hier': 2 hosts: \[0 1\] \[2 3\]; intra 'shm', inter 'gloo'" "$tmp/out" ||
      fail "$label: hier did not find 2 hosts of 2 ranks"
  fi
}

# ranks_on H: the pids of commhost processes on host H.
ranks_on() {
  local pid
  for pid in $("${testbed[@]}" pids --name "$bed" "$1"); do
    [ "$(cat /proc/$pid/comm 2>/dev/null)" = commhost ] && echo "$pid"
  done
  true
}

# wait_started: the bench in $tmp/out has begun its timed allreduce (30 s at most).
wait_started() {
  for _ in $(seq 150); do grep -q "allreduce (route" "$tmp/out" 2>/dev/null && break; sleep 0.2; done
  grep -q "allreduce (route" "$tmp/out" || fail "the job did not start"
  sleep 1
}

# readme_block NAME: the fenced block after `<!-- engines-test: NAME -->` in README.md, as
# written there (the engine tests run the README's cluster commands).
readme_block() {
  awk -v mark="<!-- engines-test: $1 -->" '
    $0 == mark { armed = 1; next }
    armed && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }' "$src/README.md"
}

# lose_host2: once the job in $tmp/out runs (wait_started), pulls host2's cable and kills
# its ranks (cut_host2); host1's ranks must end by themselves within 40 s, one of them naming
# rank 2 or 3 lost. Sets $took (seconds from the cut to their end).
lose_host2() {
  cut_host2
  wait_host1_ended
  grep -E "^commhost: " "$tmp/out" | grep -qE "peer [23] lost" || fail "no survivor named rank 2 or 3"
}

# cut_host2: host2's cable pulled (no packet, no reset reaches anyone), then its ranks killed.
cut_host2() {
  "${testbed[@]}" cut --name "$bed" 2
  ranks_on 2 | xargs -r kill -KILL
  cut_at=$(date +%s)
}

# wait_host1_ended: host1's ranks end within 40 s of cut_host2; sets $took.
wait_host1_ended() {
  for _ in $(seq 200); do [ -z "$(ranks_on 1)" ] && break; sleep 0.2; done
  took=$(($(date +%s) - cut_at))
  [ -z "$(ranks_on 1)" ] || fail "host1's ranks still run 40 s after host2 was lost (heartbeat timeout 5 s or less)"
}

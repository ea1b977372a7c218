#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Several hosts on one machine, on a test bed (tools/testbed): each "host" is a network
# namespace with its own UTS namespace (its own hostname, so shm's host identity differs),
# wired by a veth pair to a bridge in a switch namespace; addresses 10.77.0.H/24 exist only
# inside them, and the machine's own namespace is not touched. Each host runs its own launcher:
#   commhost run -n R --nnodes N --node-rank I --master 10.77.0.1:PORT
# with gloo on the veth (device: eth0) and the tcp store bound to host 1's veth address,
# with an auth token. The bed (every namespace, every process in it) goes at exit, pass or fail.
#
#   multihost_test.sh <commhost> <repo root>
#   multihost_test.sh <commhost> <repo root> --bench [ROUNDS [MPI_PEER]]
# The second form runs no test: it prints allreduce busbw at 2 hosts x 2 ranks for flat
# gloo (configs/gloo.yaml) and hier (configs/hier.yaml) in ROUNDS (default 3) alternating
# rounds, over links shaped to RATE (default 10gbit; tools/testbed up --rate), and Open MPI's
# allreduce in the same rounds when MPI_PEER is the built ../shared/peers/mpi_allreduce.c.
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN for namespaces); without it, says so in one
# line and exits 77, which ctest reports as skipped.
set -euo pipefail
commhost=$1
src=$2
tmp=$(mktemp -d)
export TMPDIR="$tmp"  # flight-recorder dumps stay in this run's dir
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done
bed=m$(($$ % 100000))  # this run's test bed (tools/testbed): the name keeps parallel runs apart
testbed=("$src/tools/testbed")

trap '"${testbed[@]}" down --name "$bed" >/dev/null 2>&1 || true; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/host*.log; do [ -f "$f" ] && { echo "--- $f"; tail -30 "$f"; }; done
  exit 1
}

set +e
"${testbed[@]}" probe
probed=$?
set -e
[ $probed = 0 ] || exit 77

# make_hosts N: a fresh bed of N hosts, host H at 10.77.0.H on its eth0. These are
# correctness tests: the links' rate limit is 100gbit, above what a veth carries here (and
# the bed's default delay, where the kernel has netem); the --bench form asks for 10gbit.
make_hosts() { "${testbed[@]}" up "$1" --name "$bed" --rate "${RATE:-100gbit}" >/dev/null; }

# on_host H CMD...: runs CMD on host H (its network namespace, a UTS namespace named hostH).
on_host() {
  local h=$1
  shift
  "${testbed[@]}" exec --name "$bed" "$h" -- "$@"
}

port=$((20000 + RANDOM % 12000))
# The store on host 1's veth address with a token; gloo on eth0, with a short timeout so a
# failure ends the test instead of hanging it.
common=(--set store.options.bind=10.77.0.1 --set store.options.auth_token=s3cret --set group.timeout=20s
  --set backends.gloo.options.device=eth0)

# launch N R CONFIG PROGRAM...: one launcher per host (node rank H-1), R ranks each.
launch() {
  local n=$1 r=$2 config=$3 h
  shift 3
  pids=()
  for ((h = 1; h <= n; h++)); do
    on_host "$h" timeout 120 "$commhost" run -n "$r" --nnodes "$n" --node-rank $((h - 1)) --master "10.77.0.1:$port" \
      -c "$config" "${common[@]}" -- "$@" >"$tmp/host$h.log" 2>&1 &
    pids+=($!)
  done
}
wait_all() {
  local pid status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  return $status
}

if [ "${3:-}" = --bench ]; then
  RATE=${RATE:-10gbit} make_hosts 2
  sizes=8,1K,64K,1M,16M,64M
  echo "# allreduce f32 sum, 2 hosts x 2 ranks (test bed, links ${RATE:-10gbit}), per size: p50 time (us) and busbw (GB/s)"
  for ((round = 1; round <= ${4:-3}; round++)); do
    for cfg in gloo hier; do
      port=$((port + 1))
      launch 2 2 "$src/configs/$cfg.yaml" "$commhost" bench --op allreduce --sizes $sizes --min-time 1
      wait_all || fail "bench over $cfg"
      grep -E '^\[0\] +[0-9]+ +[0-9]+ ' "$tmp/host1.log" |
        awk -v r="$round" -v c="$cfg" '{printf "round %d %-5s %9d B  p50 %9.1f us  busbw %6.3f GB/s\n", r, c, $2, $9, $12}'
    done
    # Open MPI's own allreduce on the same bed (mpirun through the bed's rsh agent), when
    # given the peer program (../shared/peers/mpi_allreduce.c built with mpicc) as $5.
    if [ -n "${5:-}" ]; then
      on_host 1 env TESTBED_NAME="$bed" timeout 300 mpirun --allow-run-as-root --oversubscribe \
        --host host1:2,host2:2 -np 4 --mca plm_rsh_agent "${testbed[*]} rsh" --mca oob_tcp_if_include eth0 \
        --mca btl_tcp_if_include eth0 "$5" >"$tmp/mpi.log" 2>&1 || fail "mpirun $5"
      awk -v r="$round" '$1 ~ /^[0-9]+$/ {printf "round %d mpi   %9d B  mean %8.1f us  busbw %6.3f GB/s\n", r, $1, $2, $4}' \
        "$tmp/mpi.log"
    fi
  done
  exit 0
fi

bench=("$commhost" bench --op all --check --sizes 8:64K --factor 16 -n 2 -w 1)
for shape in "2 2" "3 1"; do
  read -r n r <<<"$shape"
  make_hosts "$n"
  port=$((port + 1))
  launch "$n" "$r" "$src/configs/gloo.yaml" "${bench[@]}"
  wait_all || fail "bench --op all --check on $n hosts x $r ranks"
  rows=$(grep -Ec '^\[0\] +[0-9]+ +[0-9]+ ' "$tmp/host1.log" || true)
  [ "$rows" -eq 37 ] || fail "$n hosts x $r ranks: expected 37 rows (9 ops x 4 sizes + barrier), got $rows"
  wrong=$(grep -E '^\[0\] +[0-9]+ +[0-9]+ ' "$tmp/host1.log" | awk '$NF != 0' | wc -l)
  [ "$wrong" -eq 0 ] || fail "$n hosts x $r ranks: rows with wrong elements"
  grep -q "# commhost bench: $((n * r)) ranks" "$tmp/host1.log" || fail "the header does not count $((n * r)) ranks"
  # The store really is on the veth address, not loopback.
  grep -q "store at 10.77.0.1:$port" "$tmp/host1.log" || fail "the launcher did not name the store at 10.77.0.1:$port"
  echo "ok: $n hosts x $r ranks, every op checked over gloo on eth0, the store on 10.77.0.1 with a token"
done

# hier across two hosts, found by host identity (each UTS namespace has its own hostname):
# shm inside each host, gloo between the two leaders on eth0; every op checked.
make_hosts 2
port=$((port + 1))
launch 2 2 "$src/configs/hier.yaml" "${bench[@]}"
wait_all || fail "bench --op all --check over hier on 2 hosts x 2 ranks"
grep -q "hier backend 'hier': 2 hosts: \[0 1\] \[2 3\]; intra 'shm', inter 'gloo'" "$tmp/host1.log" ||
  fail "hier did not find 2 hosts of 2 ranks"
grep -q "# allreduce -> hier" "$tmp/host1.log" || fail "allreduce was not routed to hier"
rows=$(grep -Ec '^\[0\] +[0-9]+ +[0-9]+ ' "$tmp/host1.log" || true)
wrong=$(grep -E '^\[0\] +[0-9]+ +[0-9]+ ' "$tmp/host1.log" | awk '$NF != 0' | wc -l)
[ "$rows" -eq 37 ] && [ "$wrong" -eq 0 ] || fail "hier on 2 hosts x 2 ranks: $rows rows, $wrong with wrong elements"
echo "ok: hier on 2 hosts x 2 ranks (shm inside each host, gloo across), every op checked"

# A host whose token differs is refused by the store, which names the token.
make_hosts 2
port=$((port + 1))
on_host 1 timeout 60 "$commhost" run -n 1 --nnodes 2 --node-rank 0 --master "10.77.0.1:$port" \
  -c "$src/configs/gloo.yaml" "${common[@]}" -- "${bench[@]}" >"$tmp/host1.log" 2>&1 &
first=$!
status=0
on_host 2 timeout 60 "$commhost" run -n 1 --nnodes 2 --node-rank 1 --master "10.77.0.1:$port" \
  -c "$src/configs/gloo.yaml" "${common[@]}" --set store.options.auth_token=wrong -- "${bench[@]}" \
  >"$tmp/host2.log" 2>&1 || status=$?
kill -KILL "$first" 2>/dev/null || true
wait "$first" 2>/dev/null || true
[ "$status" != 0 ] || fail "a rank with the wrong token joined the job"
grep -q "auth_token" "$tmp/host2.log" || fail "the refused rank's error does not name auth_token"
echo "ok: a host with the wrong token is refused, naming auth_token"

# shm across hosts: refused before any segment is made. Under launchers that say the job
# spans hosts, by the host (shm lacks feature multi_host); with ranks that claim one host
# (LOCAL_WORLD_SIZE = WORLD_SIZE, set by hand), by shm's rendezvous, which compares each
# rank's hostname and boot id and names the other host.
make_hosts 2
port=$((port + 1))
launch 2 1 "$src/configs/shm.yaml" "$commhost" bench --op allreduce --sizes 8 -n 1 -w 0
wait_all && fail "an shm group spanning two hosts started"
grep -q "does not declare feature multi_host, which this job needs: its 2 ranks span hosts" "$tmp/host1.log" ||
  fail "the host did not refuse shm for a job spanning hosts"
port=$((port + 1))
pids=()
for h in 1 2; do
  on_host "$h" env RANK=$((h - 1)) WORLD_SIZE=2 LOCAL_RANK=$((h - 1)) LOCAL_WORLD_SIZE=2 MASTER_ADDR=10.77.0.1 \
    MASTER_PORT=$port COMMHOST_CONFIG="$src/configs/shm.yaml" timeout 60 "$commhost" bench --op allreduce --sizes 8 \
    -n 1 -w 0 "${common[@]}" >"$tmp/host$h.log" 2>&1 &
  pids+=($!)
done
wait_all && fail "an shm group whose ranks claim one host, on two, started"
grep -q "every rank of an shm group must run on one host; this rank runs on host1 boot" "$tmp/host1.log" ||
  fail "rank 0 did not say it runs on host1"
grep -q "rank 1 runs on host2 boot" "$tmp/host1.log" || fail "rank 0's error does not name rank 1 on host2"
echo "ok: shm across two hosts is refused, by the host under launchers and by shm's host check otherwise"

# A host lost mid-job: its cable is cut (no RST reaches anyone) and its processes die.
# The survivors must name rank 2 themselves (heartbeat) and end, not hang.
make_hosts 3
port=$((port + 1))
launch 3 1 "$src/configs/gloo.yaml" "$commhost" bench --op allreduce --sizes 4K -n 1000000 -w 1 \
  --set supervisor.heartbeat.interval=500ms --set supervisor.heartbeat.timeout=5s
for _ in $(seq 100); do grep -q "allreduce (route" "$tmp/host1.log" && break; sleep 0.2; done
sleep 1
"${testbed[@]}" cut --name "$bed" 3
"${testbed[@]}" pids --name "$bed" 3 | xargs -r kill -KILL 2>/dev/null || true
cut=$(date +%s)
wait "${pids[0]}" && fail "host 1 went on after host 3 was lost"
wait "${pids[1]}" && fail "host 2 went on after host 3 was lost"
took=$(($(date +%s) - cut))
grep -hE "^\[[01]\] commhost: " "$tmp/host1.log" "$tmp/host2.log" | grep -qE "rank 2|peer 2" ||
  fail "no survivor named rank 2"
[ "$took" -le 40 ] || fail "the survivors took ${took} s to end (heartbeat timeout 5 s, group timeout 20 s)"
echo "ok: host 3 lost mid-job: the survivors named rank 2 and ended in ${took} s"

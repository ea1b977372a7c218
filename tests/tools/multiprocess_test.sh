#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Separate processes over the embedded tcp store: N ranks of the all_collectives example,
# started the way a launcher does (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
# COMMHOST_CONFIG), each checking every collective's result.
#   multiprocess_test.sh <all_collectives binary> <config> <ranks>
set -euo pipefail
job=$1
config=$2
ranks=$3
tmp=$(mktemp -d)
export TMPDIR="$tmp"  # flight-recorder dumps (default dump_dir: $TMPDIR/commhost-traces-UID) stay in this run's dir
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done

run_once() {
  local port=$((20000 + RANDOM % 12000))  # below the ephemeral range, where other tests' connections take ports
  pids=()
  for ((r = 0; r < ranks; r++)); do
    RANK=$r WORLD_SIZE=$ranks LOCAL_RANK=$r LOCAL_WORLD_SIZE=$ranks MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      COMMHOST_CONFIG=$config "$job" --elements 1000 >"$tmp/rank$r.log" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for ((r = 0; r < ranks; r++)); do wait "${pids[$r]}" || failed=1; done
  pids=()
  return $failed
}

for attempt in 1 2 3; do
  if run_once; then break; fi
  if grep -q "cannot listen" "$tmp/rank0.log"; then echo "port taken, retrying"; continue; fi
  for f in "$tmp"/rank*.log; do echo "--- $f"; tail -20 "$f"; done
  echo "FAIL: a rank failed"
  exit 1
done
for ((r = 0; r < ranks; r++)); do
  grep -q "all collectives correct: $ranks ranks" "$tmp/rank$r.log" || { cat "$tmp/rank$r.log"; echo "FAIL: rank $r"; exit 1; }
done
grep -c " ok$" "$tmp/rank0.log" | xargs echo "ok: every rank checked every collective; rank 0 ops ok:"

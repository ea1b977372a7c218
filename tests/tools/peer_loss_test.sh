#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A rank killed in the middle of an allreduce loop: the survivor must fail with an error
# naming the lost peer and exit by itself, not hang and not die of a signal.
#   peer_loss_test.sh <allreduce sweep binary> <config>
set -euo pipefail
bench=$1
config=$2
tmp=$(mktemp -d)
export TMPDIR="$tmp"  # flight-recorder dumps (default dump_dir: $TMPDIR/commhost-traces-UID) stay in this run's dir
trap 'kill $victim $survivor 2>/dev/null || true; rm -rf "$tmp"' EXIT
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done
port=$((20000 + RANDOM % 12000))  # below the ephemeral range, where other tests' connections take ports
common=(WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COMMHOST_CONFIG=$config)
env RANK=0 "${common[@]}" "$bench" >"$tmp/rank0.log" 2>&1 &
victim=$!
env RANK=1 "${common[@]}" "$bench" >"$tmp/rank1.log" 2>&1 &
survivor=$!
# The loop is running (up to 30 s: a loaded CI machine starts the ranks slowly).
for _ in $(seq 300); do grep -q "1024" "$tmp/rank0.log" && break; sleep 0.1; done
grep -q "1024" "$tmp/rank0.log" || { cat "$tmp/rank0.log" "$tmp/rank1.log"; echo "FAIL: the allreduce loop did not start within 30 s"; exit 1; }
kill -KILL $victim
status=0
for _ in $(seq 300); do kill -0 $survivor 2>/dev/null || break; sleep 0.1; done
if kill -0 $survivor 2>/dev/null; then cat "$tmp/rank1.log"; echo "FAIL: the survivor still runs 30 s after its peer died"; exit 1; fi
wait $survivor || status=$?
cat "$tmp/rank1.log"
[ "$status" -ne 0 ] || { echo "FAIL: the survivor exited 0"; exit 1; }
[ "$status" -lt 128 ] || { echo "FAIL: the survivor died of signal $((status - 128))"; exit 1; }
grep -q "rank 1\] allreduce seq" "$tmp/rank1.log" || { echo "FAIL: the error does not name rank, op and seq"; exit 1; }
# Rank 0 also serves the store: the survivor may learn of its death from the backend's
# dropped connection or from the store's, whichever comes first; both must say so. (The
# survivor's op runs inside gloo's call: a store lost then aborts it, naming the store.)
grep -Eq "(reset|closed) by peer|Broken pipe|[Cc]onnection (refused|closed)|store (stopped answering|failed this rank's heartbeat).*rank serving it \(usually 0\) may have died" "$tmp/rank1.log" || { echo "FAIL: the error does not say the peer connection was lost"; exit 1; }
grep -q "PeerLost\|may have died" "$tmp/rank1.log" || { echo "FAIL: the error does not tell what to check"; exit 1; }
echo "ok: the survivor failed cleanly (exit $status) naming the lost peer"

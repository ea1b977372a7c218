#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The supervisor's load on the store at N ranks: a standalone `commhost store serve`, N
# idle ranks under `commhost run` (the storecoll test backend: no transport, the
# supervisor on), and over a window of the ranks' life the server's CPU (from
# /proc/PID/stat) and its requests (the count it logs when it stops).
#   tests/bench/store_load.sh BUILD_DIR N [SECONDS=20] [--set k=v ...]
set -euo pipefail
build=$(cd "$1" && pwd) n=$2 seconds=${3:-20}
shift $(($# >= 3 ? 3 : $#))
commhost=$build/bin/commhost
tmp=$(mktemp -d)
export TMPDIR="$tmp"
trap 'kill $server 2>/dev/null || true; rm -rf "$tmp"' EXIT
port=$((20000 + RANDOM % 12000))
cat >"$tmp/idle.yaml" <<YAML
plugin_path: [ "$build/tests/test_plugins/good" ]
store: { plugin: tcp, options: { serve: never, port: $port } }
backends: { s: { plugin: storecoll } }
routes: [{ device: cpu, backend: s }]
YAML
"$commhost" store serve --port "$port" >"$tmp/server.log" 2>&1 &
server=$!
sleep 0.5
ticks() { awk '{ print $14 + $15 }' "/proc/$server/stat"; }
"$commhost" run -n "$n" -c "$tmp/idle.yaml" "$@" -- "$build/bin/commhost_idle_rank" "$seconds" >"$tmp/run.log" 2>&1 &
job=$!
# Measure the middle of the ranks' life: after startup, before they leave.
settle=$(awk -v s="$seconds" 'BEGIN { print (s > 10 ? 5 : s / 3) }')
window=$(awk -v s="$seconds" -v w="$settle" 'BEGIN { print s - 2 * w }')
sleep "$settle"
t0=$(ticks)
sleep "$window"
t1=$(ticks)
wait $job || { echo "the job failed:"; tail -20 "$tmp/run.log"; exit 1; }
kill -INT $server
wait $server || true
hz=$(getconf CLK_TCK)
cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v w="$window" 'BEGIN { printf "%.1f", 100 * (b - a) / hz / w }')
requests=$(grep -o "[0-9]* requests in .*" "$tmp/server.log" || echo "no request count logged")
echo "$n ranks: store server CPU ${cpu}% of a core over ${window}s; over the server's life: $requests"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `commhost store serve` as a multi-node job would use it: a standalone server with a
# token, and a job whose store is { plugin: tcp, options: { serve: never } }. Then the
# server against hostile or unlucky peers: 100 unauthenticated clients claiming huge
# frames, more connections than file descriptors, and ranks that cannot reach it.
#   store_serve_test.sh <commhost binary> <all_collectives binary>
set -euo pipefail
commhost=$1
job=$2
tmp=$(mktemp -d)
export TMPDIR="$tmp"  # flight-recorder dumps (default dump_dir: $TMPDIR/commhost-traces-UID) stay in this run's dir
server=""
holder=""
cleanup() {
  [ -n "$holder" ] && kill "$holder" 2>/dev/null || true
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.log; do echo "--- $f"; tail -c 4000 "$f"; done; exit 1; }
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done

start_server() {  # $1: log name; the rest: arguments. Sets $server and $port.
  local log=$tmp/$1.log
  shift
  "$commhost" store serve --port 0 "$@" >"$log" 2>&1 &
  server=$!
  port=""
  for _ in $(seq 100); do
    port=$(grep -o 'serving on [0-9.]*:[0-9]*' "$log" | head -1 | sed 's/.*://' || true)
    [ -n "$port" ] && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$port" ] || fail "the server did not report its port"
}
stop_server() {
  kill -TERM "$server"
  wait "$server" || fail "the server did not exit cleanly on SIGTERM"
  server=""
}
write_config() {  # $1: file, $2: extra store options, $3: store timeout (5s)
  cat >"$1" <<YAML
store: { plugin: tcp, options: { serve: never, port: $port, timeout: ${3:-5s} $2 } }
backends: { self: {} }
routes: [{ device: cpu, backend: self }]
YAML
}

# --- a standalone server with a token, on loopback by default ---
start_server server --token s3cret
grep -q 'serving on 127.0.0.1:' "$tmp/server.log" || fail "the server does not default to loopback"
grep -q 'auth token required' "$tmp/server.log" || fail "the server does not say that a token is required"
echo "ok: the server binds 127.0.0.1 by default (port $port) and says a token is required"
write_config "$tmp/with_token.yaml" ", auth_token: s3cret"
write_config "$tmp/no_token.yaml" ""
write_config "$tmp/wrong_token.yaml" ", auth_token: n0tit"

COMMHOST_CONFIG=$tmp/with_token.yaml "$job" --elements 64 >"$tmp/job.log" 2>&1 || fail "job with the token failed"
grep -q "all collectives correct" "$tmp/job.log" || fail "job output lacks its verdict"
echo "ok: a job with the token ran every collective through the standalone store"

COMMHOST_STORE_TOKEN=s3cret COMMHOST_CONFIG=$tmp/no_token.yaml "$job" --elements 8 >"$tmp/env_token.log" 2>&1 ||
  fail "COMMHOST_STORE_TOKEN did not reach the store"
echo "ok: COMMHOST_STORE_TOKEN supplies the token"

if COMMHOST_CONFIG=$tmp/no_token.yaml "$job" >"$tmp/refused.log" 2>&1; then fail "a job without the token was served"; fi
grep -q "auth_token" "$tmp/refused.log" || fail "the refusal does not mention auth_token"
grep -q "unauthenticated" "$tmp/server.log" || fail "the server did not log the unauthenticated client"
if COMMHOST_CONFIG=$tmp/wrong_token.yaml "$job" >"$tmp/wrong.log" 2>&1; then fail "a job with a wrong token was served"; fi
grep -q "wrong auth token" "$tmp/server.log" || fail "the server did not log the wrong token"
echo "ok: a job without the token, or with a wrong one, is refused, and the server says why"

# --- 100 unauthenticated clients each claiming a 256 MiB frame, stalled ---
# The bound is on what they add to the server's resident memory (a sanitizer build
# starts higher); the absolute peak is printed too.
rss_before_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$server/status")
python3 - "$port" "$tmp/held" <<'PY' &
import os, socket, struct, sys, time
port, marker = int(sys.argv[1]), sys.argv[2]
socks = []
for _ in range(100):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(struct.pack("<II", 0x01534843, 256 << 20))  # magic v1, body length 256 MiB
    socks.append(s)
open(marker, "w").close()
time.sleep(30)  # killed by the test once it has measured
PY
holder=$!
for _ in $(seq 100); do [ -e "$tmp/held" ] && break; sleep 0.1; done
[ -e "$tmp/held" ] || fail "the 100 stalled clients did not connect"
COMMHOST_CONFIG=$tmp/with_token.yaml "$job" --elements 8 >"$tmp/job_meanwhile.log" 2>&1 ||
  fail "a job with the token was not served while 100 stalled clients were connected"
hwm_kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$server/status")
echo "server memory: ${rss_before_kb} kB resident before 100 stalled clients claiming 256 MiB each, peak ${hwm_kb} kB"
[ $((hwm_kb - rss_before_kb)) -lt $((64 * 1024)) ] ||
  fail "100 stalled clients took the server from ${rss_before_kb} kB to a peak of ${hwm_kb} kB, over 64 MiB more"
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
holder=""
echo "ok: the server stays under 64 MiB with 100 stalled clients claiming huge frames, and serves a job meanwhile"

stop_server
grep -q "stopping on signal" "$tmp/server.log" || fail "the server did not report its stop"
echo "ok: the server stops on SIGTERM"
if grep -r -l -e s3cret -e n0tit "$tmp"/*.log; then fail "a token appears in the output above"; fi
echo "ok: no token appears in the server's or the jobs' output"

# --- binding beyond loopback ---
if timeout 10 "$commhost" store serve --port 0 --bind 0.0.0.0 >"$tmp/open.log" 2>&1; then
  fail "the server listened on 0.0.0.0 without a token"
fi
grep -q -- "--insecure" "$tmp/open.log" || fail "the refusal does not mention --insecure"
start_server insecure --bind 0.0.0.0 --insecure
grep -q "WARNING: no auth token" "$tmp/insecure.log" || fail "no warning for an insecure server"
stop_server
echo "ok: 0.0.0.0 without a token is refused unless --insecure, which warns"

# --- more connections than file descriptors (EMFILE) ---
( ulimit -n 40 && exec "$commhost" store serve --port 0 ) >"$tmp/emfile.log" 2>&1 &
server=$!
port=""
for _ in $(seq 100); do
  port=$(grep -o 'serving on [0-9.]*:[0-9]*' "$tmp/emfile.log" | head -1 | sed 's/.*://' || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || fail "the fd-limited server did not report its port"
write_config "$tmp/emfile.yaml" ""
python3 - "$port" "$tmp/flood" <<'PY' &
import socket, sys, time
port, marker = int(sys.argv[1]), sys.argv[2]
socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(80)]
open(marker, "w").close()
time.sleep(3)  # the server spends this out of fds; then every connection closes
PY
holder=$!
for _ in $(seq 100); do [ -e "$tmp/flood" ] && break; sleep 0.1; done
[ -e "$tmp/flood" ] || fail "the 80 connections did not connect"
wait "$holder" || true
holder=""
COMMHOST_CONFIG=$tmp/emfile.yaml "$job" --elements 8 >"$tmp/job_after_emfile.log" 2>&1 ||
  fail "the server did not serve again after the connections closed"
lines=$(grep -c "accept" "$tmp/emfile.log" || true)
echo "accept lines logged in about 3 s out of fds: $lines"
grep "accept" "$tmp/emfile.log" | head -5
[ "$lines" -ge 1 ] && [ "$lines" -le 4 ] || fail "expected 1 to 4 lines about accept failures, got $lines"
grep -q "Too many open files.*time" "$tmp/emfile.log" || fail "the accept failure line lacks its reason or count"
grep -q "accepting connections again after [0-9]* failed accepts" "$tmp/emfile.log" ||
  fail "the server did not report that it accepts again, with the count"
stop_server
echo "ok: out of fds the server logs a few lines with the count, and serves again once connections close"

# --- ranks that cannot reach the store ---
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
write_config "$tmp/nowhere.yaml" ", progress_interval: 1s" 3s
if timeout 60 "$commhost" run -n 2 -c "$tmp/nowhere.yaml" -- "$job" --elements 8 >"$tmp/nowhere.log" 2>&1; then
  fail "a job whose store is nowhere succeeded"
fi
grep -q "\[rank 1\] still waiting for the store at 127.0.0.1:$port after [0-9.]*s" "$tmp/nowhere.log" ||
  fail "no progress line naming the rank, host:port and time waited"
grep -q "cannot connect to the store at 127.0.0.1:$port" "$tmp/nowhere.log" || fail "the final error does not name host:port"
grep -q "ranks that never reached the store: 0, 1" "$tmp/nowhere.log" ||
  fail "commhost run does not say which ranks never reached the store"
# The launcher learns it from the ranks' launch reports, not their output: with that gone,
# it still names them.
if timeout 60 "$commhost" run -n 2 -c "$tmp/nowhere.yaml" -- sh -c 'exec "$0" "$@" >/dev/null 2>&1' "$job" \
  --elements 8 >"$tmp/nowhere_quiet.log" 2>&1; then
  fail "a job whose store is nowhere succeeded"
fi
grep -q "ranks that never reached the store: 0, 1" "$tmp/nowhere_quiet.log" ||
  fail "with the ranks' output gone, commhost run does not name the ranks that never reached the store"
grep -Eq "^  rank 1: \[store\] .*cannot connect to the store at 127.0.0.1:$port" "$tmp/nowhere_quiet.log" ||
  fail "rank 1's report of giving up on the store is not in the summary"
echo "ok: unreachable store: progress lines, a final error naming it, and commhost run names the ranks"

# --- a rank that starts before the store: it waits, says so, then says it got there ---
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
write_config "$tmp/late.yaml" ", progress_interval: 1s" 20s
COMMHOST_CONFIG=$tmp/late.yaml timeout 60 "$job" --elements 8 >"$tmp/late_job.log" 2>&1 &
holder=$!
for _ in $(seq 100); do grep -q "still waiting for the store" "$tmp/late_job.log" && break; sleep 0.1; done
"$commhost" store serve --port "$port" >"$tmp/late_server.log" 2>&1 &
server=$!
wait "$holder" || fail "the job that started before the store failed"
holder=""
grep -q "still waiting for the store at 127.0.0.1:$port" "$tmp/late_job.log" || fail "no progress line before the store came up"
grep -q "reached the store at 127.0.0.1:$port after [0-9.]*s" "$tmp/late_job.log" || fail "no line saying the store was reached"
stop_server
echo "ok: a rank that starts before the store says it is waiting, then that it reached it"

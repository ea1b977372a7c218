#!/usr/bin/env bash
# `commhost store serve` as a multi-node job would use it: a standalone server with a
# token, and a job whose store is { plugin: tcp, options: { serve: never } }.
#   store_serve_test.sh <commhost binary> <all_collectives binary>
set -euo pipefail
commhost=$1
job=$2
tmp=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.log; do echo "--- $f"; cat "$f"; done; exit 1; }
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done

"$commhost" store serve --port 0 --token s3cret >"$tmp/server.log" 2>&1 &
server=$!
port=""
for _ in $(seq 100); do
  port=$(grep -o 'serving on 0.0.0.0:[0-9]*' "$tmp/server.log" | cut -d: -f2 || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || fail "the server did not report its port"
echo "server on port $port"

write_config() {  # $1: file, $2: extra store options
  cat >"$1" <<YAML
store: { plugin: tcp, options: { serve: never, port: $port, timeout: 5s $2 } }
backends: { self: {} }
routes: [{ device: cpu, backend: self }]
YAML
}
write_config "$tmp/with_token.yaml" ", auth_token: s3cret"
write_config "$tmp/no_token.yaml" ""

COMMHOST_CONFIG=$tmp/with_token.yaml "$job" --elements 64 >"$tmp/job.log" 2>&1 || fail "job with the token failed"
grep -q "all collectives correct" "$tmp/job.log" || fail "job output lacks its verdict"
echo "ok: a job with the token ran every collective through the standalone store"

COMMHOST_STORE_TOKEN=s3cret COMMHOST_CONFIG=$tmp/no_token.yaml "$job" --elements 8 >"$tmp/env_token.log" 2>&1 ||
  fail "COMMHOST_STORE_TOKEN did not reach the store"
echo "ok: COMMHOST_STORE_TOKEN supplies the token"

if COMMHOST_CONFIG=$tmp/no_token.yaml "$job" >"$tmp/refused.log" 2>&1; then fail "a job without the token was served"; fi
grep -q "auth_token" "$tmp/refused.log" || fail "the refusal does not mention auth_token"
grep -q "unauthenticated" "$tmp/server.log" || fail "the server did not log the unauthenticated client"
echo "ok: a job without the token is refused, and the server says why"

kill -TERM "$server"
wait "$server" || fail "the server did not exit cleanly on SIGTERM"
server=""
grep -q "stopping on signal" "$tmp/server.log" || fail "the server did not report its stop"
echo "ok: the server stops on SIGTERM"

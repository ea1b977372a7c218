#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A running job seen from outside: `commhost status` on a live 4-rank job (every rank
# within a second or two; a hang injected at rank 2 named, with the op and seq, long
# before group.timeout), --json's records, `commhost top`, `commhost run --metrics` scraped by a real
# Prometheus server and checked by promtool, clients that stall or send garbage not
# blocking the endpoint, and `status --watch` printing a swap and a peer loss as they happen.
# The dashboard is loaded in headless chromium: every rank shown, updating, the hung rank
# highlighted; its screenshot is written to OUTPUT_DIR.
#   status_test.sh <commhost binary> <gloo config> <shm config> [OUTPUT_DIR]
set -euo pipefail
commhost=$1
gloo=$2
shm=$3
output=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/check_lib.sh"
tmp=$(mktemp -d)
export TMPDIR="$tmp"
launcher=""
prom=""
cleanup() {
  [[ -n $prom ]] && kill "$prom" 2>/dev/null || true
  [[ -n $launcher ]] && kill -TERM "$launcher" 2>/dev/null && sleep 1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done

# start_job OUT ARGS...: `commhost run` in the background; sets $launcher, $store, $metrics.
start_job() {
  local out=$1
  shift
  "$commhost" run "$@" >"$out" 2>&1 &
  launcher=$!
  local waited=0
  until grep -q "metrics at\|store at" "$out" && grep -q "store at" "$out"; do
    sleep 0.1
    ((++waited < 300)) || { out=$(cat "$out"); fail "commhost run printed no store address"; }
  done
  sleep 0.2
  store=$(grep -oE 'store at 127\.0\.0\.1:[0-9]+' "$out" | grep -oE '127.*$')
  metrics=$(grep -oE 'metrics at http://127\.0\.0\.1:[0-9]+' "$out" | grep -oE '127.*$' || true)
  dashboard=$(grep -oE 'dashboard at http://127\.0\.0\.1:[0-9]+/' "$out" | grep -oE 'http.*$' || true)
}

stop_job() {
  kill -TERM "$launcher" 2>/dev/null || true
  wait "$launcher" 2>/dev/null || true
  launcher=""
}

# until_status WHAT ERE SECONDS: polls `commhost status` until its output matches.
until_status() {
  local t0=$SECONDS
  for ((i = 0; i < $3 * 5; ++i)); do
    run "$commhost" status --master "$store"
    if grep -qE -- "$2" <<<"$out"; then
      echo "   ($1 after $((SECONDS - t0)) s)"
      return
    fi
    sleep 0.2
  done
  fail "$1: \`commhost status\` never said /$2/ within $3 s"
}

http_get() {  # http_get URL: the body, or exit 1
  python3 - "$1" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
    sys.stdout.write(r.read().decode())
PY
}

step "status of a live 4-rank job; rank 2 hangs before allreduce seq 50 (group.timeout 120 s)"
start_job "$tmp/job.out" -n 4 -c "$gloo" --set group.timeout=120s --set supervisor.heartbeat.interval=500ms \
  --metrics 127.0.0.1:0 --dashboard 127.0.0.1:0 -- "$commhost" bench --sizes 4K --iters 100000 --inject hang:2@50
[[ -n $metrics ]] || { out=$(cat "$tmp/job.out"); fail "commhost run printed no metrics address"; }
until_status "all 4 ranks" '^  3 ' 20
expect_regex "the rank table" '^  0 +[^ ]+ +[0-9]+ +allreduce'
until_status "the hang named" '^rank 2 behind by 1 op in allreduce seq 50 for [0-9.]+ s \(ranks 0, 1 and 3 wait; it last issued allreduce seq 49\)' 30
expect_rc_nonzero "status with a rank behind (exit 3)"
[[ $rc -eq 3 ]] || fail "status exited with $rc, expected 3 (a problem named)"
pass "rank 2 named, with the op and the seq, well before group.timeout"

step "the dashboard in headless chromium: every rank, updating, rank 2 highlighted"
[[ -n $dashboard ]] || { out=$(cat "$tmp/job.out"); fail "commhost run printed no dashboard address"; }
if command -v chromium >/dev/null; then
  browse() { timeout 90 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$tmp/chromium" \
    --window-size=1280,900 --virtual-time-budget=5000 "$@" 2>"$tmp/chromium.log"; }
  out=$(browse --dump-dom "$dashboard") || { out=$(cat "$tmp/chromium.log"); fail "chromium could not load $dashboard"; }
  expect_regex "the summary, marked a problem" 'id="summary" class="problem">rank 2 behind by 1 op in allreduce seq 50'
  for r in 0 1 3; do expect_text "rank $r's row" "<tr class=\"ok\" data-rank=\"$r\">"; done
  expect_text "rank 2's row, highlighted" '<tr class="behind" data-rank="2">'
  updates=$(grep -oE 'id="updates">[0-9]+' <<<"$out" | grep -oE '[0-9]+$')
  ((updates >= 2)) || fail "the page read /dashboard.json $updates time(s); it updates once a second"
  expect_text "the chart's legend" "main allreduce gloo"
  shot=${output:-$tmp}/status_dashboard.png
  browse --screenshot="$shot" "$dashboard" || fail "chromium's screenshot"
  [[ -s $shot ]] || fail "no screenshot at $shot"
  pass "4 rank rows (rank 2 highlighted), $updates updates, the op chart; screenshot: $shot"
else
  out=$(http_get "$dashboard") || fail "GET $dashboard"
  expect_text "the page" "<title>commhost job</title>"
  pass "the page is served (skipped the browser: chromium is not installed here)"
fi

step "--json: the schema's records"
run "$commhost" status --master "$store" --json
expect_rc0 "status --json"
printf '%s' "$out" >"$tmp/status.json"
python3 - "$tmp/status.json" <<'PY' || fail "the --json records"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["version"] == 1, doc["version"]
ranks = doc["ranks"]
assert [r["rank"] for r in ranks] == [0, 1, 2, 3], [r["rank"] for r in ranks]
for r in ranks:
    for key, kind in [("host", str), ("pid", int), ("published_unix_ms", int), ("interval_ms", int),
                      ("publish_cost_us", (int, float)), ("groups", list), ("events", list), ("ops", list),
                      ("event_counts", dict), ("shadows", list), ("ops_missed", int)]:
        assert isinstance(r[key], kind), (key, r[key])
    g = r["groups"][0]
    assert g["name"] == "main" and g["world_size"] == 4 and g["backends"] == ["gloo"], g
    assert g["last_issued_seq"] == (49 if r["rank"] == 2 else 50), g
    if r["rank"] != 2:
        assert g["oldest"]["op"] == "allreduce" and g["oldest"]["seq"] == 50, g
    ops = {(o["op"], o["backend"], o["size_class"]): o for o in r["ops"]}
    assert ops[("allreduce", "gloo", "le64KiB")]["completed"] >= 40, r["ops"]
print("   4 records, version 1")
PY
pass "4 records that carry what the summary said"

step "commhost top: plain frames in a pipe, every rank, the op row, the hang as an alert"
run "$commhost" top --master "$store" -n 2 --interval 0.6
expect_rc0 "top -n 2"
[[ $(grep -c '^rank 2 behind by 1 op in allreduce seq 50' <<<"$out") -eq 2 ]] || fail "two frames, each with the summary"
for r in 0 1 3; do expect_regex "rank $r's row" "^rank $r +0 +[0-9]+ .* allreduce 50 for [0-9]+ s\$"; done
expect_regex "rank 2's row" '^rank 2 +0 +0 '
expect_regex "the op row" '^main allreduce gloo +0 '
[[ $out != *$'\033'* ]] || fail "top wrote terminal escapes into a pipe"
pass "2 frames: 4 rank rows (ranks 0, 1 and 3 alert on allreduce 50), the op row"

step "/metrics: promtool check metrics, and a real Prometheus server scrapes it"
body=$(http_get "http://$metrics/metrics") || fail "GET /metrics"
for r in 0 1 2 3; do
  grep -qE "^commhost_ops_total\{group=\"main\",rank=\"$r\",op=\"allreduce\",backend=\"gloo\",size_class=\"le64KiB\"\} [0-9]+" <<<"$body" \
    || { out=$body; fail "commhost_ops_total of rank $r"; }
  grep -qE "^commhost_store_requests_total\{rank=\"$r\",op=\"set\"\} [1-9][0-9]*" <<<"$body" \
    || { out=$body; fail "commhost_store_requests_total of rank $r"; }
done
# tools/setup installs prometheus on the Debian 12 host; the Debian 13 chroot has none.
if command -v promtool >/dev/null && command -v prometheus >/dev/null; then
promtool check metrics <<<"$body" || { out=$body; fail "promtool check metrics"; }
prom_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$tmp/prometheus.yml" <<YML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: commhost
    static_configs: [{targets: ["$metrics"]}]
YML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$tmp/prometheus.log" 2>&1 &
prom=$!
series=0
for ((i = 0; i < 60; ++i)); do
  series=$(python3 - "$prom_port" 2>/dev/null <<'PY' || echo 0
import json, sys, urllib.request, urllib.parse
q = urllib.parse.quote('commhost_group_last_issued_seq{group="main"}')
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/api/v1/query?query={q}", timeout=5) as r:
    doc = json.load(r)
print(len({s["metric"]["rank"] for s in doc["data"]["result"]}))
PY
)
  [[ $series -eq 4 ]] && break
  sleep 0.5
done
[[ $series -eq 4 ]] || { out=$(cat "$tmp/prometheus.log"); fail "Prometheus' query API returned $series ranks' series, want 4"; }
pass "promtool passes; Prometheus' query API returns the 4 ranks' series"
else
  pass "the 4 ranks' series (skipped promtool and the Prometheus server: prometheus is not installed here)"
fi

step "clients that stall or send garbage do not block the endpoint"
# One client connects and sends nothing, one sends garbage; a GET beside them is answered.
ms=$(python3 - "$metrics" <<'PY'
import socket, sys, time, urllib.request
host, port = sys.argv[1].rsplit(":", 1)
stalled = socket.create_connection((host, int(port)))
garbage = socket.create_connection((host, int(port)))
try:
    garbage.sendall(b"NOT HTTP AT ALL\r\n\r\n\x00\x01")
except OSError:
    pass  # the server may close first: that is an answer too
t0 = time.monotonic()
with urllib.request.urlopen(f"http://{sys.argv[1]}/status.json", timeout=10) as r:
    r.read()
print(int((time.monotonic() - t0) * 1000))
stalled.close()
garbage.close()
PY
) || fail "GET /status.json beside a stalled and a garbage client"
# A server that took its clients one at a time would have answered after the stalled
# one's deadline (MetricsServer::kRequestDeadline, 5 s).
((ms < 4000)) || fail "GET took $ms ms beside a stalled client: served after its deadline?"
code=$(python3 - "http://$metrics/nothing" <<'PY'
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], timeout=5)
    print(200)
except urllib.error.HTTPError as e:
    print(e.code)
PY
)
[[ $code == 404 ]] || fail "an unknown path answered $code, want 404"
pass "answered in $ms ms beside a stalled and a garbage client; an unknown path is 404"
kill "$prom" 2>/dev/null || true
prom=""
stop_job

step "--metrics refuses an address other than loopback without --metrics-insecure"
run "$commhost" run -n 1 -c "$gloo" --metrics 0.0.0.0:0 -- true
expect_rc_nonzero "--metrics 0.0.0.0:0"
expect_text "the refusal" "binds loopback unless told otherwise"
pass "refused before any rank starts"

step "with the store's token the endpoint requires it, and may then bind beyond loopback"
secret="tok-$RANDOM-s3cret"
COMMHOST_STORE_TOKEN=$secret "$commhost" run -n 2 -c "$gloo" --metrics 0.0.0.0:0 -- \
  "$commhost" train --epochs 100000 --steps-per-epoch 50 --hidden 64 >"$tmp/job_tok.out" 2>&1 &
launcher=$!
for ((i = 0; i < 300; ++i)); do grep -q "metrics at" "$tmp/job_tok.out" && break; sleep 0.1; done
port=$(grep -oE 'metrics at http://0\.0\.0\.0:[0-9]+' "$tmp/job_tok.out" | grep -oE '[0-9]+$') ||
  { out=$(cat "$tmp/job_tok.out"); fail "--metrics 0.0.0.0:0 with a store token did not serve"; }
grep -q "without authentication" "$tmp/job_tok.out" && { out=$(cat "$tmp/job_tok.out"); fail "warned of no authentication with a token"; }
codes=$(python3 - "127.0.0.1:$port" "$secret" <<'PY'
import sys, time, urllib.request, urllib.error
base, secret = sys.argv[1], sys.argv[2]
def get(path, headers=None):
    try:
        with urllib.request.urlopen(urllib.request.Request(f"http://{base}{path}", headers=headers or {}), timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
for _ in range(100):  # until the ranks have published
    code, body = get("/metrics", {"Authorization": "Bearer " + secret})
    if code == 200 and "commhost_ops_total" in body:
        break
    time.sleep(0.2)
none, none_body = get("/metrics")
wrong, _ = get("/status.json", {"Authorization": "Bearer " + secret + "x"})
query, _ = get(f"/dashboard.json?token={secret}")
page, page_body = get(f"/?token={secret}")
leaked = secret in none_body + page_body + body
print(code, none, wrong, query, page, "leaked" if leaked else "clean")
PY
)
[[ $codes == "200 401 401 200 200 clean" ]] ||
  fail "with the token / none / a wrong one / ?token= / the page: want 200 401 401 200 200 clean, got $codes"
run "$commhost" status --master "127.0.0.1:$(grep -oE 'store at 127\.0\.0\.1:[0-9]+' "$tmp/job_tok.out" | grep -oE '[0-9]+$')" \
  --token "$secret"
expect_regex "status with the token" '^2 ranks ok'
if command -v chromium >/dev/null; then  # the page passes ?token= on to its own requests
  out=$(browse --dump-dom "http://127.0.0.1:$port/?token=$secret") || fail "chromium could not load the page"
  expect_text "the token-guarded page's rows" '<tr class="ok" data-rank="1">'
  grep -qF -- "$secret" <<<"$out" && fail "the page shows the token"
fi
stop_job
grep -q -- "$secret" "$tmp/job_tok.out" && { out=$(cat "$tmp/job_tok.out"); fail "the token appears in the job's output"; }
pass "401 without the token or with a wrong one; 200 with it as a Bearer header or ?token= (the page in chromium too); never printed"

step "status --watch prints a swap and a peer loss as they happen"
cp "$shm" "$tmp/live.yaml"
start_job "$tmp/job2.out" -n 3 --watch "$tmp/live.yaml" --set supervisor.on_peer_loss=shrink \
  --set supervisor.heartbeat.interval=200ms --set supervisor.heartbeat.timeout=2s -- \
  "$commhost" train --epochs 100000 --steps-per-epoch 50 --hidden 64
until_status "3 ranks" '^3 ranks ok' 20
"$commhost" status --master "$store" --watch --interval 0.2 >"$tmp/watch.out" 2>&1 &
watcher=$!
sleep 1
sed -i 's/backend: \[shm, gloo\]/backend: gloo/' "$tmp/live.yaml"
grep -q "backend: gloo }" "$tmp/live.yaml" || fail "could not edit the routes of $tmp/live.yaml"
for ((i = 0; i < 300; ++i)); do grep -q "swap_committed" "$tmp/watch.out" && break; sleep 0.2; done
victim=""
for p in $(pgrep -P "$launcher"); do
  tr '\0' '\n' <"/proc/$p/environ" | grep -qx "RANK=2" && victim=$p
done
[[ -n $victim ]] || fail "no rank 2 among the launcher's children"
kill -9 "$victim"
for ((i = 0; i < 300; ++i)); do grep -q "peer_lost" "$tmp/watch.out" && break; sleep 0.2; done
# The summary names rank 2 once its record is older than its interval allows (silent).
for ((i = 0; i < 300; ++i)); do grep -qE '^status: .*rank 2 (silent|lost)' "$tmp/watch.out" && break; sleep 0.2; done
kill "$watcher" 2>/dev/null || true
out=$(cat "$tmp/watch.out")
expect_regex "the swap" '^[0-9:]+ rank [0-9] swap_committed: \[group main rank [0-9]\] swap from generation 0 committed generation 1'
expect_regex "the peer loss" '^[0-9:]+ rank [01] peer_lost: .*peer 2 lost'
expect_regex "the summary's change" '^status: .*rank 2 (silent|lost)'
[[ $(grep -c '^status: ' <<<"$out") -le 6 ]] || fail "--watch repeated the summary while only its seconds changed"
stop_job
pass "the swap and the peer loss, each printed as it happened"

step "an 8 B shm loop: every op counted, though the recorder holds 2048 of them"
# Rank 1 stops before allreduce seq 20001: each rank then completed seqs 1 to 20000, and
# the op statistics must say 20000 (the lanes' counts), not the few thousand records held.
start_job "$tmp/job3.out" -n 2 -c "$shm" --set group.timeout=120s --set supervisor.heartbeat.interval=200ms \
  -- "$commhost" bench --sizes 8 --iters 1000000 --inject hang:1@20001
counted=""
for ((i = 0; i < 150; ++i)); do
  run "$commhost" status --master "$store" --json
  counted=$(python3 -c '
import json, sys
doc = json.loads(sys.argv[1])
print(" ".join(str(sum(o["completed"] for o in r["ops"])) + "/" + str(r["groups"][0]["last_completed_seq"]) + "/"
               + str(r["ops_missed"]) for r in doc["ranks"]))' "$out" 2>/dev/null || true)
  [[ $counted == "20000/20000/0 20000/20000/0" ]] && break
  sleep 0.2
done
[[ $counted == "20000/20000/0 20000/20000/0" ]] ||
  fail "each rank's ops completed / last completed seq / ops missed: want 20000/20000/0 on both, got '$counted'"
stop_job
pass "20000 ops counted on each rank, none missed"

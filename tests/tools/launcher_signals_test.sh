#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `commhost run` when its process has another thread, as on every GPU host: the nccl
# plugin's probe starts the CUDA driver's threads while the launcher checks the config.
# Here a test plugin's probe does the same (tests/test_plugins/probe_thread.cc). Before the
# launcher forwarded its signals, such a thread took them: a rank's SIGCHLD was lost (the
# launcher waited forever for a rank that had exited; seen 2 runs in 5 on an H200 machine)
# and Ctrl-C killed the launcher without stopping its ranks.
#   launcher_signals_test.sh <commhost binary> <folder holding the probe_thread plugin>
set -euo pipefail
commhost=$1
plugins=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/check_lib.sh"
tmp=$(mktemp -d)
launcher=
cleanup() {
  if [[ -n "$launcher" ]]; then kill -KILL "$launcher" 2>/dev/null || true; fi
  pkill -KILL -f "sleep 37.25" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
for v in $(env | grep -oE '^(COMMHOST_|OMPI_|PMI_|SLURM_)[A-Z_]*'); do unset "$v"; done
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
# A job opens only the plugins its config names: probe_thread serves cuda here, as nccl
# does in a GPU job's config (the ranks run sleep and never build it).
cat >"$tmp/job.yaml" <<YAML
plugin_path: [ "$plugins" ]
backends: { gloo: {}, probe_thread: {} }
routes: [{ device: cpu, backend: gloo }, { device: cuda, backend: probe_thread }]
YAML

# The ranks of these jobs run `sleep 37.25` (^: not the launcher's own command line).
ranks() { pgrep -c -f "^sleep 37.25" || true; }
wait_for_two_ranks() {
  for _ in $(seq 100); do [[ $(ranks) -ge 2 ]] && break; sleep 0.1; done
  [[ $(ranks) -ge 2 ]] || fail "the two ranks did not start"
}
# no_rank_left WHAT: within 5 s no rank runs, else fail naming WHAT.
no_rank_left() {
  for _ in $(seq 50); do pgrep -f "^sleep 37.25" >/dev/null || break; sleep 0.1; done
  ! pgrep -f "^sleep 37.25" >/dev/null || fail "$1: $(pgrep -af '^sleep 37.25')"
}
# reap_launcher LOG: waits up to 20 s for the signalled launcher; sets waited (124: it did
# not end), rc (its status) and out (its log).
reap_launcher() {
  set +e
  timeout 20 tail --pid="$launcher" -f /dev/null
  waited=$?
  wait "$launcher"
  rc=$?
  set -e
  launcher=
  out=$(cat "$1")
}

step "ranks that exit at once are reaped: 10 jobs of 2 ranks, none left waiting"
for i in $(seq 10); do
  run timeout 20 "$commhost" run -n 2 -c "$tmp/job.yaml" -- sh -c 'echo rank $RANK done'
  [[ $rc -ne 124 ]] || fail "job $i: commhost run still waited 20 s after its ranks exited (a lost SIGCHLD)"
  expect_rc0 "job $i"
  expect_text "job $i, rank 1" "[1] rank 1 done"
done
pass "10 jobs ended"

step "the launcher has the probe's thread (else this test proves nothing)"
"$commhost" run -n 2 -c "$tmp/job.yaml" -- sleep 37.25 >"$tmp/int.log" 2>&1 &
launcher=$!
for _ in $(seq 100); do
  [[ $(ranks) -ge 2 ]] && grep -qx probe-thread /proc/$launcher/task/*/comm 2>/dev/null && break
  sleep 0.1
done
grep -qx probe-thread /proc/$launcher/task/*/comm || fail "no probe-thread in the launcher ($(cat /proc/$launcher/task/*/comm | tr '\n' ' '))"
[[ $(ranks) -ge 2 ]] || fail "the two ranks did not start"
pass "launcher $launcher has a probe-thread and 2 ranks"

step "Ctrl-C (SIGINT) reaches the launcher's loop: it stops the ranks and says why"
kill -INT "$launcher"
reap_launcher "$tmp/int.log"
[[ $waited -ne 124 ]] || fail "the launcher did not end within 20 s of SIGINT"
expect_text "the reason" "commhost run: stopped the job: the launcher got Interrupt"
[[ $rc -ne 0 ]] || fail "the launcher exited 0 after SIGINT"
no_rank_left "ranks still run after the launcher ended"
pass "stopped (exit $rc), no rank left"

# A closed terminal sends SIGHUP to the launcher alone (each rank has its process group).
step "SIGHUP without --watch stops the job as SIGTERM does"
"$commhost" run -n 2 -c "$tmp/job.yaml" -- sleep 37.25 >"$tmp/hup.log" 2>&1 &
launcher=$!
wait_for_two_ranks
kill -HUP "$launcher"
reap_launcher "$tmp/hup.log"
[[ $waited -ne 124 ]] || fail "the launcher did not end within 20 s of SIGHUP"
expect_text "the reason" "commhost run: stopped the job: the launcher got Hangup"
[[ $rc -eq 129 ]] || fail "the launcher exited $rc after SIGHUP, not 129"
no_rank_left "ranks still run after SIGHUP"
pass "stopped (exit $rc), no rank left"

step "under nohup (SIGHUP ignored) SIGHUP leaves the job running"
( trap '' HUP; exec "$commhost" run -n 2 -c "$tmp/job.yaml" -- sleep 37.25 ) >"$tmp/nohup.log" 2>&1 &
launcher=$!
wait_for_two_ranks
kill -HUP "$launcher"
sleep 1
kill -0 "$launcher" 2>/dev/null || fail "SIGHUP ended a launcher started with SIGHUP ignored: $(cat "$tmp/nohup.log")"
[[ $(ranks) -ge 2 ]] || fail "SIGHUP reached the ranks of a launcher started under nohup"
kill -TERM "$launcher"
wait "$launcher" 2>/dev/null || true
launcher=
no_rank_left "ranks still run after SIGTERM"
pass "the launcher and its ranks went on until SIGTERM"

# kill -USR1 <launcher> asks every rank for a flight-recorder dump, whatever the job's
# store (a torch job's is torch's, which `commhost trace dump` cannot reach).
step "SIGUSR1 to the launcher reaches every rank"
"$commhost" run -n 2 -c "$tmp/job.yaml" -- sh -c 'trap "echo got-usr1" USR1; echo ready; while :; do sleep 0.1; done' \
  >"$tmp/usr1.log" 2>&1 &
launcher=$!
for _ in $(seq 100); do [[ $(grep -c "ready" "$tmp/usr1.log" || true) -ge 2 ]] && break; sleep 0.1; done
kill -USR1 "$launcher"
for _ in $(seq 50); do [[ $(grep -c "got-usr1" "$tmp/usr1.log" || true) -ge 2 ]] && break; sleep 0.1; done
out=$(cat "$tmp/usr1.log")
expect_line "rank 0" "[0] got-usr1"
expect_line "rank 1" "[1] got-usr1"
kill -TERM "$launcher"
wait "$launcher" 2>/dev/null || true
launcher=
pass "both ranks got it; the launcher went on until SIGTERM"

step "a launcher killed with SIGKILL takes its ranks with it"
"$commhost" run -n 2 -c "$tmp/job.yaml" -- sleep 37.25 >"$tmp/kill.log" 2>&1 &
launcher=$!
wait_for_two_ranks
kill -KILL "$launcher"
wait "$launcher" 2>/dev/null || true
launcher=
no_rank_left "ranks outlived their SIGKILLed launcher"
pass "no rank left"
echo "PASS"

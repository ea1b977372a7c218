#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Elastic membership with real processes: `commhost train --check` at 4 ranks under
# `commhost run` with supervisor.on_peer_loss: shrink, ranks killed with SIGKILL at a
# random step. The survivors shrink, re-run the failed step on 3 ranks and finish with the
# parameters of one process on the global batch (--check on every rank); the loss keeps
# falling; nothing is left behind (processes, the store's port, /dev/shm segments). Also:
# rank 0 killed (the launcher serves the store), two ranks killed at once, a rank stopped
# past the heartbeat timeout and resumed ("removed from group"), min_ranks refusing, and
# scale up: a fifth process (global rank 4) joining the running 4-rank job.
#   elastic_test.sh <commhost binary> <gloo config> <shm config> [trials per backend]
set -euo pipefail
commhost=$1
gloo=$2
shm=$3
trials=${4:-2}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/check_lib.sh"
tmp=$(mktemp -d)
export TMPDIR="$tmp"  # flight-recorder dumps stay in this run's dir
trap 'rm -rf "$tmp"' EXIT
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done
elastic=(--set supervisor.on_peer_loss=shrink --set supervisor.heartbeat.interval=200ms
  --set supervisor.heartbeat.timeout=2s)
train=(train --check --epochs 6 --steps-per-epoch 50 --hidden 64)
train_extra=()  # more train options for one case
steps=300

# job CONFIG SIGNAL_PLAN EXTRA...: runs the 4-rank job in the background, applies the
# plan ("kill:R,R@ROWS", "stop:R@ROWS:SECONDS", "kill:R@ROWS+R2:SECONDS": R2 killed that
# long after R) once rank 0 has written ROWS step rows (so the moment is within training
# at any speed, sanitizer builds included), waits; $out and $rc as run() sets them.
job() {
  local config=$1 plan=$2
  shift 2
  rm -f "$tmp/steps.jsonl"
  "$commhost" run -n 4 -c "$config" "${elastic[@]}" "$@" -- "$commhost" "${train[@]}" "${train_extra[@]}" --json "$tmp/steps.jsonl" \
    >"$tmp/out" 2>&1 &
  local launcher=$! what=${plan%%:*} rest=${plan#*:}
  local ranks=${rest%%@*} at=${rest#*@} hold="" later=""
  [[ $what == stop ]] && { hold=${at#*:}; at=${at%%:*}; }
  [[ $at == *+* ]] && { later=${at#*+}; at=${at%%+*}; }
  local waited=0
  until [[ -f $tmp/steps.jsonl && $(wc -l <"$tmp/steps.jsonl") -ge $at ]]; do
    sleep 0.05
    ((++waited < 2400)) || fail "rank 0 wrote no $at step rows within 120 s"
  done
  local r p pids=()
  for r in ${ranks//,/ }; do
    p=$(rank_pid "$launcher" "$r")
    [[ -n $p ]] || fail "rank $r was not running after $at steps (the job ended early?)"
    pids+=("$p")
  done
  if [[ $what == kill ]]; then
    kill -9 "${pids[@]}"
    if [[ -n $later ]]; then  # the second victim, while the survivors shrink around the first
      p=$(rank_pid "$launcher" "${later%%:*}")
      sleep "${later#*:}"
      [[ -n $p ]] && kill -9 "$p"
    fi
  else
    kill -STOP "${pids[@]}"
    sleep "$hold"
    kill -CONT "${pids[@]}"
  fi
  set +e
  if ! timeout 240 tail --pid "$launcher" -f /dev/null; then
    kill -TERM "$launcher"
    sleep 10
    kill -KILL "$launcher" 2>/dev/null
    out=$(cat "$tmp/out")
    fail "the job did not end within 240 s of the ${what} (a hang)"
  fi
  wait "$launcher"
  rc=$?
  set -e
  out=$(cat "$tmp/out")
  ! pgrep -f "$tmp/steps.jsonl" >/dev/null || fail "processes of the job are still running"
  local port
  port=$(grep -oE '^commhost run: store at 127\.0\.0\.1:[0-9]+' <<<"$out" | grep -oE '[0-9]+$')
  ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || fail "the store still listens on port $port"
}

# The survivors' rows: the failed step re-run on 3 ranks, every step once, the loss falling.
# rows_after_shrink WORLD [swapping]: with hot swaps the generations are the swaps' too.
rows_after_shrink() {
  python3 - "$tmp/steps.jsonl" "$1" "${2:-}" <<'PY' || fail "the --json rows after the shrink"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
world_after = int(sys.argv[2])
swapping = sys.argv[3] == "swapping"
events = [r for r in rows if r.get("event") == "shrink"]
steps = [r for r in rows if "event" not in r]
assert len(events) == 1, events
e = events[0]
assert e["world_before"] == 4 and e["world"] == world_after and (swapping or e["generation"] == 1), e
# Every step once; the failed step may have no row of rank 0's when another member had
# completed it before it noticed the loss (the members then go on from the furthest).
done = e["failed_step"] if e["resume_step"] == e["failed_step"] + 1 else None
want = [s for s in range(300) if s != done]
assert [r["step"] for r in steps] in (want, list(range(300))), ([r["step"] for r in steps][:50], e)
assert all(r["world"] == 4 for r in steps if r["step"] < e["resume_step"]), e
assert all(r["world"] == world_after and (swapping or r["generation"] == 1)
           for r in steps if r["step"] >= e["resume_step"]), e
print(f"   shrink at step {e['failed_step']}: {e['shrink_ms']:.0f} ms, recovered in {e['recover_ms']:.0f} ms")
PY
}

for spec in "gloo:$gloo" "shm:$shm"; do
  IFS=: read -r name config <<<"$spec"
  for ((t = 1; t <= trials; t++)); do
    at=$((20 + RANDOM % 200))
    victim=$((1 + RANDOM % 3))
    step "$name trial $t: rank $victim killed after step $at"
    before=$(shm_segments)
    job "$config" "kill:$victim@$at"
    expect_rc0 "the job that lost rank $victim"
    expect_regex "the launcher's note" "^commhost run: rank $victim failed \(signal 9 \(Killed\)\); 3 rank\(s\) of this node go on"
    expect_regex "the recovery line" '^\[0\] step [0-9]+ failed \(.*\); shrank from 4 to 3 ranks \(removed '"$victim"'\) at generation 1'
    expect_regex "the check" '^\[0\] check: after 300 steps the largest parameter deviation .*within --tolerance'
    expect_text "the loss check" "check: the held-out loss fell"
    expect_line "the summary" "commhost run: 3 of 4 rank(s) of this node finished; lost: $victim (signal 9 (Killed))"
    rows_after_shrink 3
    [[ $(shm_segments) -le $before ]] || fail "/dev/shm has $(shm_segments) commhost segments, $before before the job"
    pass "3 survivors finished with the reference's parameters"
  done
done

# A rank killed while the job swaps backends: with a hot swap before every step (gloo to
# shm and back) the kill lands in a swap most of the time. The swap fails on the lost peer
# (PeerLost: the swap's shm build stopped by the loss used to end the survivors as a
# backend's failure to start), the survivors shrink, and the job goes on swapping at 3.
train_extra=(--swap-every 1 --configs "$gloo,$shm")
for ((t = 1; t <= trials; t++)); do
  at=$((20 + RANDOM % 200))
  victim=$((1 + RANDOM % 3))
  step "hot swaps: rank $victim killed after step $at (a swap before every step)"
  job "$gloo" "kill:$victim@$at"
  expect_rc0 "the swapping job that lost rank $victim"
  expect_regex "the recovery line" '^\[0\] step [0-9]+ failed \(.*\); shrank from 4 to 3 ranks \(removed '"$victim"'\)'
  expect_regex "the check" '^\[0\] check: after 300 steps the largest parameter deviation .*within --tolerance'
  expect_line "the summary" "commhost run: 3 of 4 rank(s) of this node finished; lost: $victim (signal 9 (Killed))"
  rows_after_shrink 3 swapping
  grep -qE '^\[0\] step [0-9]+ failed \(.*reconfigure' <<<"$out" && echo "   (the kill landed in a swap)"
  pass "3 survivors finished with the reference's parameters, swapping"
done
train_extra=()

# With --max-restarts the killed rank's new process joins at a sync point: shrink, then grow.
rows_after_regrow() {
  python3 - "$tmp/steps.jsonl" <<'PY' || fail "the --json rows after the shrink and the grow"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
events = [r for r in rows if "event" in r]
steps = [r for r in rows if "event" not in r]
assert [e["event"] for e in events] == ["shrink", "grow"], events
shrink, grow = events
assert shrink["world"] == 3 and grow["world"] == 4 and grow["generation"] == 2, events
assert grow["joined"] == shrink["removed"], events
assert steps[-1]["step"] == 299 and steps[-1]["world"] == 4, steps[-1]
print(f"   shrink at step {shrink['failed_step']} ({shrink['shrink_ms']:.0f} ms), grew back at step {grow['resume_step']}")
PY
}

for spec in "gloo:$gloo" "shm:$shm"; do
  IFS=: read -r name config <<<"$spec"
  victim=$((1 + RANDOM % 3))
  step "$name: rank $victim killed and restarted (--max-restarts 1)"
  job "$config" "kill:$victim@$((20 + RANDOM % 200))" --max-restarts 1
  expect_rc0 "the job whose rank $victim was restarted"
  expect_text "the restart" "commhost run: rank $victim failed (signal 9 (Killed)); restarting it (1 of --max-restarts 1)"
  expect_regex "the grow" "^\[0\] grew from 3 to 4 ranks \(joined $victim\) at generation 2"
  expect_regex "the check" '^\[0\] check: after 300 steps .*within --tolerance'
  [[ $(grep -c "above --tolerance" <<<"$out") -eq 0 ]] || fail "a rank's check failed"
  expect_line "the summary" "commhost run: 4 of 4 rank(s) of this node finished; restarted: $victim 1x"
  rows_after_regrow
  pass "the job ended on 4 ranks, every one with the reference's parameters"
done

step "rank 0 killed and restarted: it rejoins, reports again"
job "$gloo" "kill:0@100" --max-restarts 1
expect_rc0 "the job whose rank 0 was restarted"
expect_regex "rank 0 rejoined" '^\[0\] .*joined: 0 -> 4 ranks .* at generation 2'
expect_regex "the check" '^\[0\] check: after 300 steps .*within --tolerance'
expect_line "the summary" "commhost run: 4 of 4 rank(s) of this node finished; restarted: 0 1x"
pass "the restarted rank 0 took the state of the members and finished the check"

step "--max-restarts needs on_peer_loss shrink"
run "$commhost" run -n 2 -c "$gloo" --max-restarts 1 -- true
expect_rc_nonzero "--max-restarts without shrink"
expect_text "the refusal" "set supervisor.on_peer_loss: shrink"
pass "refused before any rank starts"

step "rank 0 killed: the launcher serves the store, ranks 1..3 finish"
job "$gloo" "kill:0@100"
expect_rc0 "the job that lost rank 0"
expect_text "the launcher serves the store" "this launcher serves the job's store"
expect_regex "the survivors shrank" '^\[1\] .*shrunk: 4 -> 3 ranks \(removed 0; this rank was 1\) at generation 1'
[[ $(grep -c "check: .*above --tolerance" <<<"$out") -eq 0 ]] || fail "a survivor's check failed"
pass "ranks 1..3 went on without the rank that used to serve the store"

step "two ranks killed at once"
job "$gloo" "kill:1,3@100"
expect_rc0 "the job that lost ranks 1 and 3"
expect_regex "the recovery line" '^\[0\] step [0-9]+ failed \(.*\); shrank from 4 to 2 ranks \(removed 1, 3\)'
expect_regex "the check" '^\[0\] check: after 300 steps .*within --tolerance'
rows_after_shrink 2
pass "2 survivors finished with the reference's parameters"

# The second kill lands at some point of the survivors' round around the first (agree,
# build or confirm: a member lost in build or confirm fails the round on every member,
# and train's recovery runs the next one); whichever, the job ends on 2 ranks.
for delay in 0.05 0.15 0.3; do
  step "rank 1 killed, rank 3 killed $delay s later (during the survivors' shrink)"
  job "$gloo" "kill:1@100+3:$delay"
  expect_rc0 "the job that lost ranks 1 and 3 one after the other"
  expect_regex "the check" '^\[0\] check: after 300 steps .*within --tolerance'
  python3 - "$tmp/steps.jsonl" <<'PY' || fail "the --json rows after the two losses"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
events = [r for r in rows if "event" in r]
assert events and all(e["event"] == "shrink" for e in events) and events[-1]["world"] == 2, events
assert sorted(g for e in events for g in e["removed"]) == [1, 3], events
print(f"   {len(events)} shrink(s); " + "; ".join(f"removed {e['removed']} at step {e['failed_step']}" for e in events) +
      (" (a round failed and ran again)" if "running the next membership round" in open(sys.argv[1].replace("steps.jsonl", "out")).read() else ""))
PY
  pass "2 survivors finished with the reference's parameters"
done

step "a rank stopped past the heartbeat timeout is removed; resumed, it is told so"
job "$gloo" "stop:2@100:5"
expect_rc0 "the job whose rank 2 was stopped"
expect_regex "the survivors shrank" '^\[0\] step [0-9]+ failed .*shrank from 4 to 3 ranks \(removed 2\)'
expect_regex "rank 2 is told" '^\[2\] .*this rank was removed from group main at generation 0: the survivors \(ranks 0, 1, 3\) decided without it'
expect_regex "the check" '^\[0\] check: after 300 steps .*within --tolerance'
pass "removed, never a silent wrong result"

step "below supervisor.min_ranks the job ends with the ranks lost named"
job "$gloo" "kill:2@100" --set supervisor.min_ranks=4
expect_rc_nonzero "the job below min_ranks"
expect_text "the refusal" "only 3 of 4 ranks are left (lost: 2), below supervisor.min_ranks 4"
pass "refused on every survivor"

step "scale up: a fifth process joins the running 4-rank job"
rm -f "$tmp/steps.jsonl"
"$commhost" run -n 4 -c "$gloo" "${elastic[@]}" --set group.sync_poll=10ms -- "$commhost" "${train[@]}" \
  --json "$tmp/steps.jsonl" >"$tmp/out" 2>&1 &
launcher=$!
waited=0
until [[ -f $tmp/steps.jsonl && $(wc -l <"$tmp/steps.jsonl") -ge 50 ]]; do
  sleep 0.05
  ((++waited < 2400)) || fail "rank 0 wrote no 50 step rows within 120 s"
done
port=$(grep -oE '^commhost run: store at 127\.0\.0\.1:[0-9]+' "$tmp/out" | grep -oE '[0-9]+$')
# Global rank 4 of a job of 5 from now on: it asks the members, who admit it at a sync point.
set +e
RANK=4 WORLD_SIZE=5 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 240 "$commhost" "${train[@]}" \
  --set group.join=true >"$tmp/joiner" 2>&1
joiner=$?
timeout 240 tail --pid "$launcher" -f /dev/null
wait "$launcher"
rc=$?
set -e
out=$(cat "$tmp/out")
[[ $joiner -eq 0 ]] || { out=$(cat "$tmp/joiner"); fail "the joining process exited $joiner"; }
expect_rc0 "the job that grew"
expect_regex "the grow" '^\[0\] grew from 4 to 5 ranks \(joined 4\) at generation 1'
expect_regex "the check" '^\[0\] check: after 300 steps .*within --tolerance'
grep -q "joined: 0 -> 5 ranks" "$tmp/joiner" || { out=$(cat "$tmp/joiner"); fail "the joiner did not say it joined"; }
python3 - "$tmp/steps.jsonl" <<'PY' || fail "the --json rows after the grow"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
(grow,) = [r for r in rows if "event" in r]
assert grow["event"] == "grow" and grow["joined"] == [4] and grow["world"] == 5, grow
steps = [r for r in rows if "event" not in r]
assert steps[-1]["step"] == 299 and steps[-1]["world"] == 5, steps[-1]
assert all(r["world"] == (5 if r["step"] >= grow["resume_step"] else 4) for r in steps), grow
PY
pass "the job went on at 5 ranks with the reference's parameters"

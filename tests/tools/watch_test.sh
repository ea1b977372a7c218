#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `commhost run -n 4 --watch FILE` on loopback, with `commhost bench` (which calls
# syncPoint() every iteration): replacing the file by rename swaps gloo -> shm on every
# rank at the same sync count; SIGHUP re-reads the file (a new epoch, a new generation);
# an invalid file is printed with its config errors and the job finishes on the config
# it had. Rank 0 sleeps 100 ms every 25 iterations (bench --inject slow) so the job
# outlives the edits; every wait is bounded. Then a job whose store never answers: the
# edit is reported unpublished within seconds, and the launcher still obeys SIGTERM.
#   watch_test.sh <commhost binary>
set -euo pipefail
commhost=$1
tmp=$(mktemp -d)
export TMPDIR="$tmp"  # flight-recorder dumps stay in this run's dir
pid=
cleanup() {
  if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
  cp "$tmp/out" /tmp/watch_last_out 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out" 2>/dev/null; exit 1; }
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done

cat >"$tmp/gloo.yaml" <<YAML
group: { name: main, timeout: 20s }
backends: { gloo: { options: { threads: 1, contexts: 2 } } }
routes: [{ device: cpu, backend: gloo }]
YAML
cat >"$tmp/shm.yaml" <<YAML
group: { name: main, timeout: 20s }
backends: { gloo: { options: { threads: 1, contexts: 2 } }, shm: {} }
routes: [{ device: cpu, backend: [shm, gloo] }]
YAML
mkdir "$tmp/conf"
job="$tmp/conf/job.yaml"
cp "$tmp/gloo.yaml" "$job"

count() { grep -cE "$1" "$tmp/out" || true; }
# Waits up to $3 s for $2 lines of the output matching the extended regex $1.
waitFor() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    [ "$(count "$1")" -ge "$2" ] && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [ "$(count "$1")" -ge "$2" ] || fail "expected $2 lines matching '$1' within $3 s"
}
# The sync counts at which the ranks applied epoch $1: one value when they agree.
switchCounts() { grep -oE "applied epoch $1 \(.*\) at sync count [0-9]+" "$tmp/out" | awk '{print $NF}' | sort -u; }

injects=()
for s in $(seq 25 25 3000); do injects+=(--inject "slow:0@$s:100"); done
"$commhost" run -n 4 --watch "$job" -- "$commhost" bench --sizes 1K --iters 3000 --warmup 0 --check \
  "${injects[@]}" >"$tmp/out" 2>&1 &
pid=$!
grep -q "watching $job" "$tmp/out" 2>/dev/null || waitFor "watching $job" 1 30
waitFor '^\[0\] # allreduce \(route: gloo\)' 1 60

# An editor's save: a new file renamed over the old one.
cp "$tmp/shm.yaml" "$tmp/conf/.job.yaml.swp"
mv "$tmp/conf/.job.yaml.swp" "$job"
waitFor 'edited\): published as epoch 1' 1 10
waitFor '\] syncPoint: applied epoch 1 .*: generation 1$' 4 30
[ "$(switchCounts 1 | wc -l)" -eq 1 ] || fail "the ranks applied epoch 1 at different sync counts: $(switchCounts 1 | tr '\n' ' ')"

kill -HUP "$pid"
waitFor 'SIGHUP\): published as epoch 2' 1 10
waitFor '\] syncPoint: applied epoch 2 .*: generation 2$' 4 30
[ "$(switchCounts 2 | wc -l)" -eq 1 ] || fail "the ranks applied epoch 2 at different sync counts"

printf 'group: { name: main }\nbackends: { gloo: { options: { threads: -3 } } }\nroutes: [{ device: cpu, backend: gloo }]\n' >"$job"
waitFor 'edited\): invalid, the job goes on with its current config' 1 10
waitFor "'backends.gloo.options.threads': '-3' is out of range" 1 5

rc=0
for ((i = 0; i < 1200; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "the job did not finish within 120 s"
wait "$pid" || rc=$?
pid=
[ "$rc" -eq 0 ] || fail "commhost run exited $rc"
row=$(grep -E '^\[0\] +1024 +256 ' "$tmp/out") || fail "no result row"
[ "$(echo "$row" | awk '{print $NF}')" = 0 ] || fail "wrong elements: $row"
[ "$(count 'applied epoch 3|syncPoint: .*(rolled back|is invalid)|\[error\]')" -eq 0 ] || fail "an epoch after the invalid file"

# An edit while the ranks start (they sleep 1 s first): every rank starts on the text the
# launcher read (no config-hash mismatch), and the edit, published before their groups
# exist, is applied at their first syncPoint() (before: skipped as "not news", silently).
cp "$tmp/gloo.yaml" "$job"
injects=()
for s in $(seq 25 25 400); do injects+=(--inject "slow:0@$s:50"); done
"$commhost" run -n 4 --watch "$job" -- sh -c 'sleep 1; exec "$0" "$@"' "$commhost" bench --sizes 1K --iters 400 \
  --warmup 0 --check "${injects[@]}" >"$tmp/out" 2>&1 &
pid=$!
waitFor "watching $job" 1 30
cp "$tmp/shm.yaml" "$job"
waitFor 'published as epoch 1' 1 15
waitFor '\] syncPoint: applied epoch 1 .*: generation 1$' 4 30
[ "$(switchCounts 1 | wc -l)" -eq 1 ] || fail "the ranks applied the early edit at different sync counts"
grep -q '^\[0\] # allreduce (route: gloo)' "$tmp/out" || fail "the ranks did not start on the config the launcher read"
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" -eq 0 ] || fail "the job with an early edit exited $rc"
echo "ok: an edit made while the ranks start is applied by every rank at one sync count"

# A store that does not answer (no rank serves one: `sleep` makes no group): publishing
# gives up after 5 s, not group.timeout (60 s), while the launcher's loop waits on it;
# it says so, and the launcher still ends the job at once on SIGTERM.
printf 'group: { name: main, timeout: 60s }\nbackends: { gloo: {} }\nroutes: [{ device: cpu, backend: gloo }]\n' >"$job"
"$commhost" run -n 1 --watch "$job" -- sleep 60 >"$tmp/out" 2>&1 &
pid=$!
waitFor "watching $job" 1 30
start=$SECONDS
printf '# edited\n' >>"$job"
waitFor 'edited\): not published \(the job goes on with its current config; save the file again or send SIGHUP' 1 20
[ $((SECONDS - start)) -le 15 ] || fail "publishing to an unreachable store took $((SECONDS - start)) s"
kill -TERM "$pid"
for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "the launcher did not end the job within 10 s of SIGTERM"
wait "$pid" || true
pid=

# SIGINT while a publication waits on that store: the launcher's loop is not inside it
# (the publisher has a thread of its own), so the job stops at once, not after the wait.
"$commhost" run -n 1 --watch "$job" -- sleep 60 >"$tmp/out" 2>&1 &
pid=$!
waitFor "watching $job" 1 30
printf '# edited again\n' >>"$job"
sleep 0.5
kill -INT "$pid"
waitFor 'stopped the job: the launcher got Interrupt' 1 2
wait "$pid" || true
pid=

echo "watch: OK (swap at sync count $(switchCounts 1), SIGHUP swap at $(switchCounts 2), unreachable store reported)"

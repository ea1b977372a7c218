#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# plugin_discovery_test.sh <path to commhost binary> <source dir> <test plugin dir>
#
# How the commhost command finds plugins and describes settings (issue 15): -c and
# COMMHOST_CONFIG for `plugins list|inspect`, plugin_path relative to the config's folder,
# the missing-folder warning and the folders a "not found" names, load failures (missing
# file, undefined C++ symbol), `config keys`, option ranges in `plugins inspect`, and
# plugin options set from COMMHOST_ variables.
set -euo pipefail

if [[ $# -ne 3 ]]; then
  echo "usage: $0 <path to commhost binary> <source dir> <test plugin dir>" >&2
  exit 2
fi
commhost=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$2" && pwd)
plugins=$(cd "$3" && pwd)
[[ -x "$commhost" ]] || { echo "FAIL: '$commhost' is not executable; build the commhost target first" >&2; exit 1; }

while read -r var; do unset "$var"; done < <(compgen -e | grep '^COMMHOST_' || true)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/commhost-discovery.XXXXXX")
export TMPDIR="$tmp"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

# A config shipped beside its plugin: plugin_path is relative to the config's folder.
mkdir -p "$tmp/job/plugins" "$tmp/elsewhere"
cp "$plugins/good/libcommhost_optioned.so" "$tmp/job/plugins/"
cat >"$tmp/job/job.yaml" <<'YAML'
plugin_path: [plugins]
backends: { o: { plugin: optioned } }
routes: [{ device: cpu, backend: o }]
YAML
cd "$tmp/elsewhere"  # neither the config's folder nor the source tree

# --- plugin_path ---------------------------------------------------------------------
step "config check ../job/job.yaml from another folder finds plugins/ beside the config"
run "$commhost" config check ../job/job.yaml
expect_rc0 "config check (relative plugin_path)"
expect_text "config check (relative plugin_path)" "plugin: optioned"
pass "exit 0"

step "plugins list -c CONFIG and COMMHOST_CONFIG search the config's plugin_path"
run "$commhost" plugins list -c ../job/job.yaml
expect_rc0 "plugins list -c"
expect_regex "plugins list -c" '^optioned +backend +[^ ]+ +ok$'
expect_text "plugins list -c" "searched: $tmp/job/plugins "
run env COMMHOST_CONFIG=../job/job.yaml "$commhost" plugins inspect optioned
expect_rc0 "COMMHOST_CONFIG=... plugins inspect optioned"
expect_line "plugins inspect optioned" "name: optioned"
expect_regex "plugins inspect optioned" '^file: [0-9]+ bytes, modified [0-9-]+ [0-9:]+ UTC, inode [0-9]+, build hash [0-9a-f]{16}$'
run "$commhost" plugins inspect optioned
expect_rc_nonzero "plugins inspect optioned without the config"
expect_text "plugins inspect optioned (no config)" "searched: "
pass "found with -c and with COMMHOST_CONFIG, not found without"

step "plugins list --plugin-path DIR (after the verb, as the README writes it, and before it)"
run "$commhost" plugins list --plugin-path "$tmp/job/plugins"
expect_rc0 "plugins list --plugin-path"
expect_regex "plugins list --plugin-path" '^optioned +backend +[^ ]+ +ok$'
run "$commhost" plugins --plugin-path "$tmp/job/plugins" list
expect_rc0 "plugins --plugin-path DIR list"
expect_regex "plugins --plugin-path DIR list" '^optioned +backend +[^ ]+ +ok$'
pass "both spellings"

step "a plugin_path folder that does not exist: a warning naming it and its place"
cat >"$tmp/job/missing.yaml" <<'YAML'
plugin_path:
  - plugins
  - nowhere
backends: { o: { plugin: optioned } }
routes: [{ device: cpu, backend: o }]
YAML
for cmd in "config check ../job/missing.yaml" "plugins list -c ../job/missing.yaml"; do
  run "$commhost" $cmd
  expect_rc0 "$cmd"
  expect_text "$cmd" "warning: ../job/missing.yaml:3:5: plugin_path folder $tmp/job/nowhere ('nowhere' relative to the config's folder) does not exist"
done
pass "warning: ../job/missing.yaml:3:5: plugin_path folder .../nowhere ... does not exist"

step "plugin not found lists every folder searched"
cat >"$tmp/job/notfound.yaml" <<'YAML'
plugin_path: [plugins]
backends: { x: { plugin: nosuch } }
routes: [{ device: cpu, backend: x }]
YAML
run "$commhost" config check ../job/notfound.yaml
expect_rc_nonzero "config check (plugin not found)"
expect_text "config check (plugin not found)" "backend plugin 'nosuch' not found"
expect_regex "config check (plugin not found)" "searched: $tmp/job/plugins, .*/commhost/plugins"
run "$commhost" plugins inspect nosuch --plugin-path "$tmp/job/plugins" --plugin-path "$tmp/job/gone"
expect_rc_nonzero "plugins inspect nosuch"
expect_regex "plugins inspect nosuch" "searched: $tmp/job/plugins, $tmp/job/gone \\(missing\\), "
pass "the folders, a missing one marked"

# --- load failures -------------------------------------------------------------------
step "plugins inspect of a file that does not exist says no such file"
run "$commhost" plugins inspect "$tmp/libcommhost_absent.so"
expect_rc_nonzero "plugins inspect (missing file)"
expect_text "plugins inspect (missing file)" "$tmp/libcommhost_absent.so does not exist (no such file)"
grep -qF "Bad file descriptor" <<<"$out" && fail "the missing file was reported as a bad file descriptor"
pass "no such file"

step "a plugin with an undefined C++ symbol: the symbol demangled"
run "$commhost" plugins inspect "$plugins/undefined/libcommhost_undefsym.so"
expect_rc_nonzero "plugins inspect undefsym"
expect_regex "plugins inspect undefsym" 'undefined symbol: commhost_test::forgottenHelper\(std::.*string.* const&, int\) \(_ZN13commhost_test'
pass "$(grep -oE 'undefined symbol: [^(]+' <<<"$out" | head -n 1)"

# --- self-describing settings --------------------------------------------------------
step "config keys lists every host key with type, default, range and variable"
run "$commhost" config keys
expect_rc0 "config keys"
expect_line "config keys" "  group.timeout (duration, default: 30s, range: 1ms to 168h)"
expect_line "config keys" "      env: COMMHOST_GROUP_TIMEOUT"
expect_line "config keys" "  logging.level (enum: trace debug info warn error off, default: info)"
expect_line "config keys" "  plugin_path (list of strings, default: [])"
pass "group.timeout, logging.level, plugin_path"

step "plugins inspect gloo shows each option's range and default"
run "$commhost" plugins inspect gloo
expect_rc0 "plugins inspect gloo"
expect_line "plugins inspect gloo" "  threads (int, default: 1, range: 0 to 64)"
expect_line "plugins inspect gloo" "      env: COMMHOST_BACKENDS_GLOO_OPTIONS_THREADS"
expect_line "plugins inspect gloo" "  timeout (duration, default: 0s, range: 0s to 168h)"
pass "threads: 0 to 64"

# --- plugin options from the environment ---------------------------------------------
gloo=$src/configs/gloo.yaml
step "COMMHOST_BACKENDS_GLOO_OPTIONS_THREADS=2 sets backends.gloo.options.threads"
run env COMMHOST_BACKENDS_GLOO_OPTIONS_THREADS=2 COMMHOST_STORE_OPTIONS_LINGER=3s "$commhost" config check "$gloo"
expect_rc0 "config check (plugin option from the environment)"
expect_line "config check (env)" "      threads: 2"
expect_line "config check (env)" "    linger: 3s"
run env COMMHOST_BACKENDS_GLOO_OPTIONS_THREADS=2 "$commhost" config check "$gloo" --set backends.gloo.options.threads=3
expect_line "config check (env and --set)" "      threads: 3"
pass "threads: 2 from the environment, 3 when --set gives it too"

step "a bad plugin option in the environment names the variable, as --set names itself"
run env COMMHOST_BACKENDS_GLOO_OPTIONS_THREADS=abc "$commhost" config check "$gloo"
expect_rc_nonzero "config check (bad variable)"
expect_text "config check (bad variable)" "COMMHOST_BACKENDS_GLOO_OPTIONS_THREADS=abc: 'backends.gloo.options.threads': 'abc' is not an integer"
run "$commhost" config check "$gloo" --set backends.gloo.options.threads=abc
expect_text "config check (bad --set)" "--set backends.gloo.options.threads=abc: 'backends.gloo.options.threads': 'abc' is not an integer"
pass "COMMHOST_BACKENDS_GLOO_OPTIONS_THREADS=abc: 'backends.gloo.options.threads': ..."

step "an unknown COMMHOST_ variable still warns"
run env COMMHOST_BACKENDS_GLOO_OPTIONS_THREAD=2 "$commhost" config check "$gloo"
expect_rc0 "config check (unknown variable)"
expect_text "config check (unknown variable)" "warning: environment variable COMMHOST_BACKENDS_GLOO_OPTIONS_THREAD names no option of a loaded plugin and is ignored (did you mean COMMHOST_BACKENDS_GLOO_OPTIONS_THREADS?)"
pass "warned, with the nearest variable"

step "plugins list loads each file in a child first: one that aborts or hangs while loading is reported, not fatal"
start=$SECONDS
run "$commhost" plugins list --plugin-path "$plugins/crashing" --probe-timeout 1
expect_rc0 "plugins list (crashing/)"
expect_regex "plugins list (crashing/)" "initabort +\? +\? +unavailable: crashed the process loading it \(signal 6, Aborted"
expect_regex "plugins list (crashing/)" "inithang +\? +\? +unavailable: hung while loading \(.* after 1s"
expect_regex "plugins list (crashing/)" "^gloo +backend +.* ok"
[[ $((SECONDS - start)) -le 10 ]] || fail "plugins list took $((SECONDS - start)) s with a 1 s probe limit"
run "$commhost" plugins inspect initabort --plugin-path "$plugins/crashing" --probe-timeout 1
expect_rc_nonzero "plugins inspect initabort"
expect_text "plugins inspect initabort" "status: unavailable: crashed the process loading it"
pass "initabort: signal 6; inithang: hung after 1 s; the other plugins listed"

step "a job opens only the plugins its config names: files on its path that abort or hang while loading are never opened"
cat >"$tmp/crashing.yaml" <<YAML
plugin_path: ["$plugins/crashing"]
backends: { gloo: {} }
routes: [{ device: cpu, backend: gloo }]
YAML
run timeout 60 "$commhost" config check "$tmp/crashing.yaml"
expect_rc0 "config check (crashing/ on the path)"
expect_text "config check (crashing/ on the path)" "cpu allreduce"
run timeout 120 "$commhost" run -n 2 -c "$tmp/crashing.yaml" -- "$commhost" bench --op allreduce --sizes 8 -n 2 -w 1 --check
expect_rc0 "run + bench (crashing/ on the path)"
pass "config check and a 2-rank job pass beside initabort and inithang"

echo "PASS: plugin discovery and self-describing configuration"

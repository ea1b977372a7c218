#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# sdk_template_test.sh <source dir> <build dir>
#
# The plugin SDK as a third party sees it: installs the already-built commhost from
# <build dir> into a temporary prefix, builds tools/plugin-template out of tree against
# that prefix with find_package(commhost CONFIG), and checks with the INSTALLED commhost
# that the plugin loads, is found on the search path, that its options are validated,
# and that it serves real collectives (checked element by element) in a 2-process
# `commhost run` job, refusing ranks that pass different sizes, while the ops, dtypes
# and reduce ops it does not implement flow to gloo through the route's backend list.
# The template tuner, built the same way, moves the calls of a route listing gloo first
# onto the template backend from 1 KiB on.
#
# Set COMMHOST_TEST_KEEP_TMP=1 to keep the temporary directory for a look afterwards.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <source dir> <build dir>" >&2
  exit 2
fi
src=$(cd "$1" 2>/dev/null && pwd) || { echo "FAIL: source dir '$1' does not exist" >&2; exit 1; }
build=$(cd "$2" 2>/dev/null && pwd) || { echo "FAIL: build dir '$2' does not exist" >&2; exit 1; }
cmake_bin=${CMAKE:-cmake}

# The host reads COMMHOST_* variables (plugin path, config overrides); start clean.
while read -r var; do unset "$var"; done < <(compgen -e | grep '^COMMHOST_' || true)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/commhost-sdk.XXXXXX")
export TMPDIR="$tmp"  # flight-recorder dumps (default dump_dir: $TMPDIR/commhost-traces-UID) stay in this run's dir
tmp=$(cd "$tmp" && pwd -P)  # the host prints canonical paths; compare like with like
cleanup() {
  if [[ "${COMMHOST_TEST_KEEP_TMP:-0}" == 1 ]]; then
    echo "kept $tmp"
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT

source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

# --- install -----------------------------------------------------------------------
step "install commhost from $build into a temporary prefix"
[[ -f "$build/CMakeCache.txt" ]] || fail "$build is not a CMake build directory (no CMakeCache.txt); configure and build commhost first"
[[ -d "$src/tools/plugin-template" ]] || fail "$src/tools/plugin-template does not exist; is '$src' the commhost source dir?"
prefix=$tmp/prefix
run "$cmake_bin" --install "$build" --prefix "$prefix"
expect_rc0 "cmake --install $build"
commhost=$prefix/bin/commhost
[[ -x "$commhost" ]] || fail "the install has no $commhost; is commhost built in $build?"
pass "installed to $prefix"
if command -v ldd >/dev/null; then
  run ldd "$commhost"
  lib=$(awk '/libcommhost\.so/ { print $3; exit }' <<<"$out")
  [[ -n "$lib" && "$lib" != "not" ]] || fail "installed commhost does not find libcommhost (check its INSTALL_RPATH)"
  [[ "$(cd "$(dirname "$lib")" && pwd -P)" == "$(cd "$prefix" && pwd -P)"/* ]] ||
    fail "installed commhost loads $lib, not the libcommhost under $prefix (check its INSTALL_RPATH, and LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})"
  pass "installed commhost loads $lib"
fi

# --- headers: the SDK under commhost/sdk/ (ABI 3.0 dropped the old top-level paths) ---
step "the installed SDK headers, at commhost/sdk/ and nowhere else"
for h in plugin abi backend backend_sdk work_queue typed_options option_schema capabilities hook_sdk \
         launch_report comm_hook interface_hashes tuner measured_table; do
  [[ -f "$prefix/include/commhost/sdk/$h.h" ]] || fail "the install lacks commhost/sdk/$h.h"
  [[ ! -e "$prefix/include/commhost/$h.h" ]] || fail "the install still has the pre-3.0 path commhost/$h.h"
done
pass "commhost/sdk/ installed, with the interface hashes; no pre-3.0 top-level SDK path"

# --- build the template out of tree ------------------------------------------------
step "configure and build tools/plugin-template against the installed package"
tb=$tmp/tb
gen=()
if command -v ninja >/dev/null; then gen=(-G Ninja); fi
# Use the compiler commhost was built with, so the plugin's C++ ABI matches the host's.
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
cxx_arg=()
if [[ -n "$cxx" ]]; then cxx_arg=(-DCMAKE_CXX_COMPILER="$cxx"); fi
run "$cmake_bin" -S "$src/tools/plugin-template" -B "$tb" ${gen[@]+"${gen[@]}"} ${cxx_arg[@]+"${cxx_arg[@]}"} \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON
expect_rc0 "configuring the template against $prefix"
found=$(sed -n 's/^commhost_DIR:[A-Z]*=//p' "$tb/CMakeCache.txt")
[[ "$found" == "$prefix"/* ]] || fail "find_package(commhost) used '$found', not the package under $prefix"
pass "find_package(commhost) found $found"
run "$cmake_bin" --build "$tb" -j 2
expect_rc0 "building the template"
# An author's first build of the template is clean (GCC 12 warned -Wstringop-overread).
! grep -q "warning:" <<<"$out" || fail "the template build warns: $(grep -m3 'warning:' <<<"$out")"
plugin=$tb/libcommhost_template.so
[[ -f "$plugin" ]] || fail "the template build did not produce $plugin"
pass "built $plugin"

# --- (a) inspect the built file ----------------------------------------------------
step "(a) commhost plugins inspect $plugin"
run "$commhost" plugins inspect "$plugin"
expect_rc0 "plugins inspect $plugin"
expect_line "plugins inspect" "kind: backend"
expect_line "plugins inspect" "name: template"
expect_line "plugins inspect" "ops: allreduce, broadcast"
expect_line "plugins inspect" "  threads (int, default: 1, range: 1 to 64)"
pass "kind backend, name template, its ops and options"

# --- (a') the template's comm hook: a plugin of its own, used from hooks: ------------
hook=$tb/libcommhost_template_sign.so
[[ -f "$hook" ]] || fail "the template build did not produce $hook"
step "(a') commhost plugins inspect $hook"
run "$commhost" plugins inspect "$hook"
expect_rc0 "plugins inspect $hook"
expect_line "plugins inspect" "kind: comm_hook"
expect_line "plugins inspect" "name: template_sign"
expect_line "plugins inspect" "  scaled (bool, default: true)"
hooks_cfg=$tmp/hooks.yaml
cat >"$hooks_cfg" <<EOF
plugin_path: [ $tb ]
store: { plugin: hash }
backends: { gloo: {} }
routes: [ { device: cpu, backend: gloo } ]
hooks:
  gradient: { plugin: template_sign, wrap: fp16, options: { scaled: false } }
  plain: { plugin: template_sign }
EOF
step "(a') config check: hooks.gradient is template_sign wrapped in fp16"
run "$commhost" config check "$hooks_cfg"
expect_rc0 "config check $hooks_cfg"
expect_text "config check (hooks)" "plugin: template_sign"
expect_text "config check (hooks)" "wrap: fp16_compress"
expect_text "config check (hooks)" "scaled: false"
sed -i 's/scaled: false/scaled: maybe/' "$hooks_cfg"
run "$commhost" config check "$hooks_cfg"
expect_rc_nonzero "config check $hooks_cfg (scaled: maybe)"
expect_text "config check (bad hook option)" "hooks.gradient.options.scaled"
pass "the hook loads, composes with wrap: fp16 and has its option checked"

# --- (b) the built-in self plugin is found in the install tree ---------------------
step "(b) commhost plugins list finds self under $prefix"
run "$commhost" plugins list
expect_rc0 "plugins list"
# Each entry is two lines: "NAME KIND VERSION STATUS", then the path, indented.
self_status=$(awk '$1 == "self" { $1 = $2 = $3 = ""; sub(/^ +/, ""); print; exit }' <<<"$out")
self_path=$(awk 'found { print $1; exit } $1 == "self" { found = 1 }' <<<"$out")
[[ "$self_status" == ok ]] || fail "plugins list: self has status '$self_status', expected ok"
[[ "$self_path" == "$prefix"/* ]] ||
  fail "plugins list: self was loaded from '$self_path', expected a file under $prefix"
pass "self ok at $self_path"

# --- (c) COMMHOST_PLUGIN_PATH ------------------------------------------------------
step "(c) COMMHOST_PLUGIN_PATH=$tb commhost plugins list"
run env COMMHOST_PLUGIN_PATH="$tb" "$commhost" plugins list
expect_rc0 "plugins list with COMMHOST_PLUGIN_PATH"
t_status=$(awk '$1 == "template" { $1 = $2 = $3 = ""; sub(/^ +/, ""); print; exit }' <<<"$out")
t_path=$(awk 'found { print $1; exit } $1 == "template" { found = 1 }' <<<"$out")
[[ "$t_status" == ok ]] || fail "plugins list: template has status '${t_status:-<not listed>}', expected ok"
[[ "$t_path" == "$plugin" ]] || fail "plugins list: template was loaded from '$t_path', expected $plugin"
pass "template ok at $t_path"

# --- (d) a config routing to the template ------------------------------------------
# One route lists the template first and self after it: each (op, dtype, reduce op) goes
# to the first of them whose manifest has it.
write_config() {  # write_config FILE OPTION_LINE
  cat >"$1" <<EOF
plugin_path: ["$tb"]
backends:
  self: { plugin: self }
  t:
    plugin: template
    options:
      $2
routes:
  - { device: cpu, backend: [t, self] }
EOF
}
good=$tmp/good.yaml
write_config "$good" "threads: 2"
step "(d) commhost config check $good (plugin_path, options {threads: 2})"
run "$commhost" config check "$good"
expect_rc0 "config check $good"
# The route table follows "# route table:", one "#   DEVICE OP [DTYPES] [REDUCE OPS] RANGE
# -> BACKEND" per line, then the cells that fell back past t and why.
routes=$(awk 'table { sub(/^#[ \t]*/, ""); print } /^# route table:/ { table = 1 }' <<<"$out")
for route in "cpu allreduce f32,f64 sum,max 0+ bytes -> t" "cpu broadcast f32,f64 0+ bytes -> t" \
             "cpu barrier 0+ bytes -> self" "cpu reduce 0+ bytes -> self" \
             "cpu allreduce bool,i8,u8,i32,i64,f16,bf16 0+ bytes -> self: 't' lacks the dtype" \
             "cpu allreduce f32,f64 avg,product,min,band,bor,bxor,premul_sum 0+ bytes -> self: 't' lacks the reduce op" \
             "cpu barrier 0+ bytes -> self: 't' lacks the op"; do
  grep -qxF -- "$route" <<<"$routes" || fail "config check: the route table has no line \"$route\""
done
expect_text "config check" "threads: 2"
pass "exit 0; allreduce and broadcast on f32/f64 route to t, the rest to self, each fallback with its reason"

# --- (e) option errors point at the file -------------------------------------------
bad=$tmp/bad_value.yaml
write_config "$bad" 'threads: "x"'
line=$(grep -n 'threads: "x"' "$bad" | cut -d: -f1)
col=$(awk -v n="$line" 'NR == n { print index($0, "\"x\""); exit }' "$bad")
step "(e) config check with threads: \"x\" reports $bad:$line:$col"
run "$commhost" config check "$bad"
expect_rc_nonzero "config check $bad"
expect_text "config check (bad value)" "$bad:$line:$col"
expect_text "config check (bad value)" "not an integer"
pass "exit $rc, \"$bad:$line:$col ... not an integer\""

typo=$tmp/bad_key.yaml
write_config "$typo" "thread: 2"
step "(e) config check with the unknown option key 'thread'"
run "$commhost" config check "$typo"
expect_rc_nonzero "config check $typo"
expect_text "config check (unknown key)" "$typo:$line:"
expect_text "config check (unknown key)" "did you mean 'threads'"
pass "exit $rc, \"did you mean 'threads'\""

# --- (f) a real 2-rank job through the template ------------------------------------
# Two processes under `commhost run`: the template serves what it implements, gloo (next
# in the route's list) everything else, and bench checks every element of every result.
job=$tmp/job.yaml
cat >"$job" <<EOF
plugin_path: ["$tb"]
group: { timeout: 20s }
store: { plugin: tcp }
backends:
  gloo: { plugin: gloo }
  t: { plugin: template }
routes:
  - { device: cpu, backend: [t, gloo] }
EOF
run "$commhost" config check "$job"
expect_rc0 "config check $job"
routes=$(awk 'table { sub(/^#[ \t]*/, ""); print } /^# route table:/ { table = 1 }' <<<"$out")
for route in "cpu allreduce f32,f64 sum,max 0+ bytes -> t" "cpu allgather 0+ bytes -> gloo: 't' lacks the op"; do
  grep -qxF -- "$route" <<<"$routes" || fail "config check $job: the route table has no line \"$route\""
done
for op in allreduce broadcast; do
  step "(f) commhost run -n 2 -- commhost bench --op $op --check through the template"
  run timeout 120 "$commhost" run -n 2 -c "$job" -- "$commhost" bench --op "$op" --sizes 4,4K,1M --iters 3 --warmup 1 --check
  expect_rc0 "bench --op $op through the template"
  expect_regex "bench --op $op" "^\[0\] +1048576 .* 0$"  # the 1 MiB row, #wrong 0
  pass "2 ranks, $op through the template, every element right"
done
# What the template does not implement (an op, a dtype, a reduce op) flows to gloo.
for args in "--op allgather" "--op barrier" "--op allreduce --dtype i32" "--op allreduce --redop min"; do
  step "(f) commhost run -n 2 -- commhost bench $args --check: outside the template's manifest, so gloo"
  # shellcheck disable=SC2086  # $args is several words on purpose
  run timeout 120 "$commhost" run -n 2 -c "$job" -- "$commhost" bench $args --sizes 4,4K,1M --iters 3 --warmup 1 --check
  expect_rc0 "bench $args through gloo"
  [[ $args == "--op barrier" ]] || expect_regex "bench $args" "^\[0\] +1048576 .* 0$"  # #wrong 0
  pass "2 ranks, $args through gloo, every element right"
done

step "(f) ranks passing different sizes to the template get an error naming both, never a wrong sum"
run timeout 120 "$commhost" run -n 2 -c "$job" -- "$commhost" bench --op allreduce --sizes 1K --iters 5 --check \
  --inject mismatch:1@3
expect_rc_nonzero "bench with mismatched sizes through the template"
expect_regex "mismatched sizes" "rank [01] passed [0-9]+ bytes but rank [01] passed [0-9]+"
pass "exit $rc, the ranks and both sizes named"

# --- (g) the template tuner, out of tree: it moves calls to the backend it prefers --------
tuned=$tmp/tuned.yaml
sed -e 's/backend: \[t, gloo\]/backend: [gloo, t]/' "$job" >"$tuned"
# From 8 B: the injected mismatch below makes one rank pass 12 B, which must go to t too.
echo "tuner: { plugin: template_tuner, options: { prefer: t, from_bytes: 8 } }" >>"$tuned"
step "(g) config check --world 2: the template tuner puts t first from 8 B"
run "$commhost" plugins inspect "$tb/libcommhost_template_tuner.so"
expect_rc0 "plugins inspect template_tuner"
expect_text "its kind" "kind: tuner"
run "$commhost" config check "$tuned" --world 2
expect_rc0 "config check $tuned --world 2"
expect_text "the tuned row" "cpu allreduce f32,f64 sum,max 8+ bytes -> t: tuner 'template_tuner' put t first of [gloo, t]"
expect_text "below 8 B, the config's order" "cpu allreduce f32,f64 sum,max 0..7 bytes -> gloo"
pass "the tuned table names the tuner"
step "(g) a 2-rank job under the template tuner: allreduces of 8 B and more run on t (its size check answers)"
run timeout 120 "$commhost" run -n 2 -c "$tuned" -- "$commhost" bench --op allreduce --sizes 4,4K,1M --iters 3 --warmup 1 \
  --check
expect_rc0 "bench --check under the template tuner"
run timeout 120 "$commhost" run -n 2 -c "$tuned" -- "$commhost" bench --op allreduce --sizes 1K --iters 5 --check \
  --inject mismatch:1@3
expect_rc_nonzero "bench with mismatched sizes under the template tuner"
expect_regex "the template's own check, so t served it" "rank [01] passed [0-9]+ bytes but rank [01] passed [0-9]+"
pass "the tuner moved the calls the config listed gloo first for onto t"

echo "PASS: the plugin template builds against the installed commhost, loads and serves a 2-rank job"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# cli_test.sh <path to commhost binary> <source dir>
#
# The `commhost` command as a user meets it: --version and --help, `plugins list` and
# `plugins inspect`, and `config check` on a good config and on each kind of bad input
# (unknown key, bad --set value, malformed YAML), whose errors must point at the source;
# the conventions: unknown commands named with the nearest, `help`, per-command
# examples, `config check -` and `--default`, reduce-op spellings, and the store
# address `run` prints, used by `trace dump --master` on a live job.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <path to commhost binary> <source dir>" >&2
  exit 2
fi
commhost=$1
src=$(cd "$2" 2>/dev/null && pwd) || { echo "FAIL: source dir '$2' does not exist" >&2; exit 1; }
[[ -x "$commhost" && -f "$commhost" ]] || { echo "FAIL: '$commhost' is not an executable file; build the commhost target first" >&2; exit 1; }

# The host reads COMMHOST_* variables (plugin path, config overrides); start clean.
while read -r var; do unset "$var"; done < <(compgen -e | grep '^COMMHOST_' || true)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/commhost-cli.XXXXXX")
export TMPDIR="$tmp"  # flight-recorder dumps (default dump_dir: $TMPDIR/commhost-traces-UID) stay in this run's dir
trap 'rm -rf "$tmp"' EXIT

source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

# --- version and help --------------------------------------------------------------
version=$(sed -n 's/^project(commhost VERSION \([0-9][0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[[ -n "$version" ]] || fail "cannot read the version from project(commhost VERSION ...) in $src/CMakeLists.txt"
step "commhost --version prints $version"
run "$commhost" --version
expect_rc0 "commhost --version"
expect_text "commhost --version" "commhost $version"
pass "$out"

step "commhost --help mentions the plugins and config commands"
run "$commhost" --help
expect_rc0 "commhost --help"
expect_regex "commhost --help" '^ +plugins '
expect_regex "commhost --help" '^ +config '
pass "lists plugins and config"

# --- plugins -----------------------------------------------------------------------
step "commhost plugins list shows self ok"
run "$commhost" plugins list
expect_rc0 "commhost plugins list"
# Each entry is two lines: "NAME KIND VERSION STATUS", then the path, indented.
self_status=$(awk '$1 == "self" { $1 = $2 = $3 = ""; sub(/^ +/, ""); print; exit }' <<<"$out")
[[ "$self_status" == ok ]] || fail "plugins list: self has status '${self_status:-<not listed>}', expected ok"
pass "self ok"

step "commhost plugins inspect self shows its capabilities"
run "$commhost" plugins inspect self
expect_rc0 "commhost plugins inspect self"
expect_regex "plugins inspect self" '^name: self$'
expect_regex "plugins inspect self" '^kind: backend$'
expect_regex "plugins inspect self" '^ops: .*allreduce'
pass "$(grep -E '^ops:' <<<"$out" | cut -c1-60)..."

step "commhost plugins inspect nosuch fails with \"not found\""
run "$commhost" plugins inspect nosuch
expect_rc_nonzero "commhost plugins inspect nosuch"
expect_text "plugins inspect nosuch" "not found"
pass "exit $rc"

# --- config check ------------------------------------------------------------------
default=$src/configs/default.yaml
step "commhost config check $default"
run "$commhost" config check "$default"
expect_rc0 "commhost config check $default"
expect_text "config check (default)" "config hash"
expect_regex "config check (default)" '^# +cpu allreduce .* -> gloo$'
pass "exit 0, prints the config hash and route table"

# Issue 42.1: a gloo device that is neither an interface nor an address of this host is
# refused by the plugin's own option check where the config is loaded, before any rank
# (or a hot swap) hands it to Gloo.
baddevice=$tmp/baddevice.yaml
printf 'backends: { gloo: { options: { device: chadv_nodev0 } } }\nroutes: [{ device: cpu, backend: gloo }]\n' >"$baddevice"
step "config check and run refuse a gloo device this host does not have"
run "$commhost" config check "$baddevice"
expect_rc_nonzero "config check $baddevice"
expect_text "config check (bad device)" "baddevice.yaml:1:30: 'backends.gloo.options': device 'chadv_nodev0' is neither a network interface of this host"
run "$commhost" run -n 2 -c "$baddevice" -- sh -c 'echo started'
expect_rc_nonzero "run -c $baddevice"
grep -q "started" <<<"$out" && fail "a rank started with the bad device"
expect_text "run (bad device)" "device 'chadv_nodev0' is neither a network interface"
pass "refused with file:line:col, before any rank starts"

# A fallback list exists for backends that cannot run everywhere (tests/test_plugins:
# probedcpu's probe always says no).
good=$(cd "$(dirname "$commhost")/.." && pwd)/tests/test_plugins/good
fallback=$tmp/fallback.yaml
cat >"$fallback" <<EOF
plugin_path: [ "$good" ]
backends: { mine: { plugin: probedcpu }, gloo: {} }
routes: [{ device: cpu, backend: [mine, gloo] }]
EOF
step "config check: a route list passes over an unavailable backend, saying why"
run "$commhost" config check "$fallback"
expect_rc0 "config check $fallback"
expect_regex "the route table" '^# +cpu broadcast 0\+ bytes -> gloo$'
expect_text "the fallback section" "cpu broadcast 0+ bytes -> gloo: 'mine' is unavailable here (no CUDA device visible (test plugin))"
expect_text "the warning" "plugin 'probedcpu' is unavailable here"
pass "broadcast -> gloo, with the reason"
step "config check --strict fails on that warning"
run "$commhost" config check --strict "$fallback"
[[ $rc -eq 1 ]] || fail "config check --strict exited $rc with a warning, not 1"
expect_text "config check --strict" "--strict and 1 warning(s) above"
run "$commhost" config check --strict "$default"
expect_rc0 "config check --strict $default (no warnings)"
pass "exit 1 with a warning, 0 without"

step "config check and run take an installed config by name"
run bash -c "cd '$tmp' && '$commhost' config check shm"
expect_rc0 "config check shm"
expect_regex "the source" '^# effective config of /.*/configs/shm\.yaml$'
run bash -c "cd '$tmp' && '$commhost' run -n 2 -c gloo.yaml -- sh -c 'echo \$COMMHOST_CONFIG'"
expect_rc0 "run -c gloo.yaml"
expect_regex "the ranks' COMMHOST_CONFIG" '^\[1\] /.*/configs/gloo\.yaml$'
run bash -c "cd '$tmp' && '$commhost' config check nosuch"
expect_rc_nonzero "config check nosuch"
expect_text "the installed configs named" "or name an installed config: "
pass "shm and gloo.yaml found among the installed configs; an unknown name lists them"

typo=$tmp/unknown_key.yaml
cat >"$typo" <<'EOF'
backends: { self: { plugin: self } }
group: { timout: 1s }
routes: [{ device: cpu, backend: self }]
EOF
step "config check with the unknown key group.timout (line 2)"
run "$commhost" config check "$typo"
expect_rc_nonzero "config check $typo"
expect_text "config check (unknown key)" "$typo:2:"
expect_text "config check (unknown key)" "did you mean 'group.timeout'"
pass "exit $rc, \"$typo:2:... did you mean 'group.timeout'\""

step "config check --set group.timeout=abc"
run "$commhost" config check "$default" --set group.timeout=abc
expect_rc_nonzero "config check --set group.timeout=abc"
expect_text "config check --set" "--set group.timeout=abc"
pass "exit $rc, the error names --set group.timeout=abc"

broken=$tmp/malformed.yaml
cat >"$broken" <<'EOF'
group:
  name: [unclosed
backends: { self: { plugin: self } }
EOF
step "config check on malformed YAML"
run "$commhost" config check "$broken"
expect_rc_nonzero "config check $broken"
expect_text "config check (malformed)" "malformed YAML"
where=$(grep -F "$broken:" <<<"$out" | grep -oE '\.yaml:[0-9]+:[0-9]+: malformed YAML' | head -n 1 || true)
[[ -n "$where" ]] || fail "config check (malformed): no \"$broken:LINE:COL: malformed YAML\" in the output"
pass "exit $rc, \"...malformed$where\""

# Secrets never reach config check's output: not the effective config, not an error
# quoting the --set that put them there.
secret=s3cret-4d1f
step "config check --set store.options.auth_token=... never prints the token"
run "$commhost" config check "$default" --set store.options.auth_token=$secret
expect_rc0 "config check --set auth_token"
expect_text "config check (token)" "auth_token: <redacted>"
grep -qF "$secret" <<<"$out" && fail "config check printed the token: $out"
run "$commhost" config check "$default" --set store.plugin=hash --set store.options.auth_token=$secret
expect_rc_nonzero "config check --set auth_token on a store without one"
expect_text "config check (token, error)" "--set store.options.auth_token=<redacted>"
grep -qF "$secret" <<<"$out" && fail "a config error printed the token: $out"
pass "the token appears nowhere; errors cite the --set with <redacted>"

# A generated config of many unknown keys: a short report ending in "... and N more",
# from `config check` and from `run -c` (which checks the config once before starting ranks).
big=$tmp/big.yaml
python3 -c "
import sys
with open(sys.argv[1], 'w') as f:
    f.write('backends: { self: {} }\nroutes: [{ device: cpu, backend: self }]\n')
    for i in range(60000): f.write('k%06d: 1\n' % i)
" "$big"
for cmd in "config check $big" "run -n 2 -c $big -- /bin/true"; do
  step "commhost $cmd (60,000 unknown keys)"
  run timeout 60 "$commhost" $cmd
  expect_rc_nonzero "commhost $cmd"
  expect_text "$cmd" "has 60,000 errors"
  expect_text "$cmd" "... and 59,950 more"
  (( ${#out} < 20000 )) || fail "commhost $cmd printed ${#out} bytes"
  pass "exit $rc, ${#out} bytes of output"
done
head -c 2000000 /dev/zero | tr '\0' '#' >"$big"
step "config check on a 2 MB file"
run "$commhost" config check "$big"
expect_rc_nonzero "config check (2 MB)"
expect_text "config check (2 MB)" "is 2,000,000 bytes; a config may be at most 1,048,576 bytes"
pass "exit $rc, refused before parsing"

step "config check on a directory"
run "$commhost" config check "$src/configs"
expect_rc_nonzero "config check (directory)"
expect_text "config check (directory)" "is a directory; give a YAML file"
pass "exit $rc"

# Errors that are not commhost::Error (here nlohmann's type_error from a dump of the
# wrong shape) must end in a message and exit 1, not std::terminate (exit 134), and name
# the file; before, main's catch-all blamed a system limit.
step "trace analyze on a dump of the wrong shape"
mkdir -p "$tmp/baddump"
echo '{"version": 1, "rank": 0, "entries": [1]}' >"$tmp/baddump/rank0.json"
run "$commhost" trace analyze "$tmp/baddump"
[[ $rc -eq 1 ]] || fail "trace analyze (bad dump) exited with $rc, expected 1"
expect_regex "trace analyze (bad dump)" '^commhost: '
expect_text "trace analyze (bad dump)" "$tmp/baddump/rank0.json is not a flight recorder dump"
expect_text "trace analyze (bad dump)" "remove it or re-dump that rank"
pass "exit $rc"

# The dump format is versioned (kFlightDumpVersion, commhost/flight_dump.h): another version is refused by
# name rather than misread field by field.
step "trace analyze on a dump of another version"
echo '{"version": 2, "rank": 0, "entries": []}' >"$tmp/baddump/rank0.json"
run "$commhost" trace analyze "$tmp/baddump"
[[ $rc -eq 1 ]] || fail "trace analyze (version 2) exited with $rc, expected 1"
expect_text "trace analyze (version 2)" "$tmp/baddump/rank0.json is a flight recorder dump of version 2 but this commhost reads version 1"
pass "exit $rc"

# --- conventions: unknown commands, help, examples ------------------------------------
step "commhost plugin list: unknown command, did you mean plugins"
run "$commhost" plugin list
expect_rc_nonzero "commhost plugin list"
expect_text "plugin list" "commhost: unknown command 'plugin' (did you mean \`plugins\`?)"
expect_text "plugin list" "See \`commhost help\`"
pass "$out"

step "commhost config chek: unknown subcommand, did you mean check"
run "$commhost" config chek x.yaml
expect_rc_nonzero "commhost config chek"
expect_text "config chek" "commhost config: unknown command 'chek' (did you mean \`check\`?)"
expect_text "config chek" "See \`commhost help config\`"
pass "$out"

step "commhost plugins --plugin-path DIR lst: the option's value is not taken for the command"
run "$commhost" plugins --plugin-path "$tmp" lst
expect_rc_nonzero "commhost plugins --plugin-path DIR lst"
expect_text "plugins lst" "commhost plugins: unknown command 'lst' (did you mean \`list\`?)"
pass "$out"

step "commhost help, commhost help config check"
run "$commhost" help
expect_rc0 "commhost help"
expect_regex "commhost help" '^ +plugins '
expect_regex "commhost help" '^ +help '
run "$commhost" help config check
expect_rc0 "commhost help config check"
expect_text "help config check" "--default"
expect_text "help config check" "commhost config check - < my.yaml"
run "$commhost" help config chek
expect_rc_nonzero "commhost help config chek"
expect_text "help config chek" "did you mean \`check\`?"
pass "help works at every level, and names unknown commands"

# Each command's --help ends with examples of that command (CLI11 would otherwise
# repeat the top-level examples under every command).
for cmd in "plugins" "plugins list" "plugins inspect" "config" "config check" "store" "store serve" \
  "run" "trace" "trace analyze" "trace export" "trace dump" "help"; do
  step "commhost $cmd --help shows examples of commhost $cmd"
  run "$commhost" $cmd --help
  expect_rc0 "commhost $cmd --help"
  examples=$(awk 'f && /^  commhost / { print } /^Examples:/ { f = 1 }' <<<"$out")
  [[ -n "$examples" ]] || fail "commhost $cmd --help has no Examples: with commhost command lines"
  other=$(grep -v "^  commhost $cmd\( \|\$\)" <<<"$examples" || true)
  [[ -z "$other" ]] || fail "commhost $cmd --help shows examples of other commands: $other"
  pass "$(wc -l <<<"$examples") examples"
done

# --- config check - | --default ------------------------------------------------------
step "config check - reads the config from standard input"
run bash -c '"$1" config check - <"$2"' _ "$commhost" "$src/configs/gloo.yaml"
expect_rc0 "config check - < configs/gloo.yaml"
expect_line "config check -" "# effective config of <stdin>"
expect_text "config check -" "contexts: 2"
printf 'group:\n  timout: 1s\n' >"$tmp/stdin_typo.yaml"
run bash -c '"$1" config check - <"$2"' _ "$commhost" "$tmp/stdin_typo.yaml"
expect_rc_nonzero "config check - (unknown key)"
expect_text "config check - (unknown key)" "<stdin>:2:"
run bash -c 'yes "# filler line" | "$1" config check -' _ "$commhost"
expect_rc_nonzero "config check - (endless input)"
expect_text "config check - (endless input)" "a config may be at most 1,048,576 bytes"
pass "<stdin> in the source and the errors; endless input refused"

step "config check --default, and its conflicts"
run "$commhost" config check --default
expect_rc0 "config check --default"
expect_line "config check --default" "# effective config of <embedded default>"
run "$commhost" config check "$default" --default
expect_rc_nonzero "config check FILE --default"
expect_text "config check FILE --default" "give either a FILE ('-' for standard input) or --default, not both"
run "$commhost" config check
expect_rc_nonzero "config check (nothing)"
expect_text "config check (nothing)" "give the config FILE, '-' to read it from standard input, or --default"
pass "refused with what to give"

# --- one spelling per reduce op --------------------------------------------------------
step "reduce ops are spelled as c10d spells them; NCCL's prod is refused naming product"
run "$commhost" plugins inspect self
expect_regex "plugins inspect self" '^reduce ops: sum, avg, product, min, max, band, bor, bxor, premul_sum$'
run timeout 30 "$commhost" bench --op allreduce --redop prod --sizes 8 --iters 1
expect_rc_nonzero "bench --redop prod"
expect_text "bench --redop prod" "unknown reduce op 'prod' (did you mean 'product', c10d's spelling?)"
run "$commhost" bench --help
expect_text "bench --help" "product"
grep -qw prod <<<"$out" && fail "bench --help still spells prod"
pass "product everywhere"

# --- run prints the store address, and trace dump --master works with it -------------
step "commhost run prints the store address it chose"
run "$commhost" run -n 2 -- /bin/true
expect_rc0 "run -n 2 -- /bin/true"
usr1="; a torch job's store is torch's TCPStore there: add --store torch_tcp; kill -USR1 [0-9]+ dumps every rank of any job\\)$"
expect_regex "run (store line)" "^commhost run: store at 127\\.0\\.0\\.1:[0-9]+ \\(commhost trace dump --master 127\\.0\\.0\\.1:[0-9]+$usr1"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
run "$commhost" run -n 1 --master 127.0.0.1:$port -- /bin/true
expect_regex "run --master" "^commhost run: store at 127\\.0\\.0\\.1:$port \\(commhost trace dump --master 127\\.0\\.0\\.1:$port$usr1"
run "$commhost" run -n 1 -c "$default" --set store.options.port=$port --set store.options.auth_token=$secret -- /bin/true
expect_regex "run --set store.options.port" "^commhost run: store at 127\\.0\\.0\\.1:$port \\(commhost trace dump --master 127\\.0\\.0\\.1:$port --token TOKEN$usr1"
grep -qF "$secret" <<<"$out" && fail "run printed the token: $out"
printf 'store: { plugin: file, options: { path: %s } }\nbackends: { gloo: {} }\nroutes: [{ device: cpu, backend: gloo }]\n' \
  "$tmp/job.store" >"$tmp/filestore.yaml"
run "$commhost" run -n 1 -c "$tmp/filestore.yaml" -- /bin/true
expect_regex "run (file store)" "^commhost run: store: the file plugin \\(\`commhost trace dump\` needs the tcp store; kill -USR1 [0-9]+ dumps every rank of any job\\)$"
pass "the chosen port, the config's port, another store plugin"

step "run --store torch_tcp is for --metrics and --dashboard only; any other store is refused"
run "$commhost" run -n 1 --store torch_tcp -- /bin/true
expect_rc_nonzero "run --store without --metrics"
expect_text "run --store without --metrics" "only --metrics and --dashboard read the job's store: give one of them"
run "$commhost" run -n 1 --metrics 127.0.0.1:0 --store etcd -- /bin/true
expect_rc_nonzero "run --store etcd"
expect_text "run --store etcd" "--store"
pass "refused before any rank starts"

step "trace dump --master with the address run printed: every rank dumps"
dumps=$TMPDIR/commhost-traces-$(id -u)
rm -rf "$dumps"
"$commhost" run -n 2 -c "$src/configs/gloo.yaml" -- \
  "$commhost" bench --op allreduce --sizes 8 --iters 100000000 --warmup 0 >"$tmp/job.out" 2>"$tmp/job.err" &
job=$!
address=
for _ in $(seq 100); do  # up to 10 s
  address=$(sed -n 's/^commhost run: store at \([^ ]*\) .*/\1/p' "$tmp/job.err")
  [[ -n "$address" ]] && break
  sleep 0.1
done
[[ -n "$address" ]] || { kill "$job"; fail "run printed no store address: $(cat "$tmp/job.err")"; }
ok=
deadline=$((SECONDS + 60))  # a loaded CI machine starts the ranks slowly
while [[ -z "$ok" ]] && ((SECONDS < deadline)); do  # the ranks may still be joining
  run "$commhost" trace dump --master "$address"
  [[ $rc -eq 0 ]] && last_dump=$out
  for _ in $(seq 20); do  # 2 s for the ranks to see the request
    [[ -f "$dumps/rank0.json" && -f "$dumps/rank1.json" ]] && { ok=1; break; }
    sleep 0.1
  done
done
kill "$job" 2>/dev/null || true
wait "$job" 2>/dev/null || true
[[ -n "$ok" ]] || fail "trace dump --master $address: no rank0.json and rank1.json in $dumps ($(ls "$dumps" 2>&1 | tr '\n' ' '))"
out=${last_dump:-}
expect_text "trace dump" "asked every rank of the job at $address"
pass "rank0.json and rank1.json in $dumps"

echo "PASS: commhost CLI"

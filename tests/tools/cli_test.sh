#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# cli_test.sh <path to commhost binary> <source dir>
#
# The `commhost` command as a user meets it: --version and --help, `plugins list` and
# `plugins inspect`, and `config check` on a good config and on each kind of bad input
# (unknown key, bad --set value, malformed YAML), whose errors must point at the source.
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
echo '{"rank": 0, "entries": [1]}' >"$tmp/baddump/rank0.json"
run "$commhost" trace analyze "$tmp/baddump"
[[ $rc -eq 1 ]] || fail "trace analyze (bad dump) exited with $rc, expected 1"
expect_regex "trace analyze (bad dump)" '^commhost: '
expect_text "trace analyze (bad dump)" "$tmp/baddump/rank0.json is not a flight recorder dump"
expect_text "trace analyze (bad dump)" "remove it or re-dump that rank"
pass "exit $rc"

echo "PASS: commhost CLI"

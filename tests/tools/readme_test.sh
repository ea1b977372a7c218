#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# readme_test.sh <path to commhost binary> <source dir> <build dir>
#
# Runs the commands README.md shows, so the README cannot drift from the code. The
# conventions (CONTRIBUTING.md, "The README's commands"):
#   ```sh blocks        every command in them is run, in README order; a command may
#                       continue over lines ending in `\`; `#` lines are comments.
#                       A command whose trailing comment starts with `# fails` must
#                       fail as a job fails (exit 1, or a rank's status): not with a
#                       usage error (2; CLI11's 100-119), a timeout or "not found".
#   <!-- readme-test: write PATH -->
#                       on the line before a fenced block (any language): the block
#                       is written to PATH before the commands after it run.
#   other blocks        (```text, ```yaml, ```cmake, ...) are not run.
# Commands run one by one with `bash -eo pipefail -c`, each bounded in time, from a
# scratch directory laid out like the source tree (configs/ and tools/ link to the
# source, build/ to the build under test), with HOME and TMPDIR in the scratch
# directory and the build's bin directory on PATH (after $HOME/.local/bin, where the
# README installs to). A failure names the README line of the command.
#
# It also checks that the apt-get line the README shows lists exactly tools/setup's
# packages, and that the README names no file outside the repository (../).
set -euo pipefail

if [[ $# -ne 3 ]]; then
  echo "usage: $0 <path to commhost binary> <source dir> <build dir>" >&2
  exit 2
fi
commhost=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$2" 2>/dev/null && pwd) || { echo "FAIL: source dir '$2' does not exist" >&2; exit 1; }
build=$(cd "$3" 2>/dev/null && pwd) || { echo "FAIL: build dir '$3' does not exist" >&2; exit 1; }
[[ -x "$commhost" && -f "$commhost" ]] || { echo "FAIL: '$1' is not an executable file; build the commhost target first" >&2; exit 1; }
readme=$src/README.md
per_command_s=${COMMHOST_README_TEST_TIMEOUT:-60}

# The host reads COMMHOST_* variables (plugin path, config overrides); start clean.
while read -r var; do unset "$var"; done < <(compgen -e | grep '^COMMHOST_' || true)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/commhost-readme.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

work=$tmp/work
mkdir -p "$work" "$tmp/home" "$tmp/tmp"
ln -s "$src/configs" "$work/configs"
ln -s "$src/tools" "$work/tools"
ln -s "$build" "$work/build"
export HOME=$tmp/home TMPDIR=$tmp/tmp
# Debian 13's torch 2.6 has no libuv; its env:// store needs this (the README says so).
export USE_LIBUV=0
# A sanitizer build's libcommhost needs the application built with the same sanitizer
# (the installed package does not carry the flag); cmake reads these on first configure.
sanitize=$(sed -n 's/^COMMHOST_SANITIZE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
if [[ -n "$sanitize" ]]; then
  export CXXFLAGS="-fsanitize=$sanitize" LDFLAGS="-fsanitize=$sanitize"
fi
export PATH="$HOME/.local/bin:$(dirname "$commhost"):$PATH"

# --- extract ------------------------------------------------------------------------
# One record per action, NUL-separated fields: kind (run|write), README line, then the
# command and whether it must fail, or the path and the block's text.
actions=$tmp/actions
python3 - "$readme" "$actions" <<'EOF'
import re, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
out = []
fence = re.compile(r"^```([A-Za-z0-9_+-]*)\s*$")
write = re.compile(r"^<!--\s*readme-test:\s*write\s+(\S+)\s*-->\s*$")
i = 0
while i < len(lines):
    m = fence.match(lines[i])
    if not m:
        i += 1
        continue
    lang, start = m.group(1), i
    j = i + 1
    while j < len(lines) and not re.match(r"^```\s*$", lines[j]):
        j += 1
    if j == len(lines):
        sys.exit("README.md:%d: a fenced block that is never closed" % (start + 1))
    if not lang:
        sys.exit("README.md:%d: a fenced block without a language; write ```sh for commands the "
                 "readme test runs, ```text (or yaml, cmake, ...) for the rest" % (start + 1))
    body = lines[start + 1:j]
    target = write.match(lines[start - 1]) if start > 0 else None
    if target:
        out.append(["write", str(start + 2), target.group(1), "\n".join(body) + "\n"])
    elif lang == "sh":
        k = 0
        while k < len(body):
            first = k
            text = body[k]
            while text.endswith("\\") and k + 1 < len(body):
                k += 1
                text = text + "\n" + body[k]
            k += 1
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            fails = re.search(r"\s#\s*fails\b", text.split("\n")[-1]) is not None
            out.append(["run", str(start + 2 + first), "fail" if fails else "ok", text])
    i = j + 1
with open(sys.argv[2], "wb") as f:
    for rec in out:
        f.write(("\0".join(rec) + "\0").encode())
EOF

# --- the apt-get line matches tools/setup --------------------------------------------
step "the README's apt-get line lists tools/setup's packages"
want=$(sed -n '/^packages=(/,/)/p' "$src/tools/setup" | tr -d '()' | sed 's/packages=//' | tr -s ' \n' '\n' | grep -v '^$' | sort)
got=$(grep -m1 'apt-get install' "$readme" | sed 's/.*apt-get install//' | tr -s ' ' '\n' | grep -v '^-' | grep -v '^$' | sort)
[[ -n "$want" ]] || fail "cannot read packages=(...) from $src/tools/setup"
[[ "$want" == "$got" ]] || fail "README.md's apt-get line differs from tools/setup: $(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | tr '\n' ' ')"
pass "$(wc -l <<<"$want") packages"

step "the README names no file outside the repository"
outside=$(grep -nE '(^|[^.])\.\./' "$readme" || true)
[[ -z "$outside" ]] || fail "README.md refers to files outside the repository: $outside"
pass "no ../ paths"

# --- run ----------------------------------------------------------------------------
ran=0 skipped=0
while IFS= read -r -d '' kind && IFS= read -r -d '' line && IFS= read -r -d '' a && IFS= read -r -d '' b; do
  if [[ $kind == write ]]; then
    mkdir -p "$(dirname "$work/$a")"
    printf '%s' "$b" >"$work/$a"
    echo "== README.md:$line: wrote $a"
    continue
  fi
  step "README.md:$line: $b"
  # A sanitizer build has no Python module (host/python/CMakeLists.txt: a sanitized
  # extension cannot load into the unsanitized interpreter), so its Python commands are
  # skipped, each said; the C++ under them runs in the sanitized suite.
  if [[ -n "$sanitize" ]] && grep -qE '(^|[^[:alnum:]_])python3([^[:alnum:]_.]|$)' <<<"$b"; then
    echo "   skipped under COMMHOST_SANITIZE=$sanitize: runs Python, and a sanitizer build has no Python module"
    skipped=$((skipped + 1))
    continue
  fi
  started=$SECONDS
  set +e
  out=$(cd "$work" && timeout -k 5 "$per_command_s" bash -eo pipefail -c "$b" 2>&1 </dev/null)
  rc=$?
  set -e
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    fail "README.md:$line: the command did not finish within ${per_command_s}s: $b"
  elif [[ $a == fail ]]; then
    [[ $rc -ne 0 ]] || fail "README.md:$line: the command is marked '# fails' but exited 0: $b"
    # It must fail as the job it shows fails, not on its own command line.
    [[ $rc -ne 2 && ($rc -lt 100 || $rc -gt 127) ]] ||
      fail "README.md:$line: the command is marked '# fails' but failed with $rc, a usage error or a command that could not be run: $b"
  else
    [[ $rc -eq 0 ]] || fail "README.md:$line: the command exited with $rc: $b"
  fi
  pass "exit $rc in $((SECONDS - started)) s"
  ran=$((ran + 1))
done <"$actions"
(( ran > 0 )) || fail "README.md has no \`\`\`sh commands; is '$readme' the commhost README?"
echo "PASS: README.md's $ran commands${sanitize:+ ($skipped Python command(s) skipped under the $sanitize build)}"

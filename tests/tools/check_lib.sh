# SPDX-License-Identifier: Apache-2.0
# Helpers the script tests source: run a command keeping its output, and assert on it.
# `out` holds the last command's combined output and `rc` its exit status.
step() { echo "== $*"; }
pass() { echo "   ok: $*"; }
fail() {
  echo "FAIL: $*" >&2
  if [[ -n "${out:-}" ]]; then
    echo "---- output of the last command ----" >&2
    printf '%s\n' "$out" >&2
    echo "------------------------------------" >&2
  fi
  exit 1
}
# run CMD...: runs CMD, keeping its combined output in $out and its exit status in $rc.
run() {
  set +e
  out=$("$@" 2>&1)
  rc=$?
  set -e
}
expect_rc0() { [[ $rc -eq 0 ]] || fail "$1 exited with $rc, expected 0"; }
expect_rc_nonzero() { [[ $rc -ne 0 ]] || fail "$1 exited with 0, expected an error"; }
expect_text() {  # expect_text WHAT TEXT: $out must contain TEXT (fixed string)
  grep -qF -- "$2" <<<"$out" || fail "$1: output does not contain \"$2\""
}
expect_regex() {  # expect_regex WHAT ERE: some line of $out must match ERE
  grep -qE -- "$2" <<<"$out" || fail "$1: no line of the output matches /$2/"
}
expect_line() {  # expect_line WHAT LINE: $out must have a line that is exactly LINE
  grep -qxF -- "$2" <<<"$out" || fail "$1: output has no line \"$2\""
}

# For tests that kill ranks of a `commhost run` job:
# rank_pid LAUNCHER R: the pid of global rank R among that launcher's children (their RANK
# variable), never a rank of another job on the machine; empty when there is none.
rank_pid() {
  local p
  for p in $(pgrep -P "$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$2" && { echo "$p"; return; }
  done
  return 0
}
# How many commhost segments /dev/shm holds.
shm_segments() { find /dev/shm -maxdepth 1 -name 'commhost*' 2>/dev/null | wc -l; }

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A swap whose gloo mesh cannot complete on one rank (issue 42.2): rank 1 runs with
# `ulimit -n 45`, the swap asks for 16 gloo contexts (a socket per peer each). Every rank
# must end the attempt with a verdict of its own within about group.timeout (2 s), the
# rank out of descriptors saying so. Before the fix the peers waiting on it sat in Gloo's
# Pair::connect for 5 x group.timeout (the launcher killed them) and it reported "ok".
#   swap_fd_limit_test.sh <commhost binary>
set -euo pipefail
commhost=$1
tmp=$(mktemp -d)
export TMPDIR="$tmp"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out" 2>/dev/null; exit 1; }
for v in $(env | grep -o '^COMMHOST_[A-Z_]*'); do unset "$v"; done

for contexts in 1 16; do
  cat >"$tmp/c$contexts.yaml" <<YAML
group: { name: main, timeout: 2s }
backends: { gloo: { options: { threads: 1, contexts: $contexts } } }
routes: [{ device: cpu, backend: gloo }]
logging: { level: warn }
YAML
done

for trial in 1 2 3; do
  # bench stops at a failed swap (exit 1 on every rank): what matters is how each rank ends.
  timeout 120 "$commhost" run -n 4 -c "$tmp/c1.yaml" -- sh -c \
    'if [ "$RANK" = 1 ]; then ulimit -n 45; fi; exec "$0" bench --sizes 1K --iters 10 --warmup 0 --swap-every 3 --configs "$1"' \
    "$commhost" "$tmp/c16.yaml" >"$tmp/out" 2>&1 && fail "trial $trial: the swap to 16 contexts succeeded under ulimit -n 45"
  exits=$(grep -cE '^ +[0-9]+ +[0-9]+  exit 1 ' "$tmp/out" || true)
  [ "$exits" -eq 4 ] || fail "trial $trial: $exits of 4 ranks ended the swap themselves (the others were killed in it)"
  for r in 0 1 2 3; do
    grep -q "^\[$r\] commhost: \[group main rank $r\] reconfigure: .*rank(s) [0-9, ]*1[0-9, ]*:" "$tmp/out" ||
      fail "trial $trial: rank $r's verdict does not name rank 1"
  done
  grep -q 'rank 1: .*Too many open files' "$tmp/out" || fail "trial $trial: rank 1 does not say it ran out of descriptors"
  grep -q 'every rank keeps generation 0' "$tmp/out" || fail "trial $trial: no rollback verdict"
done
echo "ok: a mesh that cannot complete on one rank ends the swap on every rank, naming it (3 trials)"

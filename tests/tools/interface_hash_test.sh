#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# cmake/InterfaceHashes.cmake on edited copies of the public headers: a comment or a
# reflowed declaration leaves every hash as it was; two virtual functions of Store
# swapped change Store's hash and no other; a renamed class is a clear error.
#   interface_hash_test.sh <source dir>
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
hashes() { cmake -DINCLUDE_DIR="$1" -DOUT="$1/out.h" -P "$src/cmake/InterfaceHashes.cmake" && grep '^#define' "$1/out.h"; }
copy() { mkdir -p "$tmp/$1" && cp -r "$src/host/include/commhost" "$tmp/$1/"; }

copy orig
orig=$(hashes "$tmp/orig")
[ "$(echo "$orig" | wc -l)" -eq 5 ] || fail "want 5 hashes (Backend, Store, Work, CommHook, Tuner), got: $orig"

copy cosmetic
perl -0pi -e 's/tensors,\n\s+const AllreduceCoalescedOptions/tensors,   const AllreduceCoalescedOptions/' \
  "$tmp/cosmetic/commhost/sdk/backend.h"
perl -0pi -e 's/(  virtual void shutdown\(\);)/  \/\/ a note, naming virtual void notReal();\n$1 \/* and another *\//' \
  "$tmp/cosmetic/commhost/sdk/backend.h"
cmp -s "$src/host/include/commhost/sdk/backend.h" "$tmp/cosmetic/commhost/sdk/backend.h" && fail "the cosmetic edit changed nothing"
[ "$(hashes "$tmp/cosmetic")" = "$orig" ] || fail "a comment or a reflow changed a hash: $(hashes "$tmp/cosmetic") vs $orig"

copy swapped
perl -0pi -e 's/(  virtual bool deleteKey[^\n]*\n)(  virtual int64_t numKeys[^\n]*\n)/$2$1/' "$tmp/swapped/commhost/store.h"
cmp -s "$src/host/include/commhost/store.h" "$tmp/swapped/commhost/store.h" && fail "the swap changed nothing"
swapped=$(hashes "$tmp/swapped")
changed=$(diff <(echo "$orig") <(echo "$swapped") | grep '^<' || true)
[ "$(echo "$changed" | grep -c .)" -eq 1 ] || fail "want exactly one hash changed: $swapped vs $orig"
grep -q STORE <<<"$changed" || fail "the changed hash is not Store's: $changed"

copy renamed
sed -i 's/class CommHook {/class CommHookV2 {/' "$tmp/renamed/commhost/sdk/comm_hook.h"
out=$(hashes "$tmp/renamed" 2>&1) && fail "a renamed interface class was hashed: $out"
grep -q "'class CommHook ' is not in" <<<"$out" || fail "the error does not name the class: $out"
echo "ok: comments and reflows keep the hashes; a swap changes Store's alone; a lost class is named"

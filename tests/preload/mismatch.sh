#!/usr/bin/env bash
# libbrisk-checked.so under LD_PRELOAD names a block freed another way than
# it was allocated (malloc / new / new[] against free / delete / delete[]),
# and raises nothing on correct use. Usage: mismatch.sh libbrisk-checked.so mismatch
source "$(dirname "$0")/common.sh"
PROG=${2:?usage: $0 libbrisk-checked.so mismatch}

expect_quiet_ok "$PROG" ok

expect_mismatch() {  # <mode> <freed with> <allocated with> <the right way>
  local rc
  set +e
  pre "$PROG" "$1" > "$TMP/out" 2> "$TMP/err"
  rc=$?
  set -e
  [ "$(kill -l "$rc" 2>/dev/null)" = ABRT ] || fail "$1: exit $rc, not SIGABRT: $(cat "$TMP/err")"
  local want="^brisk: error: $2\(0x[0-9a-f]+\): alloc-dealloc mismatch: the block \([0-9]+ bytes, size class [0-9]+\) was allocated with $3: free it with $4$"
  grep -qE "$want" "$TMP/err" || fail "$1: no line matching '$want': $(cat "$TMP/err")"
  grep -q "^  allocated at:" "$TMP/err" || fail "$1: no allocation stack: $(cat "$TMP/err")"
  echo "ok: $1: $(head -1 "$TMP/err")"
}

expect_mismatch new_array_free free "operator new\[\]" "operator delete\[\]"
expect_mismatch malloc_delete "operator delete" malloc free
expect_mismatch new_delete_array "operator delete\[\]" "operator new" "operator delete"
expect_mismatch new_array_delete "operator delete" "operator new\[\]" "operator delete\[\]"
expect_mismatch new_realloc realloc "operator new" "operator delete"
echo "mismatch: ok"

#!/usr/bin/env bash
# libbrisk-secure.so under LD_PRELOAD stops a C++ sized delete that names
# more bytes than the block holds (a delete through a pointer to another
# type: mimalloc-bench's delete_type_size_mismatch), and raises nothing on
# correct use of every delete. Usage: wrong_size.sh libbrisk-secure.so mismatch
source "$(dirname "$0")/common.sh"
PROG=${2:?usage: $0 libbrisk-secure.so mismatch}

expect_quiet_ok "$PROG" ok

set +e
pre "$PROG" wrong_type_delete > "$TMP/out" 2> "$TMP/err"
rc=$?
set -e
[ "$(kill -l "$rc" 2>/dev/null)" = ABRT ] || fail "wrong_type_delete: exit $rc, not SIGABRT: $(cat "$TMP/err")"
want="^brisk: error: operator delete\(0x[0-9a-f]+, 72\): the block holds 16 bytes: a size it was not allocated with"
grep -qE "$want" "$TMP/err" || fail "wrong_type_delete: no line matching '$want': $(cat "$TMP/err")"
echo "ok: wrong_type_delete: $(head -1 "$TMP/err")"
echo "wrong_size: ok"

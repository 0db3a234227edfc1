#!/usr/bin/env bash
# valgrind reports no false errors on a brisk-preloaded program (issue #10,
# item 12). valgrind redirects only some of brisk's exported allocation
# functions to its own allocator; any other entry point must reach one of
# those, or a block made on one side is freed on the other ("Invalid free",
# "definitely lost"). Runs valgrind_check (every entry point, each block
# freed through another one) and `ls -l /`.
# Usage: valgrind.sh /path/to/libbrisk.so /path/to/valgrind_check
source "$(dirname "$0")/common.sh"
CHECK_PROG=${2:?usage: $0 libbrisk.so valgrind_check}
need valgrind

# vg <tag> <command...>: memcheck with brisk preloaded, the log in $TMP/<tag>.log;
# a failure is counted and shown, and the next run goes ahead.
failed=0
vg() {
  local tag=$1; shift
  local rc=0
  LD_PRELOAD="$LIB" valgrind --error-exitcode=99 --leak-check=full --show-leak-kinds=definite \
    --errors-for-leak-kinds=definite --log-file="$TMP/$tag.log" "$@" > "$TMP/$tag.out" || rc=$?
  local summary
  summary=$(grep -E "ERROR SUMMARY|definitely lost:|total heap usage" "$TMP/$tag.log" | sed 's/^==[0-9]*== *//')
  # No error, nothing lost, and valgrind's allocator served the program
  # (brisk's malloc was redirected).
  if [ "$rc" -ne 0 ] || ! grep -q "ERROR SUMMARY: 0 errors" "$TMP/$tag.log" ||
     grep -qE "definitely lost: [1-9]" "$TMP/$tag.log" ||
     ! grep -qE "total heap usage: [1-9][0-9,]* allocs" "$TMP/$tag.log"; then
    head -40 "$TMP/$tag.log" >&2
    echo "FAIL: $tag under valgrind with brisk preloaded: exit $rc" >&2
    echo "$summary" >&2
    failed=$((failed + 1))
    return 1
  fi
  echo "ok: $tag is clean under valgrind"
}

if vg check "$CHECK_PROG"; then
  grep -qE "^valgrind_check: [0-9]+ passed, ok$" "$TMP/check.out" ||
    { cat "$TMP/check.out"; echo "FAIL: valgrind_check" >&2; failed=$((failed + 1)); }
fi
vg ls ls -l / && { [ -s "$TMP/ls.out" ] || { echo "FAIL: ls -l / printed nothing" >&2; failed=$((failed + 1)); }; }
[ "$failed" -eq 0 ] || fail "$failed of the runs under valgrind failed"
echo "valgrind: ok"

#!/usr/bin/env bash
# brisk-run --leaks on a program that frees all it allocates (clean_exit.cpp)
# exits with the program's status, 0, and reports no leak: the blocks the C
# and C++ runtimes keep until exit are still reachable, not leaked. The
# same under the checked library.
# Usage: leak_clean.sh brisk-run libbrisk.so libbrisk-checked.so clean_exit
source "$(dirname "$0")/common.sh"   # (it takes $1, brisk-run, as LIB: replaced below)
[ $# -eq 4 ] || fail "usage: $0 brisk-run libbrisk.so libbrisk-checked.so clean_exit"
RUN=$1 PROG=$4
LIB=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
CHECKED=$(cd "$(dirname "$3")" && pwd)/$(basename "$3")
for lib in "$LIB" "$CHECKED"; do
  rc=0
  BRISK_LIB=$lib bash "$RUN" --leaks -- "$PROG" > "$TMP/out" 2> "$TMP/err" || rc=$?
  [ "$rc" = 0 ] || fail "$(basename "$lib"): brisk-run --leaks exited with $rc: $(cat "$TMP/err")"
  grep -q "^from a thread$" "$TMP/out" || fail "$(basename "$lib"): the program did not run: $(cat "$TMP/out")"
  grep -qE "^brisk leak report: 0 leaked blocks, 0 bytes \(pid [0-9]+, [^)]*clean_exit\)$" "$TMP/err" ||
    fail "$(basename "$lib"): leaks reported: $(cat "$TMP/err")"
  grep -qE "^  and [0-9]+ blocks, [0-9]+ bytes, still reachable \(not leaks\)$" "$TMP/err" ||
    fail "$(basename "$lib"): no line for the blocks still reachable: $(cat "$TMP/err")"
done
echo "ok: nothing the runtimes keep is called a leak"

#!/usr/bin/env bash
# memcheck finds misuse in a program running on the checked library built
# with -DBRISK_VALGRIND=ON (its blocks are annotated): a read after free and
# a leak, with no error in correct use (memcheck_probe, ls). valgrind must
# be told to leave brisk's malloc in place (--soname-synonyms=somalloc=
# nouserintercepts), or it serves the program itself.
# Usage: memcheck.sh /path/to/libbrisk-checked.so /path/to/memcheck_probe ON|OFF
source "$(dirname "$0")/common.sh"
PROBE=${2:?usage: $0 libbrisk-checked.so memcheck_probe ON|OFF}
[ "${3:-}" = ON ] || skip "the checked library was built without -DBRISK_VALGRIND=ON"
need valgrind

# vg <tag> <command...>: memcheck with brisk preloaded, the log in $TMP/<tag>.log.
vg() {
  local tag=$1; shift
  LD_PRELOAD="$LIB" valgrind --soname-synonyms=somalloc=nouserintercepts --leak-check=full \
    --show-leak-kinds=definite --log-file="$TMP/$tag.log" "$@" > "$TMP/$tag.out" || true
}
show() { head -60 "$TMP/$1.log" >&2; }

vg clean "$PROBE"
grep -q "^memcheck_probe: done$" "$TMP/clean.out" || { show clean; fail "memcheck_probe did not finish"; }
grep -q "ERROR SUMMARY: 0 errors" "$TMP/clean.log" || { show clean; fail "memcheck reports errors in correct use"; }
grep -qE "definitely lost: [1-9]" "$TMP/clean.log" && { show clean; fail "memcheck reports a leak in correct use"; }
grep -qE "total heap usage: [1-9][0-9,]* allocs" "$TMP/clean.log" ||
  { show clean; fail "memcheck saw no block of brisk's"; }
echo "ok: no error in correct use, and memcheck sees brisk's blocks"

vg misuse "$PROBE" misuse
grep -q "Invalid read of size 1" "$TMP/misuse.log" || { show misuse; fail "no invalid read reported"; }
grep -qE "Address 0x[0-9a-f]+ is 100 bytes inside a block of size 200 free'd" "$TMP/misuse.log" ||
  { show misuse; fail "the invalid read is not placed in the freed block"; }
grep -qE "77 bytes in 1 blocks are definitely lost" "$TMP/misuse.log" || { show misuse; fail "the leak is not reported"; }
grep -q "ERROR SUMMARY: 2 errors" "$TMP/misuse.log" || { show misuse; fail "expected exactly the read and the leak"; }
echo "ok: the read after free and the leak are reported"

vg ls ls -l /
[ -s "$TMP/ls.out" ] || fail "ls -l / printed nothing"
grep -q "ERROR SUMMARY: 0 errors" "$TMP/ls.log" || { show ls; fail "memcheck reports errors in ls"; }
echo "memcheck: ok"

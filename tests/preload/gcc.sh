#!/usr/bin/env bash
# g++ (cc1plus, as, ld) running under brisk compiles a C++ file: the assembly
# is identical to the one made without brisk, the program built under brisk
# runs under brisk with the same output, and cc1plus used brisk's malloc.
source "$(dirname "$0")/common.sh"
need g++
SRC="$HERE/sample.cpp"
FLAGS=(-std=c++17 -O2 -pthread -frandom-seed=brisk)

g++ "${FLAGS[@]}" -S -o "$TMP/plain.s" "$SRC" || fail "g++ -S failed without brisk"
pre_traced cc g++ "${FLAGS[@]}" -S -o "$TMP/brisk.s" "$SRC" || fail "g++ -S failed under brisk"
cmp -s "$TMP/plain.s" "$TMP/brisk.s" || fail "cc1plus produced different assembly under brisk"
served_by_brisk cc "cc1plus"

g++ "${FLAGS[@]}" -o "$TMP/plain" "$SRC" || fail "g++ failed without brisk"
pre g++ "${FLAGS[@]}" -o "$TMP/brisk" "$SRC" || fail "g++ (compile + assemble + link) failed under brisk"
expected=$("$TMP/plain") || fail "the program built without brisk fails"
[ -n "$expected" ] || fail "the program printed nothing"
got=$(pre "$TMP/brisk") || fail "the program built under brisk fails under brisk"
[ "$got" = "$expected" ] || fail "output differs: '$got' vs '$expected'"
got=$("$TMP/brisk") || fail "the program built under brisk fails without brisk"
[ "$got" = "$expected" ] || fail "output differs: '$got' vs '$expected'"
echo "g++: $expected"

#!/usr/bin/env bash
# sort under brisk (big buffers, several threads) gives byte-identical output.
source "$(dirname "$0")/common.sh"
need sort
need awk
awk 'BEGIN { x = 12345; for (i = 0; i < 400000; i++) {
  x = (x * 1103515245 + 12345) % 2147483648;
  printf "%08x %d line-%d %s\n", x, x % 1000, i, substr("abcdefghijklmnopqrstuvwxyz", 1 + x % 26, 1 + i % 20) } }' \
  > "$TMP/in.txt"

check_sort() {
  sort "$@" "$TMP/in.txt" > "$TMP/plain.out" || fail "sort $* failed without brisk"
  pre sort "$@" "$TMP/in.txt" > "$TMP/brisk.out" || fail "sort $* failed under brisk"
  cmp -s "$TMP/plain.out" "$TMP/brisk.out" || fail "sort $* output differs under brisk"
  [ -s "$TMP/brisk.out" ] || fail "sort $* printed nothing"
}
check_sort
check_sort --parallel=2 -S 64M
check_sort -S 1M -T "$TMP"          # external merge through temp files
check_sort -k2,2n -k1,1r --stable
check_sort -u -t' ' -k2,2n
[ "$(wc -l < "$TMP/in.txt")" = 400000 ] || fail "input generation went wrong"
pre_traced sort sort --parallel=2 "$TMP/in.txt" > /dev/null || fail "traced sort failed"
served_by_brisk sort "sort"
echo "sort: ok"

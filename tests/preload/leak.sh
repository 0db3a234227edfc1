#!/usr/bin/env bash
# BRISK_LEAK_REPORT=1: at exit, the leaked blocks (live, and pointed to by
# nothing reachable) grouped by size class, the most bytes first, and a line
# for those still reachable. The probe leaks 1000 blocks of 200 bytes
# (class 224), 50 of 5000 (class 5120), 3 huge blocks of 3 MiB, a block of
# 40 (class 48) that points to another, and, from a thread that then
# exits, 300 of 3000 (class 3072); it frees 100 blocks of 700 bytes, and
# keeps 20 blocks of 100 bytes (class 112) in a global, one pointing to a
# block of 60 (class 64): still reachable.
# Usage: leak.sh /path/to/libbrisk.so /path/to/brisk_probe
source "$(dirname "$0")/common.sh"
PROBE=${2:?usage: $0 libbrisk.so brisk_probe}
need awk

run() { env -u BRISK_SHOW_STATS -u BRISK_STATS_JSON "$@" LD_PRELOAD="$LIB" "$PROBE" leak > "$TMP/out" 2> "$TMP/err"; }

run BRISK_LEAK_REPORT=1 || fail "probe leak failed: $(cat "$TMP/err")"
grep -q '^leaked$' "$TMP/out" || fail "probe leak did not run"
grep -q "brisk leak report" "$TMP/out" && fail "the leak report went to stdout"
echo "--- report:"
cat "$TMP/err"

# The header line, and totals that add up.
header=$(grep -E '^brisk leak report: [0-9]+ leaked blocks, [0-9]+ bytes \(pid [0-9]+, [^)]+\)$' "$TMP/err") ||
  fail "no header line"
[ "$(grep -c 'brisk leak report' "$TMP/err")" = 1 ] || fail "more than one report"
read -r total_blocks total_bytes < <(echo "$header" | awk '{print $4, $7}')
read -r sum_blocks sum_bytes < <(awk '/ blocks of / {b += $1; s += $6} / huge blocks / {b += $1; s += $4}
                                      END {print b + 0, s + 0}' "$TMP/err")
[ "$sum_blocks" = "$total_blocks" ] || fail "the lines count $sum_blocks blocks, the header $total_blocks"
[ "$sum_bytes" = "$total_bytes" ] || fail "the lines count $sum_bytes bytes, the header $total_bytes"
[ "$total_blocks" = 1355 ] || fail "$total_blocks blocks reported leaked; the probe leaked 1355"

# line_of REGEX: the report line number matching it (exactly one line).
line_of() {
  local n
  n=$(grep -nE "$1" "$TMP/err" | cut -d: -f1)
  [ -n "$n" ] || fail "no report line matches '$1'"
  [ "$(echo "$n" | wc -l)" = 1 ] || fail "several report lines match '$1'"
  echo "$n"
}
l224=$(line_of '^ +1000 blocks of +224 bytes +224000 bytes$')
l5120=$(line_of '^ +50 blocks of +5120 bytes +256000 bytes$')
l3072=$(line_of '^ +300 blocks of +3072 bytes +921600 bytes$')   # the exited thread's
lhuge=$(line_of '^ +3 huge blocks +[0-9]+ bytes$')
line_of '^ +2 blocks of +48 bytes +96 bytes$' > /dev/null   # the chain: the block pointed to is leaked too
# The blocks kept in a global (and the one they point to) are no leaks.
if grep -qE ' blocks of +(112|64) bytes' "$TMP/err"; then fail "reachable blocks reported as leaks"; fi
kept=$(grep -E '^  and [0-9]+ blocks, [0-9]+ bytes, still reachable \(not leaks\)$' "$TMP/err" | awk '{print $2}') ||
  fail "no line for the blocks still reachable"
[ "$kept" -ge 21 ] || fail "$kept blocks still reachable; the probe keeps 21"
huge_bytes=$(sed -n "${lhuge}p" "$TMP/err" | awk '{print $4}')
[ "$huge_bytes" -ge $((3 * 3 << 20)) ] || fail "3 huge blocks of 3 MiB hold only $huge_bytes bytes"
# Largest first: huge (9+ MiB), 3072 (921600), 5120 (256000), 224 (224000),
# and the bytes column never rises.
[ "$lhuge" -lt "$l3072" ] && [ "$l3072" -lt "$l5120" ] && [ "$l5120" -lt "$l224" ] ||
  fail "groups not ordered by bytes: huge line $lhuge, 3072 line $l3072, 5120 line $l5120, 224 line $l224"
awk '/ blocks of / {v = $6} / huge blocks / {v = $4} (/ blocks of / || / huge blocks /) {
       if (seen && v > prev) { print "bytes rise at line " NR ": " $0; bad = 1 } prev = v; seen = 1 }
     END {exit bad}' "$TMP/err" || fail "the bytes column is not in falling order"
# The freed 700-byte blocks (class 768) are not leaks.
if grep -qE '^ +100 blocks of +768 bytes' "$TMP/err"; then fail "freed blocks reported as leaks"; fi
echo "ok: the leak report names the leaked blocks"

# Without the variable: no report.
run || fail "probe leak failed without BRISK_LEAK_REPORT"
if grep -q "leak report" "$TMP/err"; then fail "a leak report without BRISK_LEAK_REPORT"; fi
[ ! -s "$TMP/err" ] || fail "stderr without BRISK_LEAK_REPORT: $(cat "$TMP/err")"
echo "ok: no report unless asked"

# Stats and leaks together, as brisk-run --stats --leaks asks.
run BRISK_LEAK_REPORT=1 BRISK_SHOW_STATS=1 || fail "probe leak failed with stats and leaks"
grep -q "brisk statistics" "$TMP/err" || fail "no stats table with BRISK_SHOW_STATS=1"
grep -qE '^ +1000 blocks of +224 bytes' "$TMP/err" || fail "no leak report with the stats"
echo "leak: ok"

# A worker still running at exit holds, in a block of its own heap, the only
# pointer to a block of the main thread's: only the block the probe loses is
# leaked (the exiting thread visits only its own heap's blocks, so another
# live thread's segments are read as roots).
env -u BRISK_SHOW_STATS -u BRISK_STATS_JSON BRISK_LEAK_REPORT=1 LD_PRELOAD="$LIB" "$PROBE" leak_held \
  > "$TMP/out" 2> "$TMP/err" || fail "probe leak_held failed: $(cat "$TMP/err")"
grep -q '^held$' "$TMP/out" || fail "probe leak_held did not run"
grep -qE '^brisk leak report: 1 leaked blocks, 224 bytes ' "$TMP/err" ||
  fail "a block a running worker holds reported as leaked: $(cat "$TMP/err")"
echo "ok: what a running thread's blocks point to is not leaked"

#!/usr/bin/env bash
# BRISK_* environment variables, read once at start:
#   - good values (with size suffixes) set the options (seen through
#     brisk_option_get in a probe program under LD_PRELOAD);
#   - a malformed value or an unknown BRISK_ name gives exactly one warning
#     line on stderr naming the variable and the accepted form, and the
#     option keeps its default;
#   - a value out of the option's range gives one line naming the variable,
#     the value and the range, and changes nothing (BRISK_MAX_BYTES=1 no
#     longer makes programs fail); the reserve does not raise the cache cap;
#   - an unknown name's line lists the valid names and the closest one;
#   - the mapped-bytes cap says once, on its first refusal, why allocations
#     fail;
#   - BRISK_SHOW_STATS=1 prints the table at exit (even if the program closed
#     its stderr), BRISK_STATS_JSON=file writes the stats as JSON at exit.
# Usage: options.sh /path/to/libbrisk.so /path/to/brisk_probe
source "$(dirname "$0")/common.sh"
PROBE=${2:?usage: $0 libbrisk.so brisk_probe}

# Every BRISK_ variable of the caller's environment is dropped first.
clean_env=()
while IFS='=' read -r name _; do
  case "$name" in BRISK_*) clean_env+=(-u "$name") ;; esac
done < <(env)

# probe VAR=VALUE... : runs `brisk_probe options` with only these BRISK_
# variables; stdout to $TMP/out, stderr to $TMP/err.
probe() {
  env "${clean_env[@]}" "$@" LD_PRELOAD="$LIB" "$PROBE" options > "$TMP/out" 2> "$TMP/err" ||
    fail "probe failed with $*: $(cat "$TMP/err")"
}

# value NAME: the option's value printed by the probe.
value() { sed -n "s/^$1=//p" "$TMP/out"; }

expect_value() { # NAME WANT CONTEXT
  local got
  got=$(value "$1")
  [ "$got" = "$2" ] || fail "$3: $1 is '$got', expected $2"
}

declare -A DEFAULT=(
  [BRISK_SHOW_STATS]=0 [BRISK_VERBOSE]=0 [BRISK_PURGE_DELAY_MS]=500 [BRISK_MAX_BYTES]=0
  [BRISK_CACHE_CAP]=536870912 [BRISK_HUGEPAGES]=0 [BRISK_RESERVE]=0 [BRISK_REALTIME]=0
  [BRISK_LEAK_REPORT]=0 [BRISK_BACKGROUND_PURGE]=0)

# ---- Defaults: no variable, no output on stderr.
probe
[ "$(wc -l < "$TMP/out")" = 10 ] || fail "expected 10 options, got: $(cat "$TMP/out")"
for name in "${!DEFAULT[@]}"; do expect_value "$name" "${DEFAULT[$name]}" "defaults"; done
[ ! -s "$TMP/err" ] || fail "stderr without any variable: $(cat "$TMP/err")"
echo "ok: defaults"

# ---- Good values, every option, every form a size accepts.
probe BRISK_PURGE_DELAY_MS=250 BRISK_CACHE_CAP=64M BRISK_MAX_BYTES=4G BRISK_HUGEPAGES=yes \
      BRISK_RESERVE=8M BRISK_REALTIME=on BRISK_LEAK_REPORT=false BRISK_SHOW_STATS=0
expect_value BRISK_PURGE_DELAY_MS 250 "good values"
expect_value BRISK_CACHE_CAP $((64 << 20)) "good values"
expect_value BRISK_MAX_BYTES $((4 << 30)) "good values"
expect_value BRISK_HUGEPAGES 1 "good values"
expect_value BRISK_RESERVE $((8 << 20)) "good values"
expect_value BRISK_REALTIME 1 "good values"
expect_value BRISK_LEAK_REPORT 0 "good values"
expect_value BRISK_SHOW_STATS 0 "good values"
[ ! -s "$TMP/err" ] || fail "warnings for good values: $(cat "$TMP/err")"

declare -A SIZES=(
  [65536]=65536 [64K]=65536 [64k]=65536 [64KiB]=65536 [64KB]=65536 [64kb]=65536 [100B]=100
  [2M]=$((2 << 20)) [2MiB]=$((2 << 20)) [3G]=$((3 << 30)) [1T]=$((1 << 40)) [0]=0)
for form in "${!SIZES[@]}"; do
  probe BRISK_CACHE_CAP="$form"
  expect_value BRISK_CACHE_CAP "${SIZES[$form]}" "BRISK_CACHE_CAP=$form"
  [ ! -s "$TMP/err" ] || fail "warning for BRISK_CACHE_CAP=$form: $(cat "$TMP/err")"
done
for form in 1 yes on true TRUE Yes ON; do
  probe BRISK_HUGEPAGES="$form"
  expect_value BRISK_HUGEPAGES 1 "BRISK_HUGEPAGES=$form"
  [ ! -s "$TMP/err" ] || fail "warning for BRISK_HUGEPAGES=$form: $(cat "$TMP/err")"
done
for form in 0 no off false FALSE; do
  probe BRISK_REALTIME="$form"
  expect_value BRISK_REALTIME 0 "BRISK_REALTIME=$form"
  [ ! -s "$TMP/err" ] || fail "warning for BRISK_REALTIME=$form: $(cat "$TMP/err")"
done
probe BRISK_PURGE_DELAY_MS=0
expect_value BRISK_PURGE_DELAY_MS 0 "BRISK_PURGE_DELAY_MS=0"
probe BRISK_VERBOSE=1
expect_value BRISK_VERBOSE 1 "BRISK_VERBOSE=1"
if grep -E "ignoring|unknown variable" "$TMP/err"; then fail "BRISK_VERBOSE=1 was warned about"; fi
# Variables of brisk's tools and of the test suite are known: no warning.
probe BRISK_LIB=/nonexistent BRISK_TEST_SOMETHING=1 BRISK_STATS_JSON= BRISK_BUILD_DIR=/tmp \
      BRISK_ASAN_SCALE=0.5 BRISK_TSAN_SCALE=0.25 BRISK_STACK_DEPTH=4 BRISK_RECORD=/tmp/none BRISK_RECORD_ROOT=1
[ ! -s "$TMP/err" ] || fail "warning for a known variable: $(cat "$TMP/err")"
echo "ok: good values"

# ---- Malformed values: one line naming the variable and its form; nothing changes.
# bad VAR VALUE WORDS: one warning line naming VAR="VALUE" and saying WORDS.
bad() {
  local var=$1 val=$2 words=$3 lines
  probe "$var=$val"
  lines=$(wc -l < "$TMP/err")
  [ "$lines" = 1 ] || fail "$var='$val': expected one warning line, got $lines: $(cat "$TMP/err")"
  grep -qF -- "$var=\"$val\"" "$TMP/err" || fail "$var='$val': the warning does not name it: $(cat "$TMP/err")"
  grep -qF -- "$words" "$TMP/err" || fail "$var='$val': the warning does not say '$words': $(cat "$TMP/err")"
  grep -q "warning" "$TMP/err" || fail "$var='$val': not a warning: $(cat "$TMP/err")"
  for name in "${!DEFAULT[@]}"; do expect_value "$name" "${DEFAULT[$name]}" "$var='$val'"; done
}
for val in abc 12Q -5 "" 1.5 "25 0" 250ms +5 0x10 99999999999999999999999 " 250" " +5" $'\t250'; do
  bad BRISK_PURGE_DELAY_MS "$val" "whole number"
done
for val in abc 12Q -5 "" 64MM 4X 1.5G 16777216T 64M- M " -5" " 64M" " +64M"; do
  bad BRISK_CACHE_CAP "$val" "512M"
  bad BRISK_MAX_BYTES "$val" "512M"
  bad BRISK_RESERVE "$val" "512M"
done
for val in 2 -1 maybe "" yess 10 onn; do
  bad BRISK_SHOW_STATS "$val" "1 or 0"
  bad BRISK_VERBOSE "$val" "1 or 0"
  bad BRISK_HUGEPAGES "$val" "1 or 0"
  bad BRISK_REALTIME "$val" "1 or 0"
  bad BRISK_LEAK_REPORT "$val" "1 or 0"
done
# BRISK_SHOW_STATS=2 was ignored: no table at exit either.
probe BRISK_SHOW_STATS=2
if grep -q "brisk statistics" "$TMP/err"; then fail "BRISK_SHOW_STATS=2 printed the stats"; fi
echo "ok: malformed values"

# ---- Unknown variables: one line each, naming it.
for var in BRISK_FOO BRISK_PURGE_DELAY BRISK_STATS BRISK_ BRISK_show_stats; do
  probe "$var=1"
  [ "$(wc -l < "$TMP/err")" = 1 ] || fail "$var: expected one warning line: $(cat "$TMP/err")"
  grep -q "unknown variable $var " "$TMP/err" || fail "$var: the warning does not name it: $(cat "$TMP/err")"
  for name in "${!DEFAULT[@]}"; do expect_value "$name" "${DEFAULT[$name]}" "with $var set"; done
done
probe BRISK_FOO=1 BRISK_BAR=2 BRISK_CACHE_CAP=lots
[ "$(wc -l < "$TMP/err")" = 3 ] || fail "three bad variables: expected three lines: $(cat "$TMP/err")"
for pattern in "unknown variable BRISK_FOO " "unknown variable BRISK_BAR " "ignoring BRISK_CACHE_CAP="; do
  [ "$(grep -c "$pattern" "$TMP/err")" = 1 ] || fail "'$pattern' not said exactly once: $(cat "$TMP/err")"
done
# The line lists every valid name, and the closest one when it is close.
# suggest VAR CLOSEST
suggest() {
  probe "$1=1"
  grep -qF "did you mean $2?" "$TMP/err" || fail "$1: no 'did you mean $2?': $(cat "$TMP/err")"
  for name in "${!DEFAULT[@]}" BRISK_STATS_JSON; do
    grep -qF "$name" "$TMP/err" || fail "$1: the valid name $name is not listed: $(cat "$TMP/err")"
  done
}
suggest BRISK_SHOW_STAT BRISK_SHOW_STATS
suggest BRISK_show_stats BRISK_SHOW_STATS
suggest BRISK_PURGE_DELAY BRISK_PURGE_DELAY_MS
suggest BRISK_MAXBYTES BRISK_MAX_BYTES
suggest BRISK_CACHECAP BRISK_CACHE_CAP
suggest BRISK_STATS_JSN BRISK_STATS_JSON
suggest BRISK_REALTIM BRISK_REALTIME
probe BRISK_FOO=1
if grep -q "did you mean" "$TMP/err"; then fail "BRISK_FOO is close to no name: $(cat "$TMP/err")"; fi
echo "ok: unknown variables"

# ---- Out-of-range values: one line naming the variable, the value and the
# range; nothing changes.
# out_of_range VAR VALUE RANGE
out_of_range() { bad "$1" "$2" "out of range (allowed: $3)"; }
for val in 1 4096 1M 16777215 129T; do
  out_of_range BRISK_MAX_BYTES "$val" "0 (no cap) or 16M .. 128T"
done
out_of_range BRISK_PURGE_DELAY_MS 3600001 "0 .. 3600000"
out_of_range BRISK_PURGE_DELAY_MS 99999999999 "0 .. 3600000"
out_of_range BRISK_CACHE_CAP 129T "0 .. 128T"
out_of_range BRISK_RESERVE 1025M "0 .. 1G"
out_of_range BRISK_RESERVE 2G "0 .. 1G"
# The bounds themselves are taken, silently.
probe BRISK_MAX_BYTES=16M BRISK_PURGE_DELAY_MS=3600000 BRISK_CACHE_CAP=128T
expect_value BRISK_MAX_BYTES $((16 << 20)) "lower bound"
expect_value BRISK_PURGE_DELAY_MS 3600000 "upper bound"
expect_value BRISK_CACHE_CAP $((128 << 40)) "upper bound"
[ ! -s "$TMP/err" ] || fail "warnings for values at the bounds: $(cat "$TMP/err")"
# A reserve over the cache cap is kept on top of it: neither changes the other.
probe BRISK_RESERVE=64M BRISK_CACHE_CAP=16M
expect_value BRISK_RESERVE $((64 << 20)) "reserve over the cache cap"
expect_value BRISK_CACHE_CAP $((16 << 20)) "reserve over the cache cap"
[ ! -s "$TMP/err" ] || fail "warnings for a reserve over the cache cap: $(cat "$TMP/err")"
# BRISK_MAX_BYTES=1 used to make every program fail: now a real one runs.
printf 'b\na\n' | env "${clean_env[@]}" BRISK_MAX_BYTES=1 LD_PRELOAD="$LIB" sort > "$TMP/out" 2> "$TMP/err" ||
  fail "sort failed under BRISK_MAX_BYTES=1: $(cat "$TMP/err")"
[ "$(cat "$TMP/out")" = "$(printf 'a\nb')" ] || fail "sort under BRISK_MAX_BYTES=1 printed: $(cat "$TMP/out")"
[ "$(wc -l < "$TMP/err")" = 1 ] && grep -qF 'ignoring BRISK_MAX_BYTES="1": out of range' "$TMP/err" ||
  fail "sort under BRISK_MAX_BYTES=1: expected the one warning: $(cat "$TMP/err")"
echo "ok: out-of-range values"

# ---- A cap too small for the program: one warning at the first refusal,
# naming BRISK_MAX_BYTES, the cap and the size asked; then ENOMEM, quietly.
env "${clean_env[@]}" BRISK_MAX_BYTES=16M LD_PRELOAD="$LIB" "$PROBE" over-cap > "$TMP/out" 2> "$TMP/err" ||
  fail "probe over-cap failed: $(cat "$TMP/err")"
[ "$(grep -c "NULL, ENOMEM" "$TMP/out")" = 3 ] || fail "over the cap: expected three ENOMEM: $(cat "$TMP/out")"
grep -q "small: ok" "$TMP/out" || fail "over the cap: small blocks failed too: $(cat "$TMP/out")"
expect_value BRISK_MAX_BYTES $((16 << 20)) "over-cap"
[ "$(wc -l < "$TMP/err")" = 1 ] || fail "over the cap: expected one warning line: $(cat "$TMP/err")"
grep -qE "warning: BRISK_MAX_BYTES: the cap of 16777216 bytes refused a mapping of [0-9]+ bytes" "$TMP/err" ||
  fail "over the cap: the warning does not name the variable and the cap: $(cat "$TMP/err")"
asked=$(sed -n 's/.*refused a mapping of \([0-9]*\) bytes.*/\1/p' "$TMP/err")
[ "$asked" -ge $((64 << 20)) ] || fail "over the cap: the size asked ($asked) is not the 64 MiB block's"
echo "ok: the cap's first refusal"

# ---- BRISK_SHOW_STATS=1: the table at exit, on stderr; stdout untouched.
env "${clean_env[@]}" BRISK_SHOW_STATS=1 LD_PRELOAD="$LIB" "$PROBE" options > "$TMP/out" 2> "$TMP/err" ||
  fail "probe failed with BRISK_SHOW_STATS=1"
expect_value BRISK_SHOW_STATS 1 "BRISK_SHOW_STATS=1"
if grep -q "brisk statistics" "$TMP/out"; then fail "the stats went to stdout"; fi
for word in "brisk statistics" small medium large huge total "os calls" "recycle cache" heaps; do
  grep -q "$word" "$TMP/err" || fail "no '$word' in the table at exit: $(cat "$TMP/err")"
done
# A program that closes its stderr before exiting still gets the table on it.
env "${clean_env[@]}" BRISK_SHOW_STATS=1 LD_PRELOAD="$LIB" "$PROBE" close-stderr > "$TMP/out" 2> "$TMP/err" ||
  fail "probe close-stderr failed"
grep -q "closing stderr" "$TMP/out" || fail "probe close-stderr did not run"
grep -q "brisk statistics" "$TMP/err" || fail "no table at exit after the program closed stderr"
echo "ok: BRISK_SHOW_STATS"

# ---- BRISK_STATS_JSON=file: JSON written at exit.
env "${clean_env[@]}" BRISK_STATS_JSON="$TMP/stats.json" LD_PRELOAD="$LIB" "$PROBE" options > "$TMP/out" 2> "$TMP/err" ||
  fail "probe failed with BRISK_STATS_JSON"
[ -s "$TMP/stats.json" ] || fail "BRISK_STATS_JSON wrote nothing"
[ ! -s "$TMP/err" ] || fail "stderr with BRISK_STATS_JSON: $(cat "$TMP/err")"
if command -v python3 > /dev/null 2>&1; then
  python3 - "$TMP/stats.json" <<'EOF' || fail "BRISK_STATS_JSON: not the expected JSON: $(cat "$TMP/stats.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["version"] == 2, d["version"]
for k in ("requested", "in_use", "committed", "reserved", "cached", "mapped", "peak_reserved"):
    assert isinstance(d[k], int) and d[k] >= 0, k
assert set(d["tiers"]) == {"small", "medium", "large", "huge"}, d["tiers"]
for t in d["tiers"].values():
    assert set(t) == {"live_blocks", "in_use", "committed", "reserved"}, t
    assert t["committed"] >= t["in_use"] and t["reserved"] >= t["committed"], t
assert d["in_use"] == sum(t["in_use"] for t in d["tiers"].values())
assert all(c["live_blocks"] > 0 and c["size"] % 16 == 0 for c in d["classes"]), d["classes"]
assert d["in_use"] > 0 and d["requested"] > 0
assert set(d["os"]) == {"mmap", "munmap", "madvise", "mremap"} and d["os"]["mmap"] > 0
assert d["heaps"]["thread"] >= 1
EOF
else
  grep -q '^{"version":1,' "$TMP/stats.json" || fail "BRISK_STATS_JSON: $(cat "$TMP/stats.json")"
  echo "(python3 missing: JSON checked by its first bytes only)"
fi
# An unwritable path: a warning, and the program's exit status is untouched.
env "${clean_env[@]}" BRISK_STATS_JSON="$TMP/no/such/dir/stats.json" LD_PRELOAD="$LIB" "$PROBE" options \
  > "$TMP/out" 2> "$TMP/err" || fail "an unwritable BRISK_STATS_JSON changed the exit status"
grep -q "cannot write the stats to $TMP/no/such/dir/stats.json" "$TMP/err" ||
  fail "no warning for an unwritable BRISK_STATS_JSON: $(cat "$TMP/err")"
echo "ok: BRISK_STATS_JSON"
echo "options: ok"

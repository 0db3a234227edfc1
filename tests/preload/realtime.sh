#!/usr/bin/env bash
# Realtime mode seen from outside: strace counts the mmap, munmap, madvise
# and mremap calls the whole process makes between two markers the probe
# writes (a write(2) call each).
#   - after a warm-up (the same sizes, huge blocks included) and
#     brisk_set_realtime(1), the same work makes none;
#   - BRISK_RESERVE=64M BRISK_REALTIME=1, then 40 MiB of small blocks: none;
#   - the method sees calls when there are some (fresh huge blocks).
# brisk's own counters must agree. Skipped (77) without a working strace.
# Usage: realtime.sh /path/to/libbrisk.so /path/to/brisk_probe
source "$(dirname "$0")/common.sh"
PROBE=${2:?usage: $0 libbrisk.so brisk_probe}
need strace
need awk
strace -f -qq -o /dev/null true > /dev/null 2>&1 || skip "strace cannot trace here (ptrace not permitted?)"

# traced MODE [VAR=VALUE...]: runs the probe under strace; the trace goes to
# $TMP/trace, the probe's stdout to $TMP/out.
traced() {
  local mode=$1; shift
  env -u BRISK_SHOW_STATS -u BRISK_LEAK_REPORT -u BRISK_STATS_JSON -u BRISK_REALTIME -u BRISK_RESERVE "$@" \
    strace -f -qq -E LD_PRELOAD="$LIB" -e trace=mmap,munmap,madvise,mremap,write -o "$TMP/trace" \
    "$PROBE" "$mode" > "$TMP/out" 2> "$TMP/err" || fail "probe $mode failed: $(cat "$TMP/err")"
  [ "$(grep -c '@@BRISK-PROBE-START@@' "$TMP/trace")" = 1 ] || fail "probe $mode: no start marker in the trace"
  [ "$(grep -c '@@BRISK-PROBE-END@@' "$TMP/trace")" = 1 ] || fail "probe $mode: no end marker in the trace"
}

# The memory system calls between the markers, one per line.
between() {
  awk '/write\(2, "@@BRISK-PROBE-START@@/ {on = 1; next}
       /write\(2, "@@BRISK-PROBE-END@@/ {on = 0}
       on && /(^|[ \]])(mmap|munmap|madvise|mremap)\(/ {print}' "$TMP/trace"
}

counted() { sed -n 's/^os_calls_between=//p' "$TMP/out"; }

# ---- The method sees system calls when there are some.
traced cold
n=$(between | wc -l)
[ "$n" -ge 4 ] || fail "cold: strace saw $n memory system calls for 4 fresh huge blocks: the count is broken"
[ "$(counted)" = "$n" ] || fail "cold: strace saw $n memory system calls, brisk's counters $(counted)"
echo "ok: $n calls seen for fresh huge blocks (brisk counted $(counted))"

# ---- Warm-up, then realtime: the same work makes none.
traced realtime
if [ "$(between | wc -l)" != 0 ]; then
  between | head -20 >&2
  fail "realtime after warm-up: $(between | wc -l) memory system calls"
fi
[ "$(counted)" = 0 ] || fail "realtime after warm-up: brisk counted $(counted) OS calls"
# brisk_collect still gives the cached memory back.
collect=$(sed -n 's/^collect_munmap=//p' "$TMP/out")
[ "$collect" -gt 0 ] || fail "brisk_collect in realtime mode unmapped nothing"
echo "ok: no mmap/munmap/madvise/mremap in realtime mode after a warm-up (collect: $collect munmaps)"

# ---- BRISK_RESERVE + BRISK_REALTIME: small blocks from the reserve, no call.
traced reserve BRISK_RESERVE=64M BRISK_REALTIME=1
if [ "$(between | wc -l)" != 0 ]; then
  between | head -20 >&2
  fail "BRISK_RESERVE=64M BRISK_REALTIME=1: $(between | wc -l) memory system calls for 40 MiB of small blocks"
fi
[ "$(counted)" = 0 ] || fail "BRISK_RESERVE=64M BRISK_REALTIME=1: brisk counted $(counted) OS calls"
# The reserve should also have been touched at start (see src/core/segment.c,
# segment_reserve); reported, not failed: the header promises no system
# call, not no page fault.
minflt=$(sed -n 's/^minflt_between=//p' "$TMP/out")
if [ "${minflt:-0}" -ge 1000 ]; then
  echo "NOTE: $minflt page faults while using BRISK_RESERVE with BRISK_REALTIME=1 (the reserve was not touched at start)"
fi
echo "ok: no memory system call while allocating from BRISK_RESERVE in realtime mode"
echo "realtime: ok"

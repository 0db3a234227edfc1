#!/usr/bin/env bash
# The trace format and its reader (brisk-replay-driver): a synthetic trace
# (trace_writer.c) reads back with the writer's figures and replays
# faithfully; cut short anywhere, it reads up to its last whole chunk (with
# a note) or fails with one clear line; damaged anywhere, it reads or fails
# with one clear line; never a crash or a sanitizer report. Runs in every
# build, the driver built with the sanitizer in the asan and tsan ones.
#
#   format.sh /path/to/brisk-replay-driver /path/to/trace_writer
set -euo pipefail
DRIVER=${1:?usage: $0 brisk-replay-driver trace_writer}
WRITER=${2:?usage: $0 brisk-replay-driver trace_writer}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/brisk-format.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
unset LD_PRELOAD
# The trace asks for 2^50 bytes once: the sanitizers' allocators must
# answer NULL, as malloc does, not stop the program.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1"
export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}allocator_may_return_null=1"

"$WRITER" "$TMP/t" 3000 > "$TMP/expected" || fail "trace_writer failed"
"$DRIVER" trace="$TMP/t" mode=check > "$TMP/got" 2> "$TMP/err" || fail "the whole trace does not read: $(cat "$TMP/err")"
for key in calls threads "peak live bytes"; do
  want=$(grep "^$key: " "$TMP/expected") got=$(grep "^$key: " "$TMP/got" || true)
  [ "$want" = "$got" ] || fail "the reader says '$got', the writer '$want'"
done
[ ! -s "$TMP/err" ] || fail "a whole trace gives a message: $(cat "$TMP/err")"
calls=$(sed -n 's/^calls: //p' "$TMP/expected")
"$DRIVER" trace="$TMP/t" mode=info > "$TMP/info" || fail "mode=info failed"
grep -q "^calls: $calls\$" "$TMP/info" || fail "--info lacks 'calls: $calls'"
grep -q "^threads: 3\$" "$TMP/info" || fail "--info lacks the thread count"
grep -Eq "^cross-thread frees: [1-9]" "$TMP/info" || fail "--info counts no cross-thread free"
grep -q "^size histogram" "$TMP/info" || fail "--info has no size histogram"
grep -q "^live bytes over time" "$TMP/info" || fail "--info has no live bytes over time"

# The replay: three threads, cross-thread frees waited for, every call made.
replay() { "$DRIVER" trace="$1" name=format > "$TMP/replay.json" 2> "$TMP/replay.err"; }
replay "$TMP/t" || fail "the replay failed (exit $?): $(head -c 600 "$TMP/replay.err")"
grep -q "\"calls\":$calls,\"calls_expected\":$calls," "$TMP/replay.json" || fail "the replay made other calls: $(cat "$TMP/replay.json")"
grep -q '"faithful":1' "$TMP/replay.json" || fail "the replay is not faithful: $(cat "$TMP/replay.json")"

# check <file> <what>: reads it; exit 0, or 1 with one line that says why.
checked=0
check() {
  local rc=0
  "$DRIVER" trace="$1" mode=check > "$TMP/out" 2> "$TMP/msg" || rc=$?
  checked=$((checked + 1))
  grep -q "Sanitizer\|runtime error" "$TMP/msg" && fail "$2: a sanitizer report: $(head -c 800 "$TMP/msg")"
  case $rc in
    0) grep -q "^calls: " "$TMP/out" || fail "$2: read, but no calls line" ;;
    1) [ "$(wc -l < "$TMP/msg")" = 1 ] && grep -q "^brisk-replay: .*: ." "$TMP/msg" ||
         fail "$2: exit 1 without one clear line: $(head -c 400 "$TMP/msg")" ;;
    *) fail "$2: exit status $rc (a crash?): $(head -c 800 "$TMP/msg")" ;;
  esac
  return $rc
}

size=$(stat -c %s "$TMP/t")
# Cut short: in the header, then at 150 places through the chunks.
for cut in 0 1 7 8 20 33 34 50; do
  head -c "$cut" "$TMP/t" > "$TMP/cut"
  ! check "$TMP/cut" "cut at $cut" || fail "a trace cut at byte $cut (inside its header) reads"
done
for i in $(seq 1 150); do
  cut=$((80 + (size - 80) * i / 151))
  head -c "$cut" "$TMP/t" > "$TMP/cut"
  check "$TMP/cut" "cut at $cut" || fail "a trace cut at byte $cut does not read up to its last chunk"
  n=$(sed -n 's/^calls: //p' "$TMP/out")
  [ "$n" -lt "$calls" ] || fail "cut at $cut: $n calls, no fewer than the whole trace's $calls"
  grep -q "ends inside a chunk" "$TMP/msg" || [ ! -s "$TMP/msg" ] || fail "cut at $cut: $(cat "$TMP/msg")"
done
# A trace cut short replays what it holds, faithfully.
head -c $((size / 2)) "$TMP/t" > "$TMP/half"
replay "$TMP/half" || fail "half a trace does not replay: $(head -c 600 "$TMP/replay.err")"
grep -q '"faithful":1' "$TMP/replay.json" || fail "half a trace replays unfaithfully"
grep -q "ends inside a chunk" "$TMP/replay.err" || fail "no note that the trace was cut short"

# Damaged: one byte changed at 200 places, header and chunks.
python3 - "$TMP/t" "$TMP/bad" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
for i in range(200):
    at = i if i < 40 else 40 + (len(data) - 41) * (i - 40) // 160
    bad = bytearray(data)
    bad[at] ^= 0x5a
    open("%s.%d" % (sys.argv[2], i), "wb").write(bad)
PY
damaged=0
for i in $(seq 0 199); do
  check "$TMP/bad.$i" "damaged copy $i" || damaged=$((damaged + 1))
done
[ "$damaged" -ge 150 ] || fail "only $damaged of 200 damaged traces were refused"

# The clear messages.
msg() { check "$1" "$2" && fail "$2: read"; grep -q "$3" "$TMP/msg" || fail "$2: '$(cat "$TMP/msg")' does not say '$3'"; }
: > "$TMP/empty"
msg "$TMP/empty" "an empty file" "is empty"
msg "$TMP/nothere" "a missing file" "cannot open"
msg "$TMP" "a directory" "not a regular file"
printf 'hello, world, this is not a trace at all' > "$TMP/text"
msg "$TMP/text" "a text file" "not a brisk trace"
python3 - "$TMP/t" "$TMP/v" 8 "$TMP/c" 120 <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
v = bytearray(data); v[int(sys.argv[3])] = 99; open(sys.argv[2], "wb").write(v)
c = bytearray(data); c[int(sys.argv[5])] ^= 1; open(sys.argv[4], "wb").write(c)
PY
msg "$TMP/v" "another version" "format version 99"
msg "$TMP/c" "a damaged chunk" "damaged trace"
echo "format: ok ($calls calls; $checked damaged or cut traces read or refused cleanly, $damaged of 200 damaged refused)"

#!/usr/bin/env bash
# brisk-run --record and brisk-replay on real programs: the recorded
# program prints what it prints without recording; brisk-replay --info
# reads the trace; the replay under glibc and under brisk makes every
# recorded call and peaks at the recorded live bytes ("faithful"), with a
# report and its plot.
#
#   record.sh /path/to/libbrisk.so MODE BUILD_DIR [record_probe]
#   MODE: python   python3 (PYTHONMALLOC=malloc) doing dict and JSON work on two threads
#         sort     sort through temporary files, and sort | uniq in sh (each process a trace)
#         threads  record_probe: every malloc-family call and C++ form, threads
#                  freeing each other's blocks, a forked child
#         killed   record_probe allocating until SIGKILL: the trace reads up to
#                  its last chunk and replays
#         installed  cmake --install into a prefix, moved: the installed tools find
#                  the installed library, recorder and driver; the source tree's
#                  tools copied elsewhere find a build through BRISK_BUILD_DIR
source "$(dirname "$0")/../preload/common.sh"
MODE=${2:?mode}
BUILD=$(cd "${3:?build directory}" && pwd)
PROBE=${4:-}
RUN=$BUILD/brisk-run
REPLAY=$BUILD/brisk-replay
need python3
[ -x "$RUN" ] && [ -x "$REPLAY" ] && [ -x "$BUILD/brisk-replay-driver" ] && [ -f "$BUILD/libbrisk-record.so" ] ||
  fail "build brisk-run, brisk-replay, brisk-replay-driver and libbrisk-record.so first"
T=$TMP/trace

# recorded <expected output file> <command...>: runs it recorded into $T;
# its output must be the expected one.
recorded() {
  local expected=$1; shift
  "$RUN" --record "$T" -- "$@" > "$TMP/recorded.out" || fail "$* failed when recorded"
  cmp -s "$expected" "$TMP/recorded.out" || fail "$* printed something else when recorded"
  [ -s "$T" ] || fail "no trace $T"
}

# calls_of <trace>: the calls line of --info.
calls_of() {
  "$REPLAY" --info "$1" > "$TMP/info" || fail "brisk-replay --info $1 failed"
  sed -n 's/^calls: //p' "$TMP/info"
}

# replays <trace> <at least this many calls>: --info, then a replay under
# glibc and brisk that must be faithful, with its report.
replays() {
  local n
  n=$(calls_of "$1")
  [ -n "$n" ] && [ "$n" -ge "$2" ] || fail "$1: $n calls recorded, expected at least $2"
  for key in threads "cross-thread frees" "size histogram" "live bytes over time"; do
    grep -q "^$key" "$TMP/info" || fail "--info says nothing of $key"
  done
  BRISK_LIB=$LIB "$REPLAY" "$1" --allocators glibc,brisk --repeat 1 --report "$TMP/report" > "$TMP/replay.out" ||
    { cat "$TMP/replay.out"; fail "brisk-replay $1 failed"; }
  [ "$(grep -c "^calls: $n (recorded: $n), peak live bytes \([0-9]*\) (recorded: \1): faithful\$" "$TMP/replay.out")" = 2 ] ||
    { cat "$TMP/replay.out"; fail "the replays under glibc and brisk are not both faithful to $n calls"; }
  grep -q "^== brisk (.*libbrisk[^/]*)$" "$TMP/replay.out" || fail "no replay under brisk"
  [ -s "$TMP/report/report.md" ] && [ -s "$TMP/report/results.json" ] || fail "no report written"
  python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$TMP/report/heap.svg" ||
    fail "heap.svg is not an SVG"
  echo "ok: $1: $n calls, replayed faithfully under glibc and brisk"
}

case $MODE in
python)
  PY=/usr/bin/python3
  [ -x "$PY" ] || PY=$(command -v python3)
  cat > "$TMP/work.py" <<'EOF'
import hashlib, json, threading
out = {}
def work(k):
    docs = []
    for r in range(6):
        d = {"%d-%d" % (k, i): {"a": [i, str(i) * 3, i / 7], "b": {"c": "x" * (i % 40)}} for i in range(1500)}
        docs.append(json.loads(json.dumps(d, sort_keys=True)))
        docs = docs[-3:]
    out[k] = hashlib.sha256(json.dumps(docs, sort_keys=True).encode()).hexdigest()
threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
for t in threads: t.start()
for t in threads: t.join()
print(out[0], out[1])
EOF
  PYTHONMALLOC=malloc "$PY" "$TMP/work.py" > "$TMP/plain.out" || fail "the script fails"
  recorded "$TMP/plain.out" env PYTHONMALLOC=malloc "$PY" "$TMP/work.py"
  # env exec'd python: the trace is python's, env's went to $T.2
  grep -q "python" <("$REPLAY" --info "$T") || fail "the trace is not python's"
  replays "$T" 100000
  ;;
sort)
  need sort
  awk 'BEGIN { x = 7; for (i = 0; i < 60000; i++) { x = (x * 1103515245 + 12345) % 2147483648;
       printf "%08x line-%d %d\n", x, i, x % 97 } }' > "$TMP/in.txt"
  # A small buffer: the sort goes through temporary files.
  sort --parallel=2 -S 1M -T "$TMP" "$TMP/in.txt" > "$TMP/plain.out"
  recorded "$TMP/plain.out" sort --parallel=2 -S 1M -T "$TMP" "$TMP/in.txt"
  replays "$T" 10
  # Every process of a pipeline writes a trace of its own.
  sh -c "sort -k3,3n '$TMP/in.txt' | uniq -c -f2 | sort" > "$TMP/plain.out"
  recorded "$TMP/plain.out" sh -c "sort -k3,3n '$TMP/in.txt' | uniq -c -f2 | sort"
  children=$(ls "$T".[0-9]* | wc -l)
  [ "$children" -ge 3 ] || fail "$children traces for the processes of sh -c 'sort | uniq | sort', expected 3 or more"
  for f in "$T".[0-9]*; do calls_of "$f" > /dev/null; done
  echo "ok: sh, sort, uniq, sort: $children traces of the processes sh started"
  ;;
threads)
  [ -x "$PROBE" ] || fail "no record_probe"
  "$PROBE" threads > "$TMP/plain.out" || fail "record_probe fails"
  recorded "$TMP/plain.out" "$PROBE" threads
  replays "$T" 600000
  grep -q "^threads: 5$" "$TMP/info" || fail "expected 5 threads: $(grep threads "$TMP/info")"
  grep -Eq "^cross-thread frees: [0-9]{5}" "$TMP/info" || fail "expected 40000 cross-thread frees"
  for kind in malloc calloc realloc reallocarray free posix_memalign aligned_alloc memalign \
              malloc_usable_size new 'new\[\]' delete 'delete\[\]'; do
    grep -Eq "^  $kind +[1-9]" "$TMP/info" || fail "--info counts no $kind"
  done
  child=$(ls "$T".[0-9]* 2>/dev/null | head -1)
  [ -n "$child" ] && [ "$(calls_of "$child")" = 2000 ] || fail "the forked child's trace lacks its 2000 calls"
  "$RUN" --record "$T" --stats -- true 2> /dev/null && fail "--record with --stats was accepted"
  echo "ok: the forked child wrote its own trace"
  ;;
killed)
  [ -x "$PROBE" ] || fail "no record_probe"
  "$RUN" --record "$T" -- "$PROBE" forever > "$TMP/forever.out" &
  pid=$!
  for _ in $(seq 1 600); do grep -q ready "$TMP/forever.out" 2> /dev/null && break; sleep 0.05; done
  grep -q ready "$TMP/forever.out" || { kill -KILL $pid; fail "record_probe forever never got ready"; }
  sleep 0.3
  kill -KILL $pid
  wait $pid 2> /dev/null && fail "record_probe forever was not killed"
  replays "$T" 100000
  ;;
installed)
  need cmake
  [ -x "$PROBE" ] || fail "no record_probe"
  "$PROBE" threads > "$TMP/plain.out" || fail "record_probe fails"
  cmake --install "$BUILD" --prefix "$TMP/staged" > /dev/null || fail "cmake --install failed"
  mv "$TMP/staged" "$TMP/prefix"
  P=$TMP/prefix
  for f in bin/brisk-replay bin/brisk-replay-driver share/man/man1/brisk-replay.1; do
    [ -e "$P/$f" ] || fail "not installed: $f"
  done
  [ -n "$(find "$P" -name libbrisk-record.so)" ] || fail "not installed: libbrisk-record.so"
  RUN=$P/bin/brisk-run REPLAY=$P/bin/brisk-replay
  recorded "$TMP/plain.out" "$PROBE" threads
  "$REPLAY" "$T" --allocators glibc,brisk --repeat 1 --no-syscalls > "$TMP/replay.out" || fail "installed brisk-replay"
  grep -q "^== brisk ($P/lib[^ ]*/libbrisk.so)$" "$TMP/replay.out" || fail "installed brisk-replay did not take the installed library: $(grep '^==' "$TMP/replay.out")"
  [ "$(grep -c ': faithful$' "$TMP/replay.out")" = 2 ] || fail "installed: replays not faithful"
  out=$("$REPLAY" --version) && grep -q "^brisk-replay [0-9]" <<< "$out" || fail "brisk-replay --version: $out"
  out=$("$REPLAY" --help) && grep -q -- "--allocators" <<< "$out" || fail "brisk-replay --help"
  echo "ok: the installed tools find the installed library, recorder and driver"
  # The source tree's scripts, copied where no build is beside them.
  SRC=$(cd "$HERE/../.." && pwd)
  mkdir "$TMP/elsewhere"
  cp "$SRC/tools/brisk-run" "$SRC/tools/brisk-replay" "$TMP/elsewhere/"
  RUN=$TMP/elsewhere/brisk-run REPLAY=$TMP/elsewhere/brisk-replay
  "$RUN" --record "$T" -- true 2> /dev/null && fail "brisk-run --record found a recorder with no build"
  export BRISK_BUILD_DIR=$BUILD
  recorded "$TMP/plain.out" "$PROBE" threads
  "$REPLAY" "$T" --allocators brisk --repeat 1 --no-syscalls > "$TMP/replay.out" || fail "brisk-replay with BRISK_BUILD_DIR"
  grep -q "^== brisk ($BUILD/libbrisk.so)$" "$TMP/replay.out" || fail "BRISK_BUILD_DIR: $(grep '^==' "$TMP/replay.out")"
  echo "ok: BRISK_BUILD_DIR names the build"
  ;;
*) fail "unknown mode $MODE" ;;
esac
echo "record $MODE: ok"

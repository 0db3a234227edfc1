#!/usr/bin/env bash
# Builds brisk's libFuzzer harnesses (fuzz/, fuzz/README.md) with clang in
# build-fuzz/ and runs each for SECONDS (default 60), one after the other,
# under nice. Fails (exit 1) when a harness finds a crash; the input is kept
# as build-fuzz/crashes/<harness>-crash-*, and the line to reproduce it is
# printed. Installs clang and libclang-rt-14-dev with apt-get when missing;
# exits 77 with a message when it cannot.
#
#   scripts/fuzz.sh [SECONDS] [HARNESS...]   run (all harnesses built, or those named)
#   scripts/fuzz.sh --smoke [SECONDS] ...    the test command's run: the committed
#                                            corpus is only read
#   scripts/fuzz.sh --minimize [HARNESS...]  cut each corpus (with what runs added in
#                                            build-fuzz/corpus/) to what covers the most
#                                            within a budget (FUZZ_CORPUS_KIB; 96 KiB for
#                                            fuzz_api, 64 fuzz_threads, 32 the others)
#
# The corpus of harness H is fuzz/corpus/H/ (committed: a small seed set).
# A run adds what it finds there; --smoke adds it to build-fuzz/corpus/H/
# instead, so the test command leaves the tree as it was. The inputs of past
# findings, fuzz/crashes/H/, run first every time. fuzz_corrupt is built
# only when the secure library's target (brisk_core_secure) exists.
#
#   FUZZ_NICE=10     nice level of the fuzzers
#   FUZZ_CORRUPT_CORE=ON  build fuzz_corrupt against the release core, which
#                    checks nothing (to work on the harness: it finds at once)
#   FUZZ_ARGS=...    more libFuzzer flags (-jobs=2, -seed=1, ...)
#   JOBS=N           parallel build jobs (default: nproc)
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
BUILD=$ROOT/build-fuzz
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
MODE=run
case ${1:-} in
  --smoke) MODE=smoke; shift ;;
  --minimize) MODE=minimize; shift ;;
  -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
SECONDS_EACH=60
if [ "$MODE" != minimize ] && [[ ${1:-} =~ ^[0-9]+$ ]]; then SECONDS_EACH=$1; shift; fi
WANTED=("$@")

# libFuzzer's flags per harness: inputs are programs of calls, so a few KiB
# is room for hundreds of them; each harness bounds what one input may
# allocate (64 MiB a block, a few hundred MiB live), well inside the RSS limit.
flags_for() {
  case $1 in
    fuzz_options) echo "-max_len=1024 -rss_limit_mb=2048 -timeout=30 -dict=$ROOT/fuzz/options.dict" ;;
    fuzz_corrupt) echo "-max_len=2048 -rss_limit_mb=2048 -timeout=60" ;;
    fuzz_trace) echo "-max_len=8192 -rss_limit_mb=2048 -timeout=30" ;;  # a trace: chunks of events
    *) echo "-max_len=4096 -rss_limit_mb=3072 -timeout=60" ;;
  esac
}

# ---- the toolchain ------------------------------------------------------------
have_libfuzzer() {
  command -v clang >/dev/null 2>&1 && command -v clang++ >/dev/null 2>&1 &&
    echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' |
      clang -x c -fsanitize=fuzzer,address,undefined -o /dev/null - >/dev/null 2>&1
}
if ! have_libfuzzer; then
  echo "fuzz: installing clang and libclang-rt-14-dev"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then command -v sudo >/dev/null 2>&1 && sudo=sudo; fi
  if [ "$(id -u)" -eq 0 ] || [ -n "$sudo" ]; then
    export DEBIAN_FRONTEND=noninteractive
    { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev; } \
      >/dev/null 2>&1 || true
  fi
  have_libfuzzer || { echo "fuzz: SKIPPED: clang with libFuzzer (libclang-rt-14-dev) is not available"; exit 77; }
fi

# ---- the build ----------------------------------------------------------------
mkdir -p "$BUILD"
echo "fuzz: building in build-fuzz/ (log: build-fuzz/build.log)"
if ! { cmake -S "$ROOT" -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
         -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRISK_SANITIZE=address,undefined -DBRISK_BUILD_FUZZ=ON \
         -DBRISK_FUZZ_CORRUPT_CORE="${FUZZ_CORRUPT_CORE:-OFF}" -DBRISK_BUILD_TESTS=OFF -DBRISK_BUILD_BENCH=OFF \
         -DBRISK_INSTALL=OFF &&
       cmake --build "$BUILD" -j"$JOBS" --target brisk_fuzzers; } >"$BUILD/build.log" 2>&1; then
  tail -40 "$BUILD/build.log"
  echo "fuzz: FAILED: the build (see build-fuzz/build.log)"
  exit 1
fi
mapfile -t BUILT < "$BUILD/fuzz/harnesses.txt"
grep -qx fuzz_corrupt "$BUILD/fuzz/harnesses.txt" ||
  echo "fuzz: fuzz_corrupt not built: no brisk_core_secure target (the secure library) in this tree"
HARNESSES=()
for h in "${WANTED[@]:-${BUILT[@]}}"; do
  if printf '%s\n' "${BUILT[@]}" | grep -qx "$h"; then HARNESSES+=("$h")
  else echo "fuzz: no harness $h (built: ${BUILT[*]})"; exit 2; fi
done

export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

kib_of() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print int(s / 1024) }'; }

# ---- minimize ---------------------------------------------------------------------
# The committed corpus stays within a budget: every edge any input reaches,
# then the most features per byte (fuzz/select_corpus.py).
budget_for() {
  case $1 in
    fuzz_api) echo 96 ;;
    fuzz_threads) echo 64 ;;
    *) echo 32 ;;
  esac
}
if [ "$MODE" = minimize ]; then
  for h in "${HARNESSES[@]}"; do
    dir=$ROOT/fuzz/corpus/$h empty=$BUILD/merged/$h control=$BUILD/$h-merge.control
    rm -rf "$empty" "$control" && mkdir -p "$empty" "$dir" "$BUILD/corpus/$h" "$BUILD/crashes"
    # shellcheck disable=SC2046
    "$BUILD/fuzz/$h" -merge=1 -merge_control_file="$control" -artifact_prefix="$BUILD/crashes/$h-merge-" \
      $(flags_for "$h") "$empty" "$dir" "$BUILD/corpus/$h" \
      >"$BUILD/$h-merge.log" 2>&1 || { echo "fuzz: $h: merge failed (see build-fuzz/$h-merge.log)"; exit 1; }
    mapfile -t keep < <(python3 "$ROOT/fuzz/select_corpus.py" "$control" $(( ${FUZZ_CORPUS_KIB:-$(budget_for "$h")} * 1024 )))
    [ ${#keep[@]} -gt 0 ] || { echo "fuzz: $h: nothing selected (see build-fuzz/$h-merge.log)"; exit 1; }
    rm -rf "$empty" && mkdir -p "$empty" && cp "${keep[@]}" "$empty"/ && rm -rf "$dir" && mv "$empty" "$dir"
    echo "fuzz: $h: fuzz/corpus/$h now holds $(ls "$dir" | wc -l) inputs, $(kib_of "$dir") KiB"
  done
  exit 0
fi

# ---- run ----------------------------------------------------------------------------
# stat_sum NAME LOG...: libFuzzer's final stat::NAME added up over the logs
# (empty when none has it).
stat_sum() {
  local name=$1; shift
  sed -n "s/^stat::$name: *//p" "$@" | awk '{ s += $1 } END { if (NR) print s }'
}

SUMMARY=()
FAILED=0
for h in "${HARNESSES[@]}"; do
  seeds=$ROOT/fuzz/corpus/$h
  mkdir -p "$seeds" "$BUILD/crashes" "$BUILD/corpus/$h"
  corpus=("$seeds")
  [ "$MODE" = smoke ] && corpus=("$BUILD/corpus/$h" "$seeds")
  [ -d "$ROOT/fuzz/crashes/$h" ] && corpus+=("$ROOT/fuzz/crashes/$h") # past findings, replayed first
  log=$BUILD/$h.log
  echo "fuzz: $h for ${SECONDS_EACH}s (log: build-fuzz/$h.log)"
  # Run in build-fuzz/: with -jobs=N in FUZZ_ARGS, libFuzzer writes each
  # job's log to fuzz-<job>.log in its working directory.
  rm -f "$BUILD"/fuzz-*.log
  # shellcheck disable=SC2046,SC2086
  (cd "$BUILD" && nice -n "${FUZZ_NICE:-10}" "$BUILD/fuzz/$h" $(flags_for "$h") -max_total_time="$SECONDS_EACH" \
    -print_final_stats=1 -artifact_prefix="$BUILD/crashes/$h-" ${FUZZ_ARGS:-} "${corpus[@]}") >"$log" 2>&1
  rc=$?
  # The jobs' logs, when there are any, hold the figures (the main log
  # repeats one of them): executions and rates summed over the jobs.
  jobs=()
  compgen -G "$BUILD/fuzz-*.log" >/dev/null && jobs=("$BUILD"/fuzz-*.log)
  figures=("${jobs[@]:-$log}")
  execs=$(stat_sum number_of_executed_units "${figures[@]}")
  rate=$(stat_sum average_exec_per_sec "${figures[@]}")
  files=$(ls "${corpus[0]}" | wc -l)
  kib=$(kib_of "${corpus[0]}")
  line=$(printf '%-14s %5ss %10s execs %6s/s  corpus %s inputs, %s KiB' "$h" "$SECONDS_EACH" "${execs:-?}" \
         "${rate:-?}" "$files" "$kib")
  if [ "$rc" -ne 0 ]; then
    FAILED=1
    crash=$(sed -n "s/.*Test unit written to \(.*\)$/\1/p" "$log" "${jobs[@]}" | tail -1)
    grep -h -E -m1 -B2 -A12 "^fuzz:|ERROR: (Address|Undefined|libFuzzer)|runtime error" "$log" "${jobs[@]}" | head -40
    SUMMARY+=("$line  FAILED (exit $rc)${crash:+; input: ${crash#"$ROOT"/}}")
    [ -n "$crash" ] && SUMMARY+=("    reproduce: build-fuzz/fuzz/$h ${crash#"$ROOT"/}")
  else
    SUMMARY+=("$line  ok")
  fi
done

echo
echo "fuzz summary (${MODE}, ${SECONDS_EACH}s each):"
printf '  %s\n' "${SUMMARY[@]}"
exit "$FAILED"

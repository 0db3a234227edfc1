#!/usr/bin/env bash
# Runs every brisk test on a fresh Debian 12 machine:
#   1. installs what is missing (cmake, g++, libgtest-dev, python3, git, sqlite3,
#      clang-format; redis-server, strace and valgrind if it can)
#   2. Release build in build/ and its ctest (GoogleTest suites, programs under
#      LD_PRELOAD=libbrisk.so, the statically linked C++ test)
#   3. scripts/lint.sh --objects build (layers, system calls, file sizes,
#      prototypes, the symbol graph of the Release objects, clang-format)
#   4. clang: the Release build with clang/clang++ in build-clang/, which must
#      be free of warnings (as the gcc build must), and its GoogleTest suites
#      (the programs under LD_PRELOAD and the install test run with gcc only)
#   5. arm64: the library and the core unit tests cross-built for aarch64 in
#      build-arm64/ (Debian's gcc-aarch64-linux-gnu, GoogleTest from its
#      sources) and run under qemu-aarch64, test_page_size at 4, 16, 64 KiB
#   6. rust: rust/test.sh, cargo test of the Rust crates in rust/ (brisk-sys
#      builds the C core with the cc crate) on the release, checked and
#      secure libraries, the nightly allocator_api tests when rustup has a
#      nightly, a fresh Cargo project under /tmp with brisk as its global
#      allocator (rust/outside-project.sh), the dynamic-tls feature's tests
#      and a cdylib with it loaded late by python3 (rust/cdylib-dlopen.sh);
#      skipped without rustup's cargo
#   7. -DBRISK_SANITIZE=address,undefined in build-asan/ and its ctest
#   8. -DBRISK_SANITIZE=thread in build-tsan/ and its ctest
#   9. fuzz: scripts/fuzz.sh --smoke 15, every libFuzzer harness of fuzz/ for
#      15 seconds (BRISK_FUZZ_SECONDS) from its committed corpus; fails when
#      one finds a crash (built with clang in build-fuzz/)
#  10. scripts/bench.sh --smoke, when that script exists
# clang, arm64 and fuzz install their tools when missing, and are skipped
# with a message when that fails. Exits non-zero when anything failed; ends
# with a summary.
#
#   scripts/test.sh                 everything
#   scripts/test.sh release asan    only the named stages (deps release lint clang arm64 rust asan tsan fuzz bench)
#   JOBS=N                          parallel build and test jobs (default: nproc)
#   BRISK_ASAN_SCALE / BRISK_TSAN_SCALE   BRISK_TEST_SCALE for the sanitizer runs
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
LOGDIR="$ROOT/build-logs"
mkdir -p "$LOGDIR"

STAGES=("$@")
[ ${#STAGES[@]} -gt 0 ] || STAGES=(deps release lint clang arm64 rust asan tsan fuzz bench)
want() { local s; for s in "${STAGES[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

SUMMARY=()
FAILED=0
TOTAL_PASS=0
TOTAL_FAIL=0
TOTAL_SKIP=0
T_START=$(date +%s)

note() { printf '\n==== %s ====\n' "$*"; }
record() {  # record <stage> <status> <seconds> [detail]
  SUMMARY+=("$(printf '%-16s %-5s %5ss  %s' "$1" "$2" "$3" "${4:-}")")
  [ "$2" = FAIL ] && FAILED=1
  return 0
}

# ---- 1. dependencies ---------------------------------------------------------
install_deps() {
  local missing=() cmd pkg
  for pair in cmake:cmake g++:g++ gcc:gcc make:make python3:python3 git:git sqlite3:sqlite3 \
              awk:gawk clang-format:clang-format pkg-config:pkgconf; do
    cmd=${pair%%:*}; pkg=${pair#*:}
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
  # Optional: the preload tests that need them are skipped (exit 77) without them.
  local optional=()
  command -v redis-server >/dev/null 2>&1 || optional+=(redis-server)
  command -v node >/dev/null 2>&1 || command -v nodejs >/dev/null 2>&1 || optional+=(nodejs)
  command -v strace >/dev/null 2>&1 || optional+=(strace)
  command -v valgrind >/dev/null 2>&1 || optional+=(valgrind)
  if [ ${#missing[@]} -eq 0 ] && [ ${#optional[@]} -eq 0 ]; then
    echo "all tools present"
    return 0
  fi
  echo "installing: ${missing[*]} ${optional[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "need root (or sudo) to install ${missing[*]} ${optional[*]}"; return 1; }
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq || return 1
  if [ ${#missing[@]} -gt 0 ]; then
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" || return 1
  fi
  if [ ${#optional[@]} -gt 0 ]; then
    $sudo apt-get install -y -qq --no-install-recommends "${optional[@]}" ||
      echo "could not install ${optional[*]}: their tests will be skipped"
  fi
  return 0
}

# install_optional <stage> <packages...>: installs them (apt-get) for a stage
# that can be skipped; false, with a message, when that is not possible.
install_optional() {
  local stage=$1 sudo=""; shift
  echo "$stage: installing $*"
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "$stage: need root (or sudo) to install $*"; return 1; }
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "$@"; } >/dev/null 2>&1 ||
    { echo "$stage: could not install $*"; return 1; }
}

# ---- helpers -----------------------------------------------------------------
# run_ctest <stage> <build-dir> [env...] [-- ctest args...]: runs ctest there,
# adds to the totals. An argument starting with - ends the environment.
run_ctest() {
  local stage=$1 dir=$2; shift 2
  local log="$LOGDIR/$stage-ctest.log" t0 rc launcher=() envs=()
  while [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; do envs+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  t0=$(date +%s)
  if [ -n "${TSAN_LAUNCHER:-}" ] && [ "$stage" = tsan ]; then launcher=($TSAN_LAUNCHER); fi
  (cd "$dir" && env "${envs[@]}" "${launcher[@]}" ctest --output-on-failure -j"$JOBS" --timeout 900 "$@") 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  local total failed skipped passed
  total=$(sed -nE 's/.*tests failed out of ([0-9]+).*/\1/p' "$log" | tail -1)
  failed=$(sed -nE 's/.* ([0-9]+) tests? failed out of.*/\1/p' "$log" | tail -1)
  skipped=$(sed -n '/The following tests did not run/,/^$/p' "$log" | grep -cE '\((Skipped|Disabled)\)' || true)
  if [ -z "$total" ]; then
    record "$stage tests" FAIL $(( $(date +%s) - t0 )) "ctest did not finish (see $log)"
    TOTAL_FAIL=$((TOTAL_FAIL + 1))
    return
  fi
  failed=${failed:-0}
  passed=$((total - failed - skipped))
  TOTAL_PASS=$((TOTAL_PASS + passed))
  TOTAL_FAIL=$((TOTAL_FAIL + failed))
  TOTAL_SKIP=$((TOTAL_SKIP + skipped))
  local status=ok
  if [ "$rc" -ne 0 ] || [ "$failed" -ne 0 ]; then status=FAIL; fi
  local detail="$passed passed, $failed failed, $skipped skipped"
  if [ "$failed" -ne 0 ]; then
    detail+=": $(sed -n '/The following tests FAILED/,$p' "$log" | grep -E '^\s+[0-9]+ - ' |
                 sed -E 's/^\s+[0-9]+ - //; s/ \(.*//' | tr '\n' ' ')"
  fi
  record "$stage tests" "$status" $(( $(date +%s) - t0 )) "$detail"
}

# build <stage> <dir> <cmake args...> [-- <build targets...>]
# The release and clang builds must not warn: every object is rebuilt (a
# warning of an object built earlier would not show again).
build() {
  local stage=$1 dir=$2; shift 2
  local t0 log="$LOGDIR/$stage-build.log" args=() targets=() clean=()
  if [ "$stage" = release ] || [ "$stage" = clang ]; then clean=(--clean-first); fi
  while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
  [ $# -gt 0 ] && { shift; for t in "$@"; do targets+=(--target "$t"); done; }
  t0=$(date +%s)
  note "$stage: configure and build in $dir"
  if cmake -S "$ROOT" -B "$ROOT/$dir" -DBRISK_BUILD_TESTS=ON "${args[@]}" >"$log" 2>&1 &&
     cmake --build "$ROOT/$dir" -j"$JOBS" "${clean[@]}" "${targets[@]}" >>"$log" 2>&1; then
    tail -3 "$log"
    if [ "$stage" = release ] || [ "$stage" = clang ]; then
      if grep -q "warning:" "$log"; then
        grep -A3 "warning:" "$log" | head -40
        record "$stage build" FAIL $(( $(date +%s) - t0 )) "$(grep -c "warning:" "$log") compiler warnings, see $log"
        return 1
      fi
    fi
    record "$stage build" ok $(( $(date +%s) - t0 ))
    return 0
  fi
  tail -60 "$log"
  record "$stage build" FAIL $(( $(date +%s) - t0 )) "see $log"
  return 1
}

# ThreadSanitizer of GCC 12 cannot map its shadow with a high ASLR entropy
# (vm.mmap_rnd_bits > 28): then run its tests with ASLR off.
tsan_launcher() {
  local probe
  probe=$(find "$ROOT/build-tsan/tests" -maxdepth 1 -name test_api -type f | head -1)
  [ -n "$probe" ] || return 0
  if "$probe" --gtest_list_tests 2>&1 | grep -q "unexpected memory mapping"; then
    if setarch "$(uname -m)" -R true 2>/dev/null; then
      echo "TSan needs ASLR off here: running its tests under setarch -R"
      TSAN_LAUNCHER="setarch $(uname -m) -R"
    fi
  fi
}

# ---- stages ------------------------------------------------------------------
if want deps; then
  note "dependencies"
  t0=$(date +%s)
  if install_deps; then record deps ok $(( $(date +%s) - t0 ));
  else record deps FAIL $(( $(date +%s) - t0 )) "apt-get failed"; fi
fi

if want release; then
  # The checked library with memcheck's annotations where valgrind's headers
  # are (tests/preload/memcheck.sh runs it under valgrind; skipped without).
  valgrind_option=-DBRISK_VALGRIND=OFF
  [ -f /usr/include/valgrind/memcheck.h ] && valgrind_option=-DBRISK_VALGRIND=ON
  if build release build -DCMAKE_BUILD_TYPE=Release -DBRISK_SANITIZE= "$valgrind_option"; then
    note "release: ctest"
    run_ctest release build
  fi
fi

if want lint; then
  note "lint: scripts/lint.sh --objects build"
  t0=$(date +%s)
  log="$LOGDIR/lint.log"
  bash scripts/lint.sh --objects build 2>&1 | tee "$log"
  if [ "${PIPESTATUS[0]}" -eq 0 ]; then
    record lint ok $(( $(date +%s) - t0 ))
  else
    record lint FAIL $(( $(date +%s) - t0 )) "$(tail -1 "$log" | sed 's/^lint: //'), see $log"
  fi
fi

if want clang; then
  if command -v clang >/dev/null 2>&1 && command -v clang++ >/dev/null 2>&1 || install_optional clang clang; then
    if build clang build-clang -DCMAKE_BUILD_TYPE=Release -DBRISK_SANITIZE= \
         -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++; then
      note "clang: ctest (GoogleTest suites and the other in-process tests)"
      run_ctest clang build-clang -LE "preload|install"
    fi
  else
    record clang skip 0 "clang could not be installed"
  fi
fi

# The core unit tests that run on arm64 (ctest labels), each gtest case in
# its own process under qemu-user through CMAKE_CROSSCOMPILING_EMULATOR.
ARM64_TESTS=(test_api test_align test_realloc test_huge test_threads test_heaps test_pools test_stats
             test_check_visit test_page_size)
if want arm64; then
  have_cross() {
    command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 &&
      command -v qemu-aarch64 >/dev/null 2>&1 && [ -f /usr/src/googletest/CMakeLists.txt ]
  }
  if have_cross || { install_optional arm64 gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user libgtest-dev &&
                     have_cross; }; then
    if build arm64 build-arm64 -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/aarch64-linux-gnu.cmake" \
         -DCMAKE_BUILD_TYPE=Release -DBRISK_SANITIZE= -- brisk brisk_static brisk_core "${ARM64_TESTS[@]}"; then
      note "arm64: ctest under qemu-aarch64"
      labels=$(IFS='|'; echo "${ARM64_TESTS[*]}")
      run_ctest arm64 build-arm64 BRISK_TEST_SCALE="${BRISK_ARM64_SCALE:-0.25}" -- \
        -L "^(${labels/test_page_size/page_size})\$"
    fi
  else
    record arm64 skip 0 "the aarch64 cross compilers or qemu-user could not be installed"
  fi
fi

# The Rust crates (rust/README.md). They need a cargo that reads crates.io's
# sparse index (1.68+, rustup's): Debian 12's cargo reads the index through
# git only, which this machine cannot reach, so it is not installed for this.
cargo_for_rust() {
  local c v
  for c in "$(command -v cargo 2>/dev/null)" "${CARGO_HOME:-$HOME/.cargo}/bin/cargo"; do
    [ -n "$c" ] && [ -x "$c" ] || continue
    v=$("$c" --version 2>/dev/null | sed -nE 's/^cargo 1\.([0-9]+).*/\1/p')
    if [ -n "$v" ] && [ "$v" -ge 68 ]; then
      echo "$c"
      return 0
    fi
  done
  return 1
}
if want rust; then
  # The crates' one dependency (cc, pinned in rust/Cargo.lock) comes from
  # crates.io: without it nothing can be built, which is a machine's limit,
  # not a failure of brisk.
  if RUST_CARGO=$(cargo_for_rust) &&
     ! timeout 300 "$RUST_CARGO" fetch --locked --manifest-path rust/Cargo.toml >"$LOGDIR/rust-fetch.log" 2>&1; then
    record rust skip 0 "crates.io unreachable: rust/'s dependencies could not be fetched (see $LOGDIR/rust-fetch.log)"
  elif [ -n "${RUST_CARGO:-}" ]; then
    note "rust: rust/test.sh ($("$RUST_CARGO" --version))"
    t0=$(date +%s)
    log="$LOGDIR/rust.log"
    # rust/test.sh builds C with the cc crate: -j2 at most, as the rest.
    CARGO=$RUST_CARGO CARGO_BUILD_JOBS=$JOBS PATH="$(dirname "$RUST_CARGO"):$PATH" bash rust/test.sh 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    read -r passed failed skipped < <(sed -nE 's/^rust: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/\1 \2 \3/p' "$log" | tail -1)
    if [ -z "${passed:-}" ]; then
      record "rust tests" FAIL $(( $(date +%s) - t0 )) "rust/test.sh did not finish (see $log)"
      TOTAL_FAIL=$((TOTAL_FAIL + 1))
    else
      TOTAL_PASS=$((TOTAL_PASS + passed))
      TOTAL_FAIL=$((TOTAL_FAIL + failed))
      TOTAL_SKIP=$((TOTAL_SKIP + skipped))
      status=ok
      if [ "$rc" -ne 0 ] || [ "$failed" -ne 0 ]; then status=FAIL; fi
      detail="$passed passed, $failed failed, $skipped skipped"
      [ "$status" = ok ] || detail+=": $(grep '^rust: failed:' "$log" | sed 's/^rust: failed: //'), see $log"
      record "rust tests" "$status" $(( $(date +%s) - t0 )) "$detail"
    fi
  else
    record rust skip 0 "no cargo 1.68+ (rustup's); Debian's cargo cannot read crates.io's sparse index"
  fi
fi

SAN_COMMON="halt_on_error=1:print_stacktrace=1"
# The allocator (C) keeps its -O2; the C++ tests build at -O1, which halves
# their compile time under the sanitizers.
SAN_CXX_FLAGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g -DNDEBUG")
if want asan; then
  if build asan build-asan "${SAN_CXX_FLAGS[@]}" -DBRISK_SANITIZE=address,undefined; then
    note "asan+ubsan: ctest"
    run_ctest asan build-asan BRISK_TEST_SCALE="${BRISK_ASAN_SCALE:-0.5}" \
      ASAN_OPTIONS="$SAN_COMMON:abort_on_error=1:detect_leaks=0:strict_string_checks=1:check_initialization_order=1" \
      UBSAN_OPTIONS="$SAN_COMMON"
  fi
fi

if want tsan; then
  if build tsan build-tsan "${SAN_CXX_FLAGS[@]}" -DBRISK_SANITIZE=thread; then
    TSAN_LAUNCHER=""
    tsan_launcher
    note "tsan: ctest"
    run_ctest tsan build-tsan BRISK_TEST_SCALE="${BRISK_TSAN_SCALE:-0.25}" \
      TSAN_OPTIONS="$SAN_COMMON:second_deadlock_stack=1"
  fi
fi

if want fuzz; then
  note "fuzz: scripts/fuzz.sh --smoke ${BRISK_FUZZ_SECONDS:-15}"
  t0=$(date +%s)
  JOBS=$JOBS bash scripts/fuzz.sh --smoke "${BRISK_FUZZ_SECONDS:-15}" 2>&1 | tee "$LOGDIR/fuzz.log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 0 ]; then
    record fuzz ok $(( $(date +%s) - t0 )) "$(grep -c ' ok$' "$LOGDIR/fuzz.log") harnesses"
  elif [ "$rc" -eq 77 ]; then
    record fuzz skip $(( $(date +%s) - t0 )) "clang with libFuzzer could not be installed"
  else
    record fuzz FAIL $(( $(date +%s) - t0 )) "$(grep -c ' FAILED' "$LOGDIR/fuzz.log") harness(es) failed, see $LOGDIR/fuzz.log"
  fi
fi

if want bench; then
  if [ -f scripts/bench.sh ]; then
    note "benchmark smoke: scripts/bench.sh --smoke"
    t0=$(date +%s)
    if bash scripts/bench.sh --smoke 2>&1 | tee "$LOGDIR/bench-smoke.log"; [ "${PIPESTATUS[0]}" -eq 0 ]; then
      record "bench smoke" ok $(( $(date +%s) - t0 ))
    else
      record "bench smoke" FAIL $(( $(date +%s) - t0 )) "see $LOGDIR/bench-smoke.log"
    fi
  else
    record "bench smoke" skip 0 "scripts/bench.sh not there yet"
  fi
fi

note "brisk test summary ($(( $(date +%s) - T_START )) s, logs in build-logs/)"
for line in "${SUMMARY[@]}"; do echo "$line"; done
if [ "$FAILED" -ne 0 ]; then echo "RESULT: FAILED"; else echo "RESULT: all passed"; fi
echo "total: $TOTAL_PASS passed, $TOTAL_FAIL failed, $TOTAL_SKIP skipped"
exit "$FAILED"

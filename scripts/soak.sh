#!/usr/bin/env bash
# Soak: runs brisk's stress programs for MINUTES (default 10) and fails on the
# first error. Not part of the test command; run it after changes to the core.
#
#   scripts/soak.sh [MINUTES]
#
# Each round (about a minute) runs tests/soak/soak.c -- threads allocating
# random sizes over every tier (16 B .. 64 MiB), random alignments (up to
# 1 GiB), calloc, realloc up and down, cross-thread frees, thread churn, every
# block's pattern checked -- under one configuration in turn:
#   release library, default options | BRISK_CACHE_CAP=0 | BRISK_PURGE_DELAY_MS=0
#   | BRISK_REALTIME=1 | the checked library | ThreadSanitizer (when build-tsan
#   exists: scripts/test.sh tsan makes it)
# then the multi-threaded GoogleTest stress cases once (huge realloc races,
# threads, churn). Logs go to build-logs/soak-*.log.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
MINUTES=${1:-10}
ROUND=${SOAK_ROUND_SECONDS:-50}
LOGDIR=$ROOT/build-logs
mkdir -p "$LOGDIR"

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBRISK_SANITIZE= >"$LOGDIR/soak-build.log" 2>&1 &&
  cmake --build build -j"$(nproc)" >>"$LOGDIR/soak-build.log" 2>&1 ||
  { echo "soak: build failed (see $LOGDIR/soak-build.log)"; exit 1; }
if [ -d build-tsan ]; then
  cmake --build build-tsan -j"$(nproc)" --target brisk_soak >>"$LOGDIR/soak-build.log" 2>&1 || true
fi

CONFIGS=("release" "release BRISK_CACHE_CAP=0" "release BRISK_PURGE_DELAY_MS=0" "release BRISK_REALTIME=1" "checked")
[ -x build-tsan/tests/brisk_soak ] && CONFIGS+=("tsan")
TSAN_RUN=()
if [ -x build-tsan/tests/brisk_soak ] &&
   build-tsan/tests/brisk_soak 0.1 1 2>&1 | grep -q "unexpected memory mapping"; then
  TSAN_RUN=(setarch "$(uname -m)" -R)
fi

end=$(( $(date +%s) + MINUTES * 60 ))
round=0
while [ "$(date +%s)" -lt "$end" ]; do
  cfg=${CONFIGS[$((round % ${#CONFIGS[@]}))]}
  round=$((round + 1))
  log="$LOGDIR/soak-$round.log"
  set -- $cfg
  kind=$1; shift
  case $kind in
    release) cmd=(env "$@" build/tests/brisk_soak "$ROUND") ;;
    checked) cmd=(build/tests/brisk_soak_checked "$ROUND") ;;
    tsan) cmd=(env TSAN_OPTIONS=halt_on_error=1 "${TSAN_RUN[@]}" build-tsan/tests/brisk_soak "$((ROUND / 2))" 4) ;;
  esac
  echo "soak round $round: $cfg"
  if ! timeout $((ROUND * 4 + 60)) "${cmd[@]}" >"$log" 2>&1; then
    echo "soak: FAILED in round $round ($cfg):"; tail -20 "$log"; exit 1
  fi
  tail -1 "$log"
  for t in "test_huge --gtest_filter=HugeRealloc.*" "test_threads" "test_churn"; do
    set -- $t
    if ! BRISK_TEST_SCALE=2 timeout 600 "build/tests/$1" "${@:2}" >"$log.gtest" 2>&1; then
      echo "soak: FAILED in round $round: $t"; grep -E "Failure|FAILED|Expected|Which" "$log.gtest" | head -20; exit 1
    fi
  done
done
echo "soak: $round rounds in $MINUTES minutes: clean"

#!/usr/bin/env bash
# The Rust crates' tests, as scripts/test.sh's `rust` stage runs them:
#   1. cargo test of the workspace (brisk-sys and brisk: unit, integration
#      and doc tests) on the release library,
#   2. the same on the checked library (--features checked), then
#   3. on the secure library (--features secure),
#   4. with a nightly toolchain, when rustup has one: the allocator_api
#      feature's tests (skipped without),
#   5. rust/outside-project.sh: a fresh project under /tmp with brisk as its
#      global allocator,
#   6. on the C core built with the dynamic-tls feature (global-dynamic TLS),
#      then rust/cdylib-dlopen.sh: a cdylib with that feature, loaded late by
#      python3 (skipped without python3 or readelf).
# Ends with "rust: N passed, M failed, K skipped" (cargo's test counts, plus
# one for the outside project); exits non-zero when anything failed.
#
#   rust/test.sh                  everything
#   RUST_TEST_VARIANTS="release"  only some of: release checked secure nightly outside dynamic-tls
set -uo pipefail

RUST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CARGO=${CARGO:-cargo}
VARIANTS=${RUST_TEST_VARIANTS:-release checked secure nightly outside dynamic-tls}
LOG=$(mktemp /tmp/brisk-rust-test.XXXXXX)
trap 'rm -f "$LOG"' EXIT
PASSED=0
FAILED=0
SKIPPED=0
FAILURES=()

# step <name> <command...>: runs it, adds cargo's test counts to the totals.
step() {
  local name=$1 rc p f i
  shift
  printf '\n---- rust: %s ----\n' "$name"
  "$@" 2>&1 | tee "$LOG"
  rc=${PIPESTATUS[0]}
  read -r p f i < <(sed -nE 's/^test result: .* ([0-9]+) passed; ([0-9]+) failed; ([0-9]+) ignored.*/\1 \2 \3/p' "$LOG" |
    awk '{p += $1; f += $2; i += $3} END {print p + 0, f + 0, i + 0}')
  PASSED=$((PASSED + ${p:-0}))
  FAILED=$((FAILED + ${f:-0}))
  SKIPPED=$((SKIPPED + ${i:-0}))
  if [ "$rc" -ne 0 ]; then
    # A build failure counts as one failed test.
    [ "${f:-0}" -gt 0 ] || FAILED=$((FAILED + 1))
    FAILURES+=("$name")
  fi
}

wants() { case " $VARIANTS " in *" $1 "*) return 0 ;; esac; return 1; }

cd "$RUST_DIR" || exit 1
"$CARGO" --version || { echo "rust: no cargo"; exit 1; }
if wants release; then step "cargo test (release library)" "$CARGO" test --no-fail-fast --workspace; fi
if wants checked; then step "cargo test --features checked" "$CARGO" test --no-fail-fast --workspace --features brisk/checked,brisk-sys/checked; fi
if wants secure; then step "cargo test --features secure" "$CARGO" test --no-fail-fast --workspace --features brisk/secure,brisk-sys/secure; fi
if wants nightly; then
  # Only a nightly rustup already has: none is downloaded.
  if command -v rustup >/dev/null 2>&1 && rustup toolchain list 2>/dev/null | grep -q '^nightly' &&
    "$CARGO" +nightly --version >/dev/null 2>&1; then
    step "cargo +nightly test --features allocator_api" \
      "$CARGO" +nightly test --no-fail-fast -p brisk --features allocator_api --lib --test allocator_api
  else
    echo "rust: no nightly toolchain: the allocator_api tests are skipped"
    SKIPPED=$((SKIPPED + 1))
  fi
fi
if wants outside; then
  printf '\n---- rust: a project outside the tree ----\n'
  if CARGO=$CARGO bash "$RUST_DIR/outside-project.sh"; then
    PASSED=$((PASSED + 1))
  else
    FAILED=$((FAILED + 1))
    FAILURES+=("outside project")
  fi
fi

if wants dynamic-tls; then
  step "cargo test --features dynamic-tls" "$CARGO" test --no-fail-fast --workspace \
    --features brisk/dynamic-tls,brisk-sys/dynamic-tls
  printf '\n---- rust: a cdylib with dynamic-tls, loaded late by python3 ----\n'
  rc=0
  CARGO=$CARGO bash "$RUST_DIR/cdylib-dlopen.sh" || rc=$?
  case $rc in
    0) PASSED=$((PASSED + 1)) ;;
    77) SKIPPED=$((SKIPPED + 1)) ;;
    *)
      FAILED=$((FAILED + 1))
      FAILURES+=("cdylib dlopen")
      ;;
  esac
fi

[ ${#FAILURES[@]} -eq 0 ] || echo "rust: failed: ${FAILURES[*]}"
echo "rust: $PASSED passed, $FAILED failed, $SKIPPED skipped"
[ "$FAILED" -eq 0 ]

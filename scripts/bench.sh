#!/usr/bin/env bash
# scripts/bench.sh: brisk's benchmark suite in one command (see bench/README.md).
#
#   scripts/bench.sh [--quick | --full | --smoke] [--alloc NAME=/path/lib.so ...]
#                    [--only WORKLOAD,...] [--reps N] [--out DIR]
#                    [--no-build] [--no-install | --install] [--no-plots] [--secure]
#
#   --quick   the default: every workload, 3 repetitions, about 4 minutes on 2 cores
#   --full    timed windows about 5x longer, 5 repetitions: about 20-25 minutes
#   --smoke   tiny sizes, 1 repetition, 10-20 seconds with the build of bench/
#             (no callgrind); exits non-zero if any run crashed,
#             timed out or failed its check (the test suite runs this). It installs
#             nothing and draws plots only if the venv already has matplotlib.
#   --secure  also mimalloc 2.1.7 and snmalloc built from source, plain and
#             hardened (bench/secure_peers.sh): the report then gives the cost
#             of each hardening over its own plain build, beside brisk-secure's
#
# Steps: build brisk (cmake), install the missing peer allocators, strace and
# valgrind (apt-get, as root), build bench/ programs, make the matplotlib venv
# (.venv-bench), then run bench/run.py, which writes bench/results/<time>-<mode>/
# (and bench/results/latest).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

MODE=quick
BUILD=1
INSTALL=auto
PLOTS=1
SECURE_PEERS=0
ALLOCS=()
PASS=()
VENV="$ROOT/.venv-bench"

say() { echo "bench: $*" >&2; }
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --alloc | --only | --reps | --out)
      [ $# -ge 2 ] || { say "$1 needs a value"; exit 2; } ;;
  esac
  case "$1" in
    --quick | --full | --smoke) MODE=${1#--} ;;
    --alloc) ALLOCS+=("$2"); shift ;;
    --alloc=*) ALLOCS+=("${1#*=}") ;;
    --only | --reps | --out) PASS+=("$1" "$2"); shift ;;
    --no-build) BUILD=0 ;;
    --no-install) INSTALL=0 ;;
    --install) INSTALL=1 ;;
    --no-plots) PLOTS=0 ;;
    --secure) SECURE_PEERS=1 ;;
    -h | --help) usage; exit 0 ;;
    *) say "unknown option $1"; usage >&2; exit 2 ;;
  esac
  shift
done
if [ "$INSTALL" = auto ]; then
  if [ "$MODE" = smoke ]; then INSTALL=0; else INSTALL=1; fi
fi

# ---- 1. brisk ---------------------------------------------------------------
mkdir -p bench/build
BRISK_LIB="$ROOT/build/libbrisk.so"
MISSING=()
if [ "$BUILD" = 1 ]; then
  say "building brisk (log: bench/build/brisk-build.log)"
  if ! { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release &&
         cmake --build build -j2 --target brisk brisk_secure; } > bench/build/brisk-build.log 2>&1; then
    say "brisk did not build; it is left out of this run (see bench/build/brisk-build.log):"
    grep -m5 -E 'error|Error' bench/build/brisk-build.log | sed 's/^/    /' >&2 || true
    MISSING+=(--missing "brisk=the build failed")
    BRISK_LIB=""
  fi
fi
if [ -n "$BRISK_LIB" ] && [ ! -f "$BRISK_LIB" ]; then
  say "brisk: $BRISK_LIB does not exist yet; brisk is left out of this run"
  MISSING+=(--missing "brisk=build/libbrisk.so not built")
  BRISK_LIB=""
fi

# ---- 2. peers -----------------------------------------------------------------
ARCH=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
LIBDIR=/usr/lib/$ARCH
PEERS=(
  "jemalloc libjemalloc2 $LIBDIR/libjemalloc.so.2"
  "mimalloc libmimalloc2.0 $LIBDIR/libmimalloc.so.2"
  "tcmalloc libtcmalloc-minimal4 $LIBDIR/libtcmalloc_minimal.so.4"
)
apt_install() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null; then
    say "cannot install $* (needs root and apt-get)"
    return 1
  fi
  say "installing $* with apt-get"
  { timeout 300 apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq "$@"; } > bench/build/apt.log 2>&1 ||
    { say "apt-get failed (see bench/build/apt.log)"; return 1; }
}
NEED=()
for peer in "${PEERS[@]}"; do
  set -- $peer
  [ -e "$3" ] || NEED+=("$2")
done
# strace counts memory syscalls (wide, sizecat), valgrind counts instructions
# (callgrind); without them those figures are left out, with a note
for tool in strace valgrind; do
  command -v "$tool" > /dev/null || NEED+=("$tool")
done
if [ ${#NEED[@]} -gt 0 ] && [ "$INSTALL" = 1 ]; then
  apt_install "${NEED[@]}" || true
fi

RUN_ALLOCS=(--alloc glibc=)
for peer in "${PEERS[@]}"; do
  set -- $peer
  if [ -e "$3" ]; then
    RUN_ALLOCS+=(--alloc "$1=$3")
  else
    say "$1: $3 missing (package $2), left out"
    MISSING+=(--missing "$1=package $2 not installed")
  fi
done
[ -n "$BRISK_LIB" ] && RUN_ALLOCS+=(--alloc "brisk=$BRISK_LIB")
# The hardened library beside it: the report gives its cost over brisk.
SECURE_LIB="$ROOT/build/libbrisk-secure.so"
[ -n "$BRISK_LIB" ] && [ -f "$SECURE_LIB" ] && RUN_ALLOCS+=(--alloc "brisk-secure=$SECURE_LIB")
if [ "$SECURE_PEERS" = 1 ]; then
  say "building mimalloc and snmalloc, plain and hardened, from source (log: bench/build/secure-peers.log)"
  bench/secure_peers.sh bench/build/peers > bench/build/secure-peers.log 2>&1 ||
    say "a peer did not build (see bench/build/secure-peers.log); it is left out"
  for name in mimalloc-src mimalloc-src-secure snmalloc-src snmalloc-src-checks; do
    lib="$ROOT/bench/build/peers/lib$name.so"
    if [ -f "$lib" ]; then RUN_ALLOCS+=(--alloc "$name=$lib")
    else MISSING+=(--missing "$name=its source could not be fetched or built"); fi
  done
fi
for a in "${ALLOCS[@]+"${ALLOCS[@]}"}"; do RUN_ALLOCS+=(--alloc "$a"); done

# ---- 3. the benchmark programs ------------------------------------------------------
say "building bench programs"
make -s -j2 -C bench > bench/build/make.log 2>&1 || { cat bench/build/make.log >&2; exit 2; }

# ---- 4. matplotlib venv --------------------------------------------------------------
PLOT=()
have_mpl() { "$VENV/bin/python" -c 'import matplotlib' > /dev/null 2>&1; }
make_venv() {
  python3 -m venv "$VENV" && return 0
  [ "$INSTALL" = 1 ] && apt_install python3-venv && rm -rf "$VENV" && python3 -m venv "$VENV"
}
if [ "$PLOTS" = 1 ] && [ "$MODE" != smoke ] && ! have_mpl; then
  say "creating $VENV with matplotlib (log: bench/build/venv.log)"
  if ! { make_venv && "$VENV/bin/pip" install -q matplotlib; } > bench/build/venv.log 2>&1; then
    say "no matplotlib venv (see bench/build/venv.log); the report will have no plots"
  fi
fi
if [ "$PLOTS" = 1 ] && have_mpl; then
  PLOT=(--plot-python "$VENV/bin/python")
elif [ "$PLOTS" = 1 ] && [ "$MODE" = smoke ]; then
  say "smoke: no matplotlib venv, no plots"
fi

# ---- 5. run ----------------------------------------------------------------------------
CMD="scripts/bench.sh --$MODE"
for a in "${ALLOCS[@]+"${ALLOCS[@]}"}"; do CMD+=" --alloc $a"; done
exec python3 bench/run.py --mode "$MODE" --command "$CMD" "${RUN_ALLOCS[@]}" \
  "${MISSING[@]+"${MISSING[@]}"}" "${PLOT[@]+"${PLOT[@]}"}" "${PASS[@]+"${PASS[@]}"}"

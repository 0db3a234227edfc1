# Sourced by the preload test scripts. Usage: <script> /path/to/libbrisk.so
# Exit codes: 0 pass, 1 fail, 77 skip (a tool is missing).
set -euo pipefail

LIB=${1:?usage: $0 /path/to/libbrisk.so}
[ -f "$LIB" ] || { echo "FAIL: $LIB does not exist"; exit 1; }
LIB=$(cd "$(dirname "$LIB")" && pwd)/$(basename "$LIB")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/brisk-preload.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
export LC_ALL=C
unset LD_PRELOAD

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
need() { command -v "$1" >/dev/null 2>&1 || skip "$1 is not installed"; }

# Runs a command with brisk preloaded.
pre() { LD_PRELOAD="$LIB" "$@"; }

# Runs a command with brisk preloaded that must print "ok", exit 0 and say
# nothing on stderr (correct use raises no alarm).
expect_quiet_ok() {
  local rc
  set +e
  pre "$@" > "$TMP/out" 2> "$TMP/err"
  rc=$?
  set -e
  [ "$rc" -eq 0 ] && [ "$(cat "$TMP/out")" = ok ] && [ ! -s "$TMP/err" ] ||
    fail "$*: exit $rc, out '$(cat "$TMP/out")', err: $(cat "$TMP/err")"
  echo "ok: correct use raises nothing"
}

# Runs a command with brisk preloaded and the dynamic linker logging its
# symbol bindings to $TMP/ld-<tag>.<pid> (one file per process).
pre_traced() {
  local tag=$1; shift
  LD_PRELOAD="$LIB" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$TMP/ld-$tag" "$@"
}

# Asserts that some process traced under <tag> whose binary matches <regex>
# bound malloc and free to libbrisk: brisk really served it.
served_by_brisk() {
  local tag=$1 prog=$2 sym
  ls "$TMP"/ld-"$tag".* >/dev/null 2>&1 || fail "no LD_DEBUG output for $tag"
  for sym in malloc free; do
    if ! grep -hE "binding file [^ ]*${prog}[^ ]* \[0\] to [^ ]*libbrisk[^ ]* \[0\]: normal symbol \`${sym}'" \
         "$TMP"/ld-"$tag".* >/dev/null; then
      echo "--- bindings of $sym seen under $tag:" >&2
      grep -h "normal symbol \`${sym}'" "$TMP"/ld-"$tag".* | head -5 >&2 || true
      fail "$prog did not bind $sym to libbrisk"
    fi
  done
  rm -f "$TMP"/ld-"$tag".*
  echo "ok: $prog bound malloc/free to $(basename "$LIB")"
}

# Runs a command without brisk and then with it preloaded: both succeed and
# print the same, non-empty output, left in $expected. <name> names it in
# the messages.
expect_same_output() {
  local name=$1 got; shift
  expected=$("$@") || fail "$name fails without brisk"
  [ -n "$expected" ] || fail "$name printed nothing"
  got=$(pre "$@") || fail "$name failed under brisk (exit $?)"
  [ "$got" = "$expected" ] || fail "$name: output differs under brisk: '$got' vs '$expected'"
}

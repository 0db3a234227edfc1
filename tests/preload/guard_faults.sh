#!/usr/bin/env bash
# The secure and checked libraries name a fault on one of their guard pages
# (src/extra/guard_fault.c) and let it end the process with SIGSEGV, as it
# would have; a SIGSEGV raised by the program, or one the program handles
# itself, is left alone. Usage: guard_faults.sh libbrisk-{secure,checked}.so attacks
source "$(dirname "$0")/common.sh"
ATTACKS=${2:?usage: $0 libbrisk-secure.so attacks}

run() {  # <mode>: sets rc, the output in $TMP/err
  set +e
  pre "$ATTACKS" "$1" > "$TMP/out" 2> "$TMP/err"
  rc=$?
  set -e
}

expect_segv() {  # <mode> <message regex, or "" for no brisk message>
  run "$1"
  [ "$(kill -l "$rc" 2>/dev/null)" = SEGV ] || fail "$1: exit $rc, not SIGSEGV: $(cat "$TMP/err")"
  if [ -n "$2" ]; then
    grep -qE "$2" "$TMP/err" || fail "$1: no message matching '$2': $(cat "$TMP/err")"
  elif grep -q "brisk:" "$TMP/err"; then
    fail "$1: a message where brisk has nothing to name: $(cat "$TMP/err")"
  fi
  echo "ok: $1 ended by SIGSEGV ${2:+($(head -c 160 "$TMP/err"))}"
}

A="0x[0-9a-f]+"
expect_segv underflow "^brisk: error: heap buffer underflow: an access at $A, 160 bytes before the huge block at $A, hit the guard page before it$"
expect_segv overflow "^brisk: error: heap buffer overflow: an access at $A, [0-9]+ bytes past the start of the huge block at $A, hit the guard page after its mapping$"
expect_segv raise ""
run own_handler
[ "$rc" -eq 3 ] || fail "own_handler: exit $rc, not the program's own handler's 3: $(cat "$TMP/err")"
echo "ok: own_handler: the program's handler saw the fault"
echo "guard_faults: ok"

#!/usr/bin/env bash
# libbrisk-secure.so under LD_PRELOAD stops each attack of attacks.c: a
# message and an abort, or a fault on a guard page that brisk names (the
# underflow), never the attack's exit 0. Usage: secure.sh libbrisk-secure.so attacks
source "$(dirname "$0")/common.sh"
ATTACKS=${2:?usage: $0 libbrisk-secure.so attacks}

expect_stopped() {  # <mode> <signal name> <message regex or "">
  local mode=$1 sig=$2 msg=$3 rc
  set +e
  pre "$ATTACKS" "$mode" > "$TMP/out" 2> "$TMP/err"
  rc=$?
  set -e
  [ "$rc" -ne 0 ] || fail "$mode: not stopped: $(cat "$TMP/out")"
  [ "$(kill -l "$rc" 2>/dev/null)" = "$sig" ] || fail "$mode: exit $rc, not SIG$sig: $(cat "$TMP/err")"
  if [ -n "$msg" ]; then
    grep -qE "$msg" "$TMP/err" || fail "$mode: no message matching '$msg': $(cat "$TMP/err")"
  fi
  echo "ok: $mode stopped by SIG$sig ${msg:+($(head -c 120 "$TMP/err"))}"
}

expect_stopped poison ABRT "brisk: error: corrupted free list at 0x[0-9a-f]+"
expect_stopped double ABRT "brisk: error: free\(0x[0-9a-f]+\): double free"
expect_stopped interior ABRT "brisk: error: free\(0x[0-9a-f]+\): pointer is inside a block"
expect_stopped underflow SEGV "brisk: error: heap buffer underflow: an access at 0x[0-9a-f]+, 160 bytes before the huge block"
echo "secure: ok"

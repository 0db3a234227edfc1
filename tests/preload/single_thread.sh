#!/usr/bin/env bash
# A single-threaded program stays single-threaded under brisk (issue #10,
# item 7): brisk starts no helper thread unless BRISK_BACKGROUND_PURGE asks
# for one. Modes (see single_thread.c):
#   pthread_exit  the process exits after its main thread calls pthread_exit
#   tasks         one entry in /proc/self/task after allocation work
#   unshare       unshare(CLONE_NEWUSER) works as it does without brisk
#                 (skipped, 77, where it fails without brisk)
# Usage: single_thread.sh MODE /path/to/libbrisk.so /path/to/brisk_single_thread
MODE=${1:?usage: $0 MODE libbrisk.so brisk_single_thread}
shift
source "$(dirname "$0")/common.sh"
PROG=${2:?usage: $0 MODE libbrisk.so brisk_single_thread}
unset BRISK_BACKGROUND_PURGE

case "$MODE" in
  pthread_exit)
    # Without brisk first: the method works here.
    timeout -k 5 20 "$PROG" pthread_exit || fail "without brisk: exit code $?"
    rc=0
    timeout -k 5 20 env LD_PRELOAD="$LIB" "$PROG" pthread_exit || rc=$?
    # 124: timed out; 137: killed, as SIGTERM reaches no thread that takes it.
    [ "$rc" != 124 ] && [ "$rc" != 137 ] ||
      fail "the process did not exit within 20 s after its main thread called pthread_exit"
    [ "$rc" = 0 ] || fail "exit code $rc after pthread_exit"
    echo "ok: the process exits after pthread_exit in main"
    ;;
  tasks)
    "$PROG" tasks || fail "without brisk: $?"
    timeout -k 5 20 env LD_PRELOAD="$LIB" "$PROG" tasks || fail "with brisk: exit code $?"
    echo "ok: one thread after allocation work"
    ;;
  unshare)
    out=$("$PROG" unshare) || skip "unshare(CLONE_NEWUSER) fails without brisk here: $out"
    timeout -k 5 20 env LD_PRELOAD="$LIB" "$PROG" unshare || fail "with brisk: exit code $?"
    echo "ok: unshare(CLONE_NEWUSER) works under brisk"
    ;;
  *) fail "unknown mode $MODE" ;;
esac

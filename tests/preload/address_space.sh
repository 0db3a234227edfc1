#!/usr/bin/env bash
# The address space brisk maps at start counts against RLIMIT_AS (ulimit -v):
# after its first malloc a process holds at most 56 MiB more of it than
# without brisk (it held 78, when the chunk map covered 2^48 bytes on
# x86-64, where Linux maps nothing above 2^47 unasked), and under a limit
# 72 MiB above the process's own a 16 MiB block is still served.
# Usage: address_space.sh <libbrisk.so> <brisk_probe>
source "$(dirname "$0")/common.sh"
PROBE=${2:?usage: $0 libbrisk.so brisk_probe}
[ "$(uname -m)" = x86_64 ] || skip "the bound is x86-64's (arm64's chunk map covers 2^48 bytes: 64 MiB)"

vm_kb() { "$@" vm | sed -n 's/^vm_kb=//p'; }
base=$(vm_kb "$PROBE") || fail "probe vm failed without brisk"
with=$(vm_kb pre "$PROBE") || fail "probe vm failed under brisk"
[ -n "$base" ] && [ -n "$with" ] || fail "no VmSize read: '$base' '$with'"
extra=$(( (with - base) / 1024 ))
echo "address space after the first malloc: $((base / 1024)) MiB without brisk, $((with / 1024)) with it (+$extra)"
[ "$extra" -le 56 ] || fail "brisk maps $extra MiB of address space at start (at most 56 expected)"

limit=$((base + 72 * 1024))
got=$(ulimit -v "$limit" && pre "$PROBE" big-touch) || fail "probe big-touch failed under ulimit -v $limit"
[ "$got" = ok ] || fail "under ulimit -v $limit (72 MiB above the process's own) a 16 MiB malloc got: $got"
echo "ok: a 16 MiB block under ulimit -v $limit"

#!/usr/bin/env bash
# The libraries export nothing but the public API (brisk.h) and, for those
# that replace malloc, the malloc family and C++ new/delete; and a program
# may define any name brisk uses inside.
#   symbols.sh CC INCLUDE_DIR libbrisk.a libbrisk_core.a libbrisk.so old_names.c
set -uo pipefail
# INCLUDE_DIR: the source include/ directory, then (after a colon) the build's
# generated one.
CC=$1 INC=${2%%:*} GEN_INC=${2#*:} STATIC=$3 CORE=$4 SHARED=$5 PROGRAM=$6
fail=0
public=$(grep -oE '\bbrisk_[a-z0-9_]+ *\(' "$INC/brisk.h" | tr -d ' (' | sort -u)
family='^(malloc|free|calloc|realloc|reallocarray|aligned_alloc|posix_memalign|memalign|valloc|pvalloc|malloc_usable_size|cfree|free_sized|free_aligned_sized|malloc_trim|mallinfo|mallinfo2|malloc_stats|mallopt|__libc_[a-z_]+|__posix_memalign|_Zn[wa]m.*|_Zd[la]Pv.*)$'

# check <what> <allow the malloc family: 1/0> <symbol list...>
check() {
  local what=$1 family_ok=$2 sym bad=()
  shift 2
  for sym in "$@"; do
    if grep -qx "$sym" <<<"$public"; then continue; fi
    if [ "$family_ok" = 1 ] && grep -qE "$family" <<<"$sym"; then continue; fi
    bad+=("$sym")
  done
  if [ ${#bad[@]} -gt 0 ]; then
    echo "FAIL: $what exports ${#bad[@]} names outside the public API: ${bad[*]:0:40}"
    fail=1
  else
    echo "ok: $what exports $# names, all public"
  fi
}

defined() { nm -g --defined-only "$@" 2>/dev/null | awk 'NF==3 {print $3}' | sort -u; }
check "$(basename "$STATIC")" 1 $(defined "$STATIC")
check "$(basename "$CORE")" 0 $(defined "$CORE")
check "$(basename "$SHARED")" 1 $(nm -D --defined-only "$SHARED" | awk 'NF==3 {print $3}' | sort -u)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if "$CC" -o "$tmp/old_names" "$PROGRAM" -I"$INC" -I"$GEN_INC" "$STATIC" -lpthread 2>"$tmp/link.log"; then
  if "$tmp/old_names"; then echo "ok: a program defining brisk's old internal names links and runs"
  else echo "FAIL: the program defining the old names linked but failed"; fail=1; fi
else
  echo "FAIL: a program defining brisk's old internal names does not link with $(basename "$STATIC"):"
  grep -m5 "multiple definition" "$tmp/link.log"
  fail=1
fi
exit $fail

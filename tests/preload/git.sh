#!/usr/bin/env bash
# git under brisk: init, several commits, log, diff, fsck, gc. With fixed
# dates the commit ids are deterministic, so the whole history must equal
# the one git makes without brisk.
source "$(dirname "$0")/common.sh"
need git

export HOME="$TMP/home" GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=Brisk GIT_AUTHOR_EMAIL=b@example.invalid
export GIT_COMMITTER_NAME=Brisk GIT_COMMITTER_EMAIL=b@example.invalid
mkdir -p "$HOME"

# history <dir> <runner...>: builds the same repository and prints its log.
history() {
  local dir=$1; shift
  mkdir -p "$dir" && cd "$dir"
  "$@" git init -q -b main .
  local c i
  for c in 1 2 3 4; do
    for i in $(seq 1 60); do
      printf 'file %d commit %d\n%s\n' "$i" "$c" "$(seq -s ' ' 1 $((i * c % 97)))" > "f$i.txt"
    done
    [ "$c" -gt 2 ] && rm -f f1$c.txt
    "$@" git add -A
    GIT_AUTHOR_DATE="2024-01-0$c 12:00:00 +0000" GIT_COMMITTER_DATE="2024-01-0$c 12:00:00 +0000" \
      "$@" git commit -q -m "commit number $c"
  done
  "$@" git log --format='%H %s'
  "$@" git diff --stat HEAD~3 HEAD | tail -1
  "$@" git fsck --strict --no-progress 2>&1
  "$@" git gc --quiet --aggressive
  "$@" git count-objects -v | grep -E '^(count|in-pack)'
  "$@" git log -p --format=%s | sha256sum
  cd - >/dev/null
}

expected=$(history "$TMP/plain") || fail "git failed without brisk"
got=$(history "$TMP/brisk" pre) || fail "git failed under brisk"
[ -n "$expected" ] || fail "no output"
if [ "$got" != "$expected" ]; then
  diff <(echo "$expected") <(echo "$got") >&2 || true
  fail "git output differs under brisk"
fi
[ "$(echo "$got" | grep -c 'commit number')" = 4 ] || fail "expected 4 commits in the log"
(cd "$TMP/brisk" && pre_traced git git log --oneline >/dev/null) || fail "traced git log failed"
served_by_brisk git "git"
echo "git: $(echo "$got" | head -1)"

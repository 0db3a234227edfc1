#!/usr/bin/env bash
# tools/brisk-run on real programs: --stats prints the table, --leaks the leak
# report, --json FILE writes parsable JSON, --checked runs the checked
# library; the program's own output and exit status are untouched. The
# script is copied into a scratch tree next to a build/ directory holding
# the libraries, so that its own search for them is what is tested.
# Usage: brisk_run.sh /path/to/brisk-run libbrisk.so libbrisk-checked.so brisk_probe
source "$(dirname "$0")/common.sh"   # (it takes $1, the script, as LIB: replaced below)
[ $# -eq 4 ] || fail "usage: $0 brisk-run libbrisk.so libbrisk-checked.so brisk_probe"
RUN_SRC=$1
LIB=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
CHECKED=$(cd "$(dirname "$3")" && pwd)/$(basename "$3")
PROBE=$4
[ -f "$CHECKED" ] || fail "$CHECKED does not exist"
need sort
need python3

mkdir -p "$TMP/tree/tools" "$TMP/tree/build"
cp "$RUN_SRC" "$TMP/tree/tools/brisk-run"
chmod +x "$TMP/tree/tools/brisk-run"
ln -s "$LIB" "$TMP/tree/build/libbrisk.so"
ln -s "$CHECKED" "$TMP/tree/build/libbrisk-checked.so"
RUN="$TMP/tree/tools/brisk-run"
unset BRISK_LIB BRISK_SHOW_STATS BRISK_LEAK_REPORT BRISK_STATS_JSON

awk 'BEGIN { x = 7; for (i = 0; i < 50000; i++) { x = (x * 1103515245 + 12345) % 2147483648;
  printf "%08x line-%d\n", x, i } }' > "$TMP/in.txt"
sort "$TMP/in.txt" > "$TMP/want.txt"

# ---- Plain: brisk serves the program, output identical, no report.
"$RUN" -- sort "$TMP/in.txt" > "$TMP/out.txt" 2> "$TMP/err" || fail "brisk-run sort failed: $(cat "$TMP/err")"
cmp -s "$TMP/want.txt" "$TMP/out.txt" || fail "sort's output differs under brisk-run"
[ ! -s "$TMP/err" ] || fail "brisk-run without options printed: $(cat "$TMP/err")"
"$RUN" -- cat /proc/self/maps > "$TMP/maps" || fail "brisk-run cat failed"
grep -q "$(readlink -f "$LIB")" "$TMP/maps" || fail "libbrisk.so is not mapped in the program brisk-run ran"
echo "ok: brisk-run -- sort"

# ---- --stats: the table on stderr at exit.
"$RUN" --stats -- sort "$TMP/in.txt" > "$TMP/out.txt" 2> "$TMP/err" || fail "brisk-run --stats sort failed"
cmp -s "$TMP/want.txt" "$TMP/out.txt" || fail "sort's output differs under brisk-run --stats"
for word in "brisk statistics" small medium large huge total "os calls"; do
  grep -q "$word" "$TMP/err" || fail "--stats: no '$word' in: $(cat "$TMP/err")"
done
grep -q "brisk statistics" "$TMP/out.txt" && fail "--stats wrote to stdout"
"$RUN" --stats -- python3 -c 'print(sum(len(str(i)) for i in range(100000)))' > "$TMP/out.txt" 2> "$TMP/err" ||
  fail "brisk-run --stats python3 failed"
[ "$(cat "$TMP/out.txt")" = 488890 ] || fail "python3 under brisk-run printed $(cat "$TMP/out.txt")"
grep -q "brisk statistics" "$TMP/err" || fail "--stats: no table for python3"
echo "ok: --stats"

# ---- --leaks: the report names what the program leaked.
"$RUN" --leaks -- "$PROBE" leak > "$TMP/out.txt" 2> "$TMP/err" || fail "brisk-run --leaks probe failed"
grep -q "^brisk leak report: [0-9]* live blocks" "$TMP/err" || fail "--leaks: no report: $(cat "$TMP/err")"
grep -qE '^ +1000 blocks of +224 bytes +224000 bytes$' "$TMP/err" || fail "--leaks: the leaked blocks are not named"
"$RUN" --leaks -- python3 -c 'import json; print(json.dumps({"a": list(range(10))}))' > "$TMP/out.txt" 2> "$TMP/err" ||
  fail "brisk-run --leaks python3 failed"
grep -q '"a": \[0, 1' "$TMP/out.txt" || fail "python3 output under --leaks: $(cat "$TMP/out.txt")"
grep -q "^brisk leak report: [0-9]* live blocks" "$TMP/err" || fail "--leaks: no report for python3"
grep -qE '^ +[0-9]+ blocks of +[0-9]+ bytes +[0-9]+ bytes$' "$TMP/err" || fail "--leaks: no group lines for python3"
echo "ok: --leaks"

# ---- --json FILE: written at exit, parsable.
"$RUN" --json "$TMP/s.json" -- sort "$TMP/in.txt" > "$TMP/out.txt" 2> "$TMP/err" || fail "brisk-run --json sort failed"
cmp -s "$TMP/want.txt" "$TMP/out.txt" || fail "sort's output differs under brisk-run --json"
[ ! -s "$TMP/err" ] || fail "--json printed on stderr: $(cat "$TMP/err")"
python3 - "$TMP/s.json" <<'EOF' || fail "--json: not the stats as JSON: $(head -c 400 "$TMP/s.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["version"] == 1
assert set(d["tiers"]) == {"small", "medium", "large", "huge"}
assert d["requested"] > 0 and d["os"]["mmap"] > 0 and d["heaps"]["thread"] >= 1
EOF
# Combined, with a python3 program.
"$RUN" --stats --leaks --json "$TMP/p.json" -- python3 -c 'x = [str(i) * 3 for i in range(20000)]; print(len(x))' \
  > "$TMP/out.txt" 2> "$TMP/err" || fail "brisk-run --stats --leaks --json python3 failed"
[ "$(cat "$TMP/out.txt")" = 20000 ] || fail "python3 printed $(cat "$TMP/out.txt")"
grep -q "brisk statistics" "$TMP/err" || fail "combined: no table"
grep -q "brisk leak report" "$TMP/err" || fail "combined: no leak report"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$TMP/p.json" || fail "combined: bad JSON"
# A relative FILE is where brisk-run started, even if the program moves; "%p"
# gives each process of a tree its own file.
mkdir -p "$TMP/cwd" "$TMP/elsewhere"
(cd "$TMP/cwd" && "$RUN" --json "tree-%p.json" -- sh -c 'cd ../elsewhere && sort "$1" | sort -r > /dev/null' sh "$TMP/in.txt") ||
  fail "brisk-run --json with a relative path failed"
[ -z "$(ls "$TMP/elsewhere")" ] || fail "--json wrote into the program's new directory: $(ls "$TMP/elsewhere")"
n=$(ls "$TMP/cwd" | grep -cE '^tree-[0-9]+\.json$' || true)
# (the two sorts at least; a shell may leave by _exit, which runs no report)
[ "$n" -ge 2 ] || fail "--json tree-%p.json: expected a file per sort process, got: $(ls "$TMP/cwd" | tr '\n' ' ')"
for f in "$TMP"/cwd/tree-*.json; do
  python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["version"] == 1' "$f" || fail "bad JSON in $f"
done
echo "ok: --json"

# ---- --checked: the checked library, which catches a double free.
"$RUN" --checked -- cat /proc/self/maps > "$TMP/maps" || fail "brisk-run --checked cat failed"
grep -q "$(readlink -f "$CHECKED")" "$TMP/maps" || fail "--checked: libbrisk-checked.so is not mapped"
"$RUN" --checked -- sort "$TMP/in.txt" > "$TMP/out.txt" 2> "$TMP/err" || fail "brisk-run --checked sort failed"
cmp -s "$TMP/want.txt" "$TMP/out.txt" || fail "sort's output differs under brisk-run --checked"
[ ! -s "$TMP/err" ] || fail "--checked sort printed: $(cat "$TMP/err")"
# (In a subshell whose stderr is the file: bash's "Aborted" note goes there too.)
(set +e; "$RUN" --checked -- "$PROBE" double-free > "$TMP/out.txt"; echo $? > "$TMP/rc") 2> "$TMP/err"
rc=$(cat "$TMP/rc")
[ "$rc" -ne 0 ] || fail "--checked: a double free went unnoticed: $(cat "$TMP/out.txt")"
grep -q "double free" "$TMP/err" || fail "--checked: no double-free message: $(cat "$TMP/err")"
echo "ok: --checked"

# ---- The program's exit status passes through.
set +e
"$RUN" -- sh -c 'exit 7'
rc=$?
set -e
[ "$rc" = 7 ] || fail "exit status $rc, expected 7"

# ---- BRISK_LIB names the library; usage errors.
mkdir -p "$TMP/elsewhere"
cp "$RUN_SRC" "$TMP/elsewhere/brisk-run"
set +e
"$TMP/elsewhere/brisk-run" -- true 2> "$TMP/err"
rc=$?
set -e
[ "$rc" = 127 ] || fail "no library found: exit status $rc, expected 127"
grep -q "cannot find libbrisk.so" "$TMP/err" || fail "no library found: $(cat "$TMP/err")"
BRISK_LIB="$LIB" "$TMP/elsewhere/brisk-run" -- "$PROBE" loaded > "$TMP/out.txt" || fail "BRISK_LIB run failed"
grep -q "brisk: yes" "$TMP/out.txt" || fail "BRISK_LIB: brisk not loaded"
for args in "" "--stats" "--bogus -- true" "--json"; do
  set +e
  # shellcheck disable=SC2086
  "$RUN" $args > /dev/null 2> "$TMP/err"
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "brisk-run $args: exit status $rc, expected 2 (usage)"
  grep -q "usage: brisk-run" "$TMP/err" || fail "brisk-run $args: no usage message"
done
echo "brisk-run: ok"

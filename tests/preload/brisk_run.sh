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

# ---- --leaks: the report names what the program leaked, and the exit
# status says so (23); a program that leaks nothing keeps its status.
rc=0; "$RUN" --leaks -- "$PROBE" leak > "$TMP/out.txt" 2> "$TMP/err" || rc=$?
[ "$rc" = 23 ] || fail "brisk-run --leaks on a leaking program: exit status $rc, expected 23: $(cat "$TMP/err")"
grep -q "^brisk leak report: [0-9]* leaked blocks" "$TMP/err" || fail "--leaks: no report: $(cat "$TMP/err")"
grep -qE '^ +1000 blocks of +224 bytes +224000 bytes$' "$TMP/err" || fail "--leaks: the leaked blocks are not named"
grep -q "leaked" "$TMP/out.txt" || fail "--leaks: the program's stdout was lost on the way out: $(cat "$TMP/out.txt")"
"$RUN" --leaks -- true 2> "$TMP/err" || fail "brisk-run --leaks true: exit status $?: $(cat "$TMP/err")"
grep -q "^brisk leak report: 0 leaked blocks, 0 bytes (pid [0-9]*, true)$" "$TMP/err" ||
  fail "--leaks true: $(cat "$TMP/err")"
rc=0; "$RUN" --leaks -- sh -c 'exit 5' 2> "$TMP/err" || rc=$?
[ "$rc" = 5 ] || fail "--leaks: a program's own exit status $rc, expected 5"
rc=0
"$RUN" --leaks -- python3 -c 'import json; print(json.dumps({"a": list(range(10))}))' > "$TMP/out.txt" 2> "$TMP/err" ||
  rc=$?
[ "$rc" = 0 ] || [ "$rc" = 23 ] || fail "brisk-run --leaks python3 failed ($rc)"
grep -q '"a": \[0, 1' "$TMP/out.txt" || fail "python3 output under --leaks: $(cat "$TMP/out.txt")"
grep -q "^brisk leak report: [0-9]* leaked blocks" "$TMP/err" || fail "--leaks: no report for python3"
# (CPython frees little at exit, but keeps what it does not free reachable.)
grep -qE '^  and [0-9]+ blocks, [0-9]+ bytes, still reachable \(not leaks\)$' "$TMP/err" ||
  fail "--leaks: no line for what python3 keeps reachable: $(cat "$TMP/err")"
echo "ok: --leaks"

# ---- --json FILE: written at exit, parsable.
"$RUN" --json "$TMP/s.json" -- sort "$TMP/in.txt" > "$TMP/out.txt" 2> "$TMP/err" || fail "brisk-run --json sort failed"
cmp -s "$TMP/want.txt" "$TMP/out.txt" || fail "sort's output differs under brisk-run --json"
[ ! -s "$TMP/err" ] || fail "--json printed on stderr: $(cat "$TMP/err")"
python3 - "$TMP/s.json" <<'EOF' || fail "--json: not the stats as JSON: $(head -c 400 "$TMP/s.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["version"] == 2
assert set(d["tiers"]) == {"small", "medium", "large", "huge"}
assert d["requested"] > 0 and d["os"]["mmap"] > 0 and d["heaps"]["thread"] >= 1
EOF
# Combined, with a python3 program.
"$RUN" --stats --leaks --json "$TMP/p.json" -- python3 -c 'x = [str(i) * 3 for i in range(20000)]; print(len(x))' \
  > "$TMP/out.txt" 2> "$TMP/err" || [ $? = 23 ] || fail "brisk-run --stats --leaks --json python3 failed"
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
  python3 - "$f" <<'EOF' || fail "bad JSON in $f: $(cat "$f")"
import json, os, sys
d = json.load(open(sys.argv[1]))
assert d["version"] == 2
assert str(d["pid"]) in os.path.basename(sys.argv[1]) and d["command"] in ("sort", "sh"), d
assert isinstance(d["in_use"], int) and isinstance(d["tiers"]["small"]["reserved"], int)
EOF
done
echo "ok: --json"

# ---- --help, --version: exit 0, on stdout.
"$RUN" --help > "$TMP/out.txt" 2> "$TMP/err" || fail "brisk-run --help: exit status $?"
for word in "usage: brisk-run" --stats --leaks --json --children --output --checked --version; do
  grep -q -- "$word" "$TMP/out.txt" || fail "--help does not mention $word: $(cat "$TMP/out.txt")"
done
[ ! -s "$TMP/err" ] || fail "--help wrote to stderr"
"$RUN" --version > "$TMP/out.txt" || fail "brisk-run --version: exit status $?"
grep -qE '^brisk-run [0-9]+\.[0-9]+\.[0-9]+$' "$TMP/out.txt" || fail "--version: $(cat "$TMP/out.txt")"
echo "ok: --help, --version"

# ---- Labels and units: the table names the process (pid kept by exec),
# sizes in KiB/MiB/GiB; raw bytes stay in the JSON (above).
"$RUN" --stats -- sh -c 'echo $$ > "$1"; exec sort "$2" > /dev/null' sh "$TMP/pid" "$TMP/in.txt" 2> "$TMP/err" ||
  fail "brisk-run --stats sh/sort failed"
grep -qx "brisk statistics: pid $(cat "$TMP/pid") (sort)" "$TMP/err" || fail "--stats: no label: $(head -3 "$TMP/err")"
grep -qE '^  total +([0-9.]+ (B|KiB|MiB|GiB) *){3}$' "$TMP/err" || fail "--stats: total row not in units: $(cat "$TMP/err")"
grep -qE 'mapped now [0-9.]+ (KiB|MiB|GiB), at peak [0-9.]+ (KiB|MiB|GiB)$' "$TMP/err" || fail "--stats: mapped not in units"
echo "ok: labels and units"

# ---- --children: python3 (the top process) runs two sorts.
# (The interpreter itself: a python3 on PATH may be a wrapper script that
# runs more processes.)
PYTHON=$(python3 -c 'import sys; print(sys.executable)')
tree() {  # tree <brisk-run options...>: python3 running `sort` and `sort -r`
  "$RUN" "$@" -- "$PYTHON" -c 'import subprocess, sys
for args in (["sort"], ["sort", "-r"]):
    subprocess.run(args + [sys.argv[1]], stdout=subprocess.DEVNULL, check=True)' "$TMP/in.txt"
}
count() { grep -cE "$1" "$2" || true; }
tree --stats 2> "$TMP/err" || fail "brisk-run --stats python3 tree failed"
[ "$(count '^brisk statistics: pid [0-9]+ \(python3[.0-9]*\)$' "$TMP/err")" = 1 ] || fail "default: no full report of python3"
[ "$(count '^brisk statistics: pid [0-9]+ \(sort\)$' "$TMP/err")" = 0 ] || fail "default: a child's full report"
[ "$(count '^brisk: pid [0-9]+ \(sort\): [0-9.]+ (B|KiB|MiB) in use in [0-9]+ blocks at exit, [0-9.]+ (KiB|MiB) mapped at peak$' "$TMP/err")" = 2 ] ||
  fail "default (summary): not one line per sort: $(cat "$TMP/err")"
tree --stats --children=all 2> "$TMP/err" || fail "--children=all failed"
[ "$(count '^brisk statistics: pid [0-9]+ \(sort\)$' "$TMP/err")" = 2 ] || fail "--children=all: not a table per sort"
[ "$(count '^brisk statistics: pid [0-9]+ \(python3[.0-9]*\)$' "$TMP/err")" = 1 ] || fail "--children=all: python3's table"
tree --stats --children=none 2> "$TMP/err" || fail "--children=none failed"
[ "$(count '^brisk' "$TMP/err")" = 1 ] || fail "--children=none: more than python3's report: $(grep '^brisk' "$TMP/err")"
tree --stats --children=summary --json "$TMP/c-%p.json" 2> /dev/null || fail "--children=summary --json failed"
[ "$(ls "$TMP"/c-*.json | wc -l)" = 3 ] || fail "--json with children: $(ls "$TMP"/c-*.json)"
rm -f "$TMP"/c-*.json
tree --children=none --json "$TMP/c-%p.json" 2> /dev/null || fail "--children=none --json failed"
[ "$(ls "$TMP"/c-*.json | wc -l)" = 1 ] || fail "--children=none wrote children's JSON: $(ls "$TMP"/c-*.json)"
echo "ok: --children"

# ---- --output FILE: the reports go there, stderr keeps only the program's.
(cd "$TMP/cwd" && tree --stats --leaks --output report.txt 2> "$TMP/err") || [ $? = 23 ] || fail "--output failed"
[ ! -s "$TMP/err" ] || fail "--output: reports still on stderr: $(cat "$TMP/err")"
[ "$(count '^brisk statistics: pid [0-9]+ \(python3[.0-9]*\)$' "$TMP/cwd/report.txt")" = 1 ] || fail "--output: no table"
[ "$(count '^brisk leak report: .*python3[.0-9]*\)$' "$TMP/cwd/report.txt")" = 1 ] || fail "--output: no leak report"
[ "$(count '^brisk: pid [0-9]+ \(sort\)' "$TMP/cwd/report.txt")" = 2 ] || fail "--output: children's lines missing"
echo stale > "$TMP/cwd/report.txt"
"$RUN" --stats --output "$TMP/cwd/report.txt" -- true || fail "--output true failed"
grep -q stale "$TMP/cwd/report.txt" && fail "--output appended to an old file"
grep -q "^brisk statistics: pid [0-9]* (true)$" "$TMP/cwd/report.txt" || fail "--output: $(cat "$TMP/cwd/report.txt")"
echo "ok: --output"

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
for args in "" "--stats" "--bogus -- true" "--json" "--children=some -- true" "--output"; do
  set +e
  # shellcheck disable=SC2086
  "$RUN" $args > /dev/null 2> "$TMP/err"
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "brisk-run $args: exit status $rc, expected 2 (usage)"
  grep -q "usage: brisk-run" "$TMP/err" || fail "brisk-run $args: no usage message"
done
echo "brisk-run: ok"

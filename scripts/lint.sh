#!/usr/bin/env bash
# brisk's source checks. Prints each violation as `file:line: message`, then a
# one-line summary; exits non-zero when there is any.
#
#   layers     a file in src/<layer>/ includes (quoted) only headers of its own
#              layer or a lower one (os < ds < core < extra < api; the include
#              directory is src/), or a public header of include/; an include
#              that does not resolve, or a file outside the layer folders, fails
#   syscalls   outside src/os: no call of a system call wrapper (mmap, madvise,
#              write, ...; comments and strings do not count, nor `x.read(`,
#              `p->write(` or `_bk_os_write(`) and no <sys/mman.h>, <unistd.h>, ...
#   size       a file under src/ has at most 500 lines; a test source
#              (tests/**/*.c, *.cpp, *.h) at most 600
#   prototypes a .c file under src/ declares no `_bk_` function or extern
#              variable itself at file scope: the layer headers do
#   symbols    with --objects DIR (or BRISK_LINT_OBJECTS=DIR): scripts/layers.py
#              on that build's object files (no call from a lower layer up)
#   format     clang-format --dry-run --Werror (the repo's .clang-format) over
#              src/**/*.[ch], include/*.h, include/*.hpp
#
#   scripts/lint.sh [--no-format] [--objects DIR]
#   CLANG_FORMAT=clang-format-14   the clang-format to run (default: clang-format)
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
FORMAT=1
OBJECTS=${BRISK_LINT_OBJECTS:-}
while [ $# -gt 0 ]; do
  case $1 in
    --no-format) FORMAT=0 ;;
    --objects) [ $# -ge 2 ] || { echo "lint.sh: --objects needs a build directory" >&2; exit 2; }
               OBJECTS=$2; shift ;;
    --objects=*) OBJECTS=${1#--objects=} ;;
    -h|--help) usage; exit 0 ;;
    *) echo "lint.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

CHECKS=(layers syscalls size prototypes symbols format)
declare -A FOUND
for c in "${CHECKS[@]}"; do FOUND[$c]=0; done
declare -A SKIPPED

VIOLATION='^[^[:space:]:]+:[0-9]+: '
# report <check>: prints the violations on stdin and counts them; other lines
# (warnings, notes) are passed through.
report() {
  local line
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    printf '%s\n' "$line"
    if [[ $line =~ $VIOLATION ]]; then FOUND[$1]=$((FOUND[$1] + 1)); fi
  done
}

mapfile -t SRC_FILES < <(find src -type f \( -name '*.c' -o -name '*.h' \) 2>/dev/null | LC_ALL=C sort)

# The checks that read C: comments, strings and character literals are blanked
# (lines kept) before matching. The layer order comes from scripts/layers.py.
read -r -d '' C_CHECKS <<'PY'
import os, re, sys
sys.path.insert(0, "scripts")
from layers import LAYERS, RANK, layer_of

def strip_c(text):
    """Comments, string and character literals blanked out, newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)

def lines_of(path):
    with open(path, errors="replace") as fh:
        text = fh.read()
    return text.splitlines(), strip_c(text).splitlines()

def check_layers(files):
    public = set(os.listdir("include")) if os.path.isdir("include") else set()
    where = "src/{" + ",".join(LAYERS) + "}/"
    for f in files:
        mine = layer_of(f)
        if mine is None:
            print(f"{f}:1: not in a layer folder ({where})")
        raw, _ = lines_of(f)
        for n, line in enumerate(raw, 1):
            m = re.match(r'\s*#\s*include\s*"([^"]+)"', line)
            if not m:
                continue
            inc = m.group(1)
            found = None
            for base in (os.path.dirname(f), "src"):
                cand = os.path.normpath(os.path.join(base, inc))
                if os.path.isfile(cand):
                    found = cand
                    break
            if found is None:
                if inc in public:
                    continue
                print(f'{f}:{n}: #include "{inc}" does not resolve (from src/ or {os.path.dirname(f)}/)')
                continue
            theirs = layer_of(found)
            if theirs is None:
                print(f'{f}:{n}: #include "{inc}": {found} is not in a layer folder ({where})')
            elif mine is not None and RANK[theirs] > RANK[mine]:
                print(f'{f}:{n}: #include "{inc}": {mine} (layer {RANK[mine]}) must not include '
                      f'{theirs} (layer {RANK[theirs]})')

SYSCALLS = ("mmap munmap mremap madvise mprotect mincore msync syscall getrandom clock_gettime gettimeofday "
            "nanosleep usleep sleep sched_yield write read open openat close fcntl dup dup2 getpid gettid "
            "sysconf ioctl prctl").split()
SYS_HEADERS = "sys/mman.h unistd.h fcntl.h sys/syscall.h sys/random.h sched.h time.h".split()
CALL = re.compile(r"(?<![\w.])(?<!->)\b(" + "|".join(SYSCALLS) + r")\s*\(")
SYS_INCLUDE = re.compile(r"^\s*#\s*include\s*<(" + "|".join(map(re.escape, SYS_HEADERS)) + r")>")

def check_syscalls(files):
    for f in files:
        if f.startswith("src/os/"):
            continue
        _, code = lines_of(f)
        for n, line in enumerate(code, 1):
            m = SYS_INCLUDE.match(line)
            if m:
                print(f"{f}:{n}: includes <{m.group(1)}>: only src/os/ talks to the kernel")
                continue
            for m in CALL.finditer(line):
                print(f"{f}:{n}: calls {m.group(1)}(): system calls belong in src/os/")

BK_FUNC = re.compile(r"\b(_bk_\w+)\s*\(")
BK_NAME = re.compile(r"\b(_bk_\w+)\b")
ATTRIBUTE = re.compile(r"__attribute__\s*\(\(.*?\)\)")

def check_prototypes(files):
    """File-scope statements (starting at column 0 outside braces) that end in
    `;`, are not static, and declare a _bk_ function (`type *_bk_name(...);`,
    over one line or several) or an extern _bk_ variable."""
    for f in files:
        if not f.endswith(".c"):
            continue
        _, code = lines_of(f)
        depth, stmt, start, in_macro = 0, None, 0, False
        for n, line in enumerate(code, 1):
            if in_macro or line.lstrip().startswith("#"):
                in_macro = line.rstrip().endswith("\\")
                continue
            if depth == 0 and stmt is None and re.match(r"[A-Za-z_]", line):
                stmt, start = "", n
            if stmt is not None:
                stmt += " " + line.strip()
            depth += line.count("{") - line.count("}")
            if stmt is None or not any(c in line for c in ";{="):
                continue
            text = ATTRIBUTE.sub(" ", stmt).strip()
            stmt = None
            if not text.endswith(";") or re.match(r"(static|typedef)\b", text):
                continue
            m = BK_FUNC.search(text)
            if m and re.fullmatch(r"[\w\s*]*\w[\w\s*]*", text[:m.start()]):
                print(f"{f}:{start}: declares {m.group(1)}() itself: declarations belong in the layer headers")
            elif re.match(r"extern\b", text) and BK_NAME.search(text):
                print(f"{f}:{start}: declares extern {BK_NAME.findall(text)[-1]} itself: "
                      f"declarations belong in the layer headers")

check = {"layers": check_layers, "syscalls": check_syscalls, "prototypes": check_prototypes}[sys.argv[1]]
check(sys.argv[2:])
PY

c_check() { PYTHONDONTWRITEBYTECODE=1 python3 -c "$C_CHECKS" "$1" "${SRC_FILES[@]}" || echo "scripts/lint.sh:1: the $1 check did not run"; }

# ---- size --------------------------------------------------------------------
check_size() {
  local f n limit
  while IFS= read -r f; do
    case $f in src/*) limit=500 ;; *) limit=600 ;; esac
    n=$(wc -l <"$f")
    [ "$n" -gt "$limit" ] && echo "$f:$((limit + 1)): $n lines, over the limit of $limit: split it"
  done < <({ find src -type f 2>/dev/null
             find tests -type f \( -name '*.c' -o -name '*.cpp' -o -name '*.h' \) 2>/dev/null; } | LC_ALL=C sort)
  return 0
}

# ---- symbols -----------------------------------------------------------------
check_symbols() {
  if [ ! -d "$OBJECTS" ]; then
    echo "$OBJECTS:1: --objects: no such build directory"
    return
  fi
  local rc
  python3 scripts/layers.py "$OBJECTS" --root . 2>&1
  rc=$?
  [ "$rc" -ne 2 ] || echo "$OBJECTS:1: scripts/layers.py could not read the build (built?)"
}

# ---- format ------------------------------------------------------------------
check_format() {
  local cf=${CLANG_FORMAT:-clang-format} files=() f
  if ! command -v "$cf" >/dev/null 2>&1; then
    echo ".clang-format:1: $cf is not installed (apt-get install clang-format, or scripts/test.sh deps); --no-format skips this check"
    return
  fi
  for f in "${SRC_FILES[@]}" include/*.h include/*.hpp; do [ -f "$f" ] && files+=("$f"); done
  [ ${#files[@]} -gt 0 ] || return 0
  # One line per line that clang-format would change.
  "$cf" --dry-run --Werror "${files[@]}" 2>&1 |
    sed -nE 's/^(.*):([0-9]+):[0-9]+: (error|warning): code should be clang-formatted.*/\1:\2: not clang-formatted/p' |
    awk -v cf="$cf" '!seen[$0]++ { f = $0; sub(/:[0-9]+: .*/, "", f); print $0 " (" cf " -i " f ")" }'
}

report layers < <(c_check layers)
report syscalls < <(c_check syscalls)
report size < <(check_size)
report prototypes < <(c_check prototypes)
if [ -n "$OBJECTS" ]; then report symbols < <(check_symbols); else SKIPPED[symbols]="no --objects"; fi
if [ "$FORMAT" = 1 ]; then report format < <(check_format); else SKIPPED[format]="--no-format"; fi

TOTAL=0
PARTS=()
for c in "${CHECKS[@]}"; do
  if [ -n "${SKIPPED[$c]:-}" ]; then PARTS+=("$c skipped"); continue; fi
  TOTAL=$((TOTAL + FOUND[$c]))
  PARTS+=("$c ${FOUND[$c]}")
done
SUMMARY=$(IFS=,; echo "${PARTS[*]}" | sed 's/,/, /g')
if [ "$TOTAL" -gt 0 ]; then
  echo "lint: FAILED, $TOTAL violations ($SUMMARY)"
  exit 1
fi
echo "lint: ok ($SUMMARY)"

#!/usr/bin/env bash
# python3 running a dict/json-heavy, self-checking script under brisk: same
# output as without brisk, libbrisk mapped, malloc bound to brisk; once with
# pymalloc and once with PYTHONMALLOC=malloc (every object through brisk).
source "$(dirname "$0")/common.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3 || true)
[ -n "$PY" ] || skip "python3 is not installed"
SCRIPT="$HERE/workload.py"

expect_same_output workload.py "$PY" "$SCRIPT"

got=$(PYTHONMALLOC=malloc pre "$PY" "$SCRIPT") || fail "workload.py failed under brisk with PYTHONMALLOC=malloc"
[ "$got" = "$expected" ] || fail "output differs under brisk with PYTHONMALLOC=malloc"

maps=$(pre "$PY" -c 'print(int(any("libbrisk" in l for l in open("/proc/self/maps"))))')
[ "$maps" = 1 ] || fail "libbrisk is not in python's /proc/self/maps"

pre_traced py "$PY" -c 'import json; print(len(json.dumps({str(i): [i]*50 for i in range(20000)})))' >/dev/null \
  || fail "traced python run failed"
served_by_brisk py "python3"
echo "python3: $expected"

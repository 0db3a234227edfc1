"""The replay workload's traces, made at bench time (bench/run.py calls
prepare()): real programs recorded once under glibc with
bench/build/libbrisk-record.so (what `brisk-run --record` preloads), then
replayed under every allocator by bench/build/brisk-replay-driver, like any
other job. A program that is not installed, or whose recording fails, is
left out with a note. Standard library only.

  python   CPython on dicts and JSON (bench/cpython.py, PYTHONMALLOC=malloc)
  sqlite3  a table filled, indexed, grouped, joined, updated and vacuumed
  g++      cc1plus compiling tests/preload/sample.cpp at -O2 (the largest
           trace of the g++ process tree)
  sort     sort of generated lines, through temporary files
"""
import glob
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RECORDER = os.path.join(HERE, "build", "libbrisk-record.so")

SQL = """CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, v REAL);
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {rows})
INSERT INTO t SELECT i, printf('name-%d-%s', i, substr('abcdefghijklmnopqrstuvwxyz', 1 + i % 26)),
  i % 97, (i * 7919 % 10007) / 7.0 FROM c;
CREATE INDEX t_grp ON t(grp, v);
CREATE TABLE g AS SELECT grp, count(*) AS n, sum(v) AS s FROM t GROUP BY grp;
SELECT t.grp, count(*) FROM t JOIN g ON g.grp = t.grp WHERE t.v > g.s / g.n GROUP BY t.grp LIMIT 3;
UPDATE t SET name = name || '-updated' WHERE id % 3 = 0;
DELETE FROM t WHERE id % 5 = 0;
VACUUM;
"""


def programs(p, work):
    """(label, argv, env additions, stdin text) of each program to record."""
    sort_in = os.path.join(work, "sort.in")
    with open(sort_in, "w") as f:
        x = 7
        for i in range(p["sort_lines"]):
            x = (x * 1103515245 + 12345) % 2147483648
            f.write("%08x line-%d %d\n" % (x, i, x % 97))
    return [
        ("python", [sys.executable, os.path.join(HERE, "cpython.py"), "ms=%d" % p["python_ms"]],
         {"PYTHONMALLOC": "malloc"}, None),
        ("sqlite3", ["sqlite3", os.path.join(work, "bench.db")], {}, SQL.format(rows=p["sqlite_rows"])),
        ("g++", ["g++", "-std=c++17", "-O2", "-S", "-o", os.devnull,
                 os.path.join(ROOT, "tests", "preload", "sample.cpp")], {}, None),
        ("sort", ["sort", "-S", "1M", "-T", work, "-k3,3n", sort_in], {}, None),
    ]


def record(label, argv, env_add, stdin, work):
    """The trace of one run (the largest of its processes'), or a note."""
    if not shutil.which(argv[0]) and not os.path.isfile(argv[0]):
        return None, "%s not found: its replay is left out" % argv[0]
    trace = os.path.join(work, label.replace("+", "p") + ".trace")
    for old in glob.glob(glob.escape(trace) + "*"):
        os.unlink(old)
    env = dict(os.environ, LD_PRELOAD=RECORDER, BRISK_RECORD=trace, **env_add)
    env.pop("BRISK_RECORD_ROOT", None)  # every process writes trace.<pid>
    proc = subprocess.run(argv, env=env, input=stdin, capture_output=True, text=True, timeout=300)
    made = [f for f in glob.glob(glob.escape(trace) + ".*") if os.path.getsize(f) > 0]
    if proc.returncode != 0 or not made:
        return None, "recording %s failed (exit %d): its replay is left out" % (label, proc.returncode)
    return max(made, key=os.path.getsize), None


def prepare(jobs, p, out_dir):
    """Fills in the trace of each replay job; returns the jobs that have one
    and notes on those left out."""
    replays = [j for j in jobs if j["workload"] == "replay"]
    if not replays:
        return jobs, []
    if not os.path.isfile(RECORDER):
        return [j for j in jobs if j["workload"] != "replay"], ["no bench/build/libbrisk-record.so: no replays"]
    work = os.path.join(out_dir, "traces")
    os.makedirs(work, exist_ok=True)
    made, notes = {}, []
    for label, argv, env_add, stdin in programs(p, work):
        trace, note = record(label, argv, env_add, stdin, work)
        if note:
            notes.append(note)
        else:
            made[label] = trace
    keep = []
    for job in jobs:
        if job["workload"] == "replay":
            if job["args"]["name"] not in made:
                continue
            job["args"]["trace"] = made[job["args"]["name"]]
        keep.append(job)
    return keep, notes

#!/usr/bin/env python3
"""Puts a benchmark run into the README: copies its report and plots to
docs/bench/ and rewrites the README's measured tables (between the
<!-- bench:begin --> and <!-- bench:end --> markers) from the report.

    python3 bench/publish.py [RESULTS_DIR]     (default: bench/results/latest)

The prose around the markers is written by hand: read it again after
publishing a run that changes the picture."""
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DOCS = os.path.join(ROOT, "docs", "bench")
README = os.path.join(ROOT, "README.md")
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"

SWEEP_1T = ["16 B", "64 B", "256 B", "1 KiB", "4 KiB", "16 KiB", "64 KiB", "256 KiB",
            "1 MiB", "4 MiB", "16 MiB", "32 MiB", "64 MiB"]

def cases_with(*words):
    """Rows whose case label holds every word."""
    return lambda label: all(w in label for w in words)


# (workload section, table title prefix, heading shown in the README, rows kept:
# None for all, a list of labels, or a test of the label). Sections from 8 on
# (and the many-live rows of 4) are left out, with a note, when the report
# lacks them (a run without valgrind has no section 13).
TABLES = [
    ("## 1. Size sweep", "M ops/s",
     "Size sweep: `malloc(N)`, write a byte, `free`, one thread",
     ["%s, 1 thr" % s for s in SWEEP_1T]),
    ("## 2. Mixed ring", "M replacements/s",
     "Mixed ring: random replacements in a ring of 100 000 blocks "
     "(60% 16-256 B, 30% 512 B-2 KiB, 10% 4-32 KiB, memset)", None),
    ("## 2. Mixed ring", "Peak RSS", None, None),
    ("## 3. Cross-thread", "M blocks/s",
     "Cross-thread: one thread allocates, another frees; larson", None),
    ("## 7. Fixed-size", "M objects/s",
     "Fixed-size objects: 100 000 allocated, then all freed "
     "(`malloc` of each allocator, and brisk's pool API)", None),
    ("## 6. Thread churn", "short threads per second",
     "Thread churn: short threads allocate, hand half their blocks to a survivor, exit", None),
    ("## 6. Thread churn", "RSS, MiB", None, None),
    ("## 5. Large buffers", "RSS after the phase",
     "Large buffers (1-32 MiB and 5-25 MiB, written in full): RSS once they are all freed", None),
    ("## 2. Mixed ring", "malloc latency",
     "Mixed ring: malloc latency at 2 threads, 100 000 and 4000 slots", cases_with("2 thr")),
    ("## 4. Size categories", "k ops/s",
     "Size categories with many blocks live, one thread", cases_with(" live")),
    ("## 4. Size categories", "memory syscalls", None, cases_with(" live", "all memory")),
    ("## 8. Bursty", "seconds",
     "Bursty cross-thread: 8 threads, bursts of mixed sizes handed between them; "
     "1 and 200 generations of threads", None),
    ("## 8. Bursty", "RSS, MiB", None, None),
    ("## 9. Wide", "k ops/s", "Wide random sizes: 2 threads, 16 B-4 MiB, many live", None),
    ("## 9. Wide", "memory syscalls", None, cases_with("all memory")),
    ("## 10. Server", "k requests/s",
     "Server: acceptors, a worker pool and a writer; blocks freed by other threads", None),
    ("## 11. False sharing", "M writes/s", "False sharing (Hoard's cache-thrash, cache-scratch)", None),
    ("## 12. CPython", "k records/s", "CPython with PYTHONMALLOC=malloc: dicts and JSON", None),
    ("## 13. Instructions", "instructions per",
     "Instructions per 32 B malloc + free pair (callgrind)", None),
]
OPTIONAL = ("## 8.", "## 9.", "## 10.", "## 11.", "## 12.", "## 13.", "## 4. Size categories")


def table(report, section, title, rows):
    """The table titled `title` under `section`, as Markdown lines (None when
    an optional one is not in the report)."""
    start = report.find(section)
    end = report.find("\n## ", start + 1) if start >= 0 else -1
    at = report.find("**" + title, start, end if end >= 0 else len(report)) if start >= 0 else -1
    if at < 0 and section.startswith(OPTIONAL) and (rows is None or callable(rows)):
        print("publish: note: no table %r under %r, left out" % (title, section), file=sys.stderr)
        return None
    if start < 0:
        sys.exit("publish: no section %r in the report" % section)
    if at < 0:
        sys.exit("publish: no table %r under %r" % (title, section))
    lines = report[at:].split("\n")
    body = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        body.append(line)
    if callable(rows):
        body = body[:2] + [l for l in body[2:] if rows(l.split("|")[1].strip())]
        if len(body) == 2 and section.startswith(OPTIONAL):
            return None
    elif rows:
        body = body[:2] + [l for l in body[2:] if any(l.startswith("| %s |" % r) for r in rows)]
    return [lines[0], ""] + body


def main():
    src = os.path.realpath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results", "latest"))
    report_path = os.path.join(src, "report.md")
    if not os.path.exists(report_path):
        sys.exit("publish: %s has no report.md" % src)
    report = open(report_path).read()
    if "(quick mode)" not in report.split("\n", 1)[0]:
        print("publish: note: not a quick-mode run", file=sys.stderr)

    os.makedirs(DOCS, exist_ok=True)
    for name in os.listdir(DOCS):
        os.unlink(os.path.join(DOCS, name))
    for name in os.listdir(src):
        if name.endswith(".png"):
            shutil.copy(os.path.join(src, name), DOCS)
    with open(os.path.join(DOCS, "report.md"), "w") as f:
        f.write(report.replace(
            "\n", "\n\nCopied from `%s` by `bench/publish.py`; the README shows its main tables.\n" %
            os.path.relpath(src, ROOT), 1))

    meta = [l for l in report.split("\n") if l.startswith("- **")]
    out = [BEGIN, ""] + meta + [""]
    for section, title, heading, rows in TABLES:
        lines = table(report, section, title, rows)
        if lines is None:
            continue
        if heading:
            out += ["#### " + heading, ""]
        out += lines + [""]
    out.append(END)

    readme = open(README).read()
    if BEGIN not in readme or END not in readme:
        sys.exit("publish: README.md lacks the %s ... %s markers" % (BEGIN, END))
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    readme = pattern.sub(lambda m: "\n".join(out), readme, count=1)
    with open(README, "w") as f:
        f.write(readme)
    print("publish: README.md tables and docs/bench/ now show %s" % os.path.relpath(src, ROOT))


if __name__ == "__main__":
    main()

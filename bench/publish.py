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

# (workload section, table title prefix, heading shown in the README, rows kept or None)
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
     "Large buffers (1-32 MiB, written in full): RSS once they are all freed", None),
]


def table(report, section, title, rows):
    """The table titled `title` under `section`, as Markdown lines."""
    start = report.find(section)
    if start < 0:
        sys.exit("publish: no section %r in the report" % section)
    at = report.find("**" + title, start)
    if at < 0:
        sys.exit("publish: no table %r under %r" % (title, section))
    lines = report[at:].split("\n")
    body = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        body.append(line)
    if rows:
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
        if heading:
            out += ["#### " + heading, ""]
        out += table(report, section, title, rows) + [""]
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

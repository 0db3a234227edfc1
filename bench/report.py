"""The report of a benchmark run (report.md), for bench/run.py: one section
per workload of bench/workloads.py, one table per figure, a column per
allocator and brisk / best peer. Standard library only."""
import math
import os
import sys

from workloads import METRIC_LABELS, WORKLOADS

PYTHON = sys.executable


def job_label(job):
    a = job["args"]
    extra = a.get("mode") or ("%s thr" % a["threads"] if "threads" in a else "")
    return ("%s %s" % (job["workload"], extra)).strip()


def fmt(v):
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return "%.0f" % v
    return "%.3g" % v


def cell(row, metric, alloc):
    st = row["metrics"].get(metric, {}).get(alloc)
    failed = row["failed"].get(alloc, [])
    reps = row["reps"].get(alloc, 0)
    if st is None:
        return "**%s**" % "/".join(sorted(set(failed))).upper() if failed else "—"
    text = fmt(st["median"])
    if st["n"] > 1:
        text += " ±%.0f%%" % st["spread_pct"]
    if failed:
        text += " **(%d/%d %s)**" % (len(failed), reps, "/".join(sorted(set(failed))).upper())
    return text


def ratio_cell(row, metric, better, names, rows):
    stats_of = row["metrics"].get(metric, {})
    if "brisk" not in names:
        return "n/a"
    if "brisk" not in stats_of:
        return "**brisk failed**" if row["failed"].get("brisk") else "—"
    # A brisk-only row (an API of brisk's own) is compared with the peers in
    # the row it stands beside ("64 B, brisk_pool" with "64 B, malloc").
    peer_row = row
    if row["case"].endswith(", brisk_pool"):
        twin = row["case"][:-len("brisk_pool")] + "malloc"
        peer_row = next((r for r in rows if r["case"] == twin), row)
    peers = [(st["median"], a) for a, st in peer_row["metrics"].get(metric, {}).items()
             if not a.startswith("brisk") and not a.endswith(("-secure", "-checks"))]
    if not peers:
        return "—"
    best, who = max(peers) if better > 0 else min(peers)
    b = stats_of["brisk"]["median"]
    if best == 0:
        return "—"
    r = b / best
    text = "%.2f (%s)" % (r, who)
    return "**%s**" % text if (r >= 1 if better > 0 else r <= 1) else text


def report(meta, allocs, jobs, summary, runs, plots):
    names = [a["name"] for a in allocs]
    out = ["# brisk benchmark report (%s mode)" % meta["mode"], ""]
    out.append("- **Command:** `%s`" % meta["command"])
    out.append("- **When:** %s, brisk at %s" % (meta["date"], meta["commit"]))
    m = meta["machine"]
    out.append("- **Machine:** %s, %s cores, %s GiB RAM, Linux %s, glibc %s; load average %s "
               "before, %s after" % (m["cpu"], m["cores"], m["mem_gib"], m["kernel"], m["glibc"],
                                    meta["load_before"], meta["load_after"]))
    out.append("- **Allocators:** " + ", ".join(
        "%s (%s)" % (a["name"], a["version"]) for a in allocs))
    for name, why in meta["skipped"].items():
        out.append("- **Skipped:** %s: %s" % (name, why))
    for note in meta.get("notes", []):
        out.append("- **Note:** %s" % note)
    nfail = sum(r["status"] != "ok" for r in runs)
    out.append("- **Runs:** %d (%d repetition%s of every job, allocators in rotating order), "
               "%d failed%s" % (len(runs), meta["reps"], "s" * (meta["reps"] > 1), nfail,
                                " (see Failures at the end)" if nfail else ""))
    out.append("")
    out.append("Each cell: median over the repetitions ±half their range, relative to the median. "
               "A run that crashed, timed out, failed its own check (WRONG) or did not run under "
               "its allocator (ERROR) is named in its cell. **brisk / best peer**: brisk's median "
               "over the best other allocator's; above 1 is better for throughput, below 1 for "
               "latency, faults and memory; bold where brisk is at least as good.")
    for wid, title, what, tables in WORKLOADS:
        rows = summary.get(wid)
        if not rows:
            continue
        out += ["", "## " + title, "", what, "", "Run as: " + "; ".join(
            job_command(j) for j in jobs if j["workload"] == wid) + "."]
        for ttitle, metrics, better in tables:
            lines = []
            for row in rows:
                present = [m for m in metrics if m in row["metrics"]] or (
                    metrics[:1] if not row["metrics"] else [])
                for metric in present:
                    label = row["case"] if len(metrics) == 1 else "%s, %s" % (
                        row["case"], METRIC_LABELS.get(metric, metric))
                    lines.append("| %s | %s | %s |" % (
                        label, " | ".join(cell(row, metric, a) for a in names),
                        ratio_cell(row, metric, better, names, rows)))
            if not lines:
                continue
            out += ["", "**%s** (%s is better)" % (ttitle, "higher" if better > 0 else "lower"), ""]
            out.append("| case | %s | brisk / best peer |" % " | ".join(names))
            out.append("|---|%s---|" % ("---:|" * len(names)))
            out += lines
        for png, workloads in plots:
            if wid == workloads[0]:
                out += ["", "![%s](%s)" % (png, png)]
    out += variant_cost(summary, names)
    failures = [r for r in runs if r["status"] != "ok"]
    if failures:
        out += ["", "## Failures", "", "| job | allocator | status | detail |", "|---|---|---|---|"]
        for r in failures:
            out.append("| %s%s | %s | %s | %s |" % (job_label(jobs[r["job"]]),
                                                   " (strace)" if r.get("kind") == "syscalls" else "",
                                                   r["alloc"],
                                                 r["status"].upper(),
                                                 r["detail"].replace("|", "\\|")))
    return "\n".join(out) + "\n"


# Speed figures: higher is better, except the whole run's seconds.
SPEED_TIME_METRICS = {"secs"}


def variant_base(name, names):
    """The allocator a variant is measured against: brisk for brisk-secure,
    X for X-secure or X-checks (mimalloc's secure mode, snmalloc's checks,
    against their own plain builds)."""
    if name.startswith("brisk-"):
        return "brisk"
    for suffix in ("-secure", "-checks"):
        if name.endswith(suffix) and name[:-len(suffix)] in names:
            return name[:-len(suffix)]
    return None


def variant_cost(summary, names):
    """What a variant (brisk-secure, mimalloc-src-secure, ...) run beside its
    base costs in time: per speed figure, the variant's time over the
    base's, and their geometric mean."""
    out = []
    for variant in [n for n in names if variant_base(n, names)]:
        base = variant_base(variant, names)
        ratios = []
        for wid, title, _what, tables in WORKLOADS:
            for _ttitle, metrics, better in tables:
                for metric in metrics:
                    if better < 0 and metric not in SPEED_TIME_METRICS:
                        continue
                    for row in summary.get(wid, []):
                        st = row["metrics"].get(metric, {})
                        if base not in st or variant not in st:
                            continue
                        b, v = st[base]["median"], st[variant]["median"]
                        if b > 0 and v > 0:
                            ratios.append(("%s: %s" % (title, row["case"]), b / v if better > 0 else v / b))
        if not ratios:
            continue
        gm = math.exp(sum(math.log(r) for _, r in ratios) / len(ratios))
        out += ["", "## Cost of %s" % variant, "",
                "Its time over %s's on every speed figure above (1.10 = 10%% slower); "
                "geometric mean over %d figures: **%.3f**." % (base, len(ratios), gm), "",
                "| case | %s time / %s time |" % (variant, base), "|---|---:|"]
        out += ["| %s | %.3f |" % (label, r) for label, r in ratios]
    return out


def job_command(job):
    """How the report shows a job's command line."""
    args = ["%s=%s" % kv for kv in job["args"].items()]
    if job.get("tool") == "callgrind":
        return "`valgrind --tool=callgrind %s %s iters=%s`, less the same with `alloc=none`" % (
            job["prog"], " ".join(args), "|".join(str(n) for n in job["iters"]))
    prog = "%s %s" % (os.path.basename(PYTHON or "python3"), job["prog"]) \
        if job["prog"].endswith(".py") else job["prog"]
    text = "`%s`" % " ".join([prog] + args)
    if job["prog"].endswith(".py"):
        text = "`PYTHONMALLOC=malloc %s`" % text.strip("`")
    if job.get("syscalls"):
        text += " (and once under `strace -f -c -e trace=memory`)"
    return text

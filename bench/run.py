#!/usr/bin/env python3
"""Runs the brisk benchmark programs under every allocator and writes the report.

scripts/bench.sh builds everything and calls this; it can also run alone once
bench/build/ holds the programs:

    python3 bench/run.py --mode quick --alloc glibc= \\
        --alloc jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2

What runs is in bench/workloads.py. Each (workload job, allocator) pair runs
--reps times; every repetition runs all allocators back to back, in an order
rotated by one each repetition (callgrind jobs run once; jobs that count
syscalls run once more under strace: bench/probes.py).
Writes OUT/results.json (every run and figure) and OUT/report.md; plots come
from bench/plot.py when --plot-python names a Python with matplotlib.
Exit status: 0 when every run passed, 1 when any crashed, timed out, failed
its check or did not run under the allocator it was given. Standard library only.
"""
import argparse
import datetime
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time

import probes
import traces
from report import job_label, report
from workloads import MODES, WORKLOADS, plan

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.path.join(HERE, "build")
# Programs named *.py (bench/cpython.py) run under this Python, with
# PYTHONMALLOC=malloc so that every object comes from the allocator tested.
PYTHON = sys.executable

def job_allocs(job, allocs):
    return [a for a in allocs if not job.get("only_alloc") or a["name"] == job["only_alloc"]]


# ---- running -------------------------------------------------------------------

def prog_argv(job, args=None):
    """The job's command line (args: other arguments than the job's own)."""
    prog = job["prog"]
    argv = [PYTHON, os.path.join(HERE, prog)] if prog.endswith(".py") else [os.path.join(BIN, prog)]
    return argv + ["%s=%s" % kv for kv in (args or job["args"]).items()]


def run_one(job, alloc, timeout, wrap=None, args=None):
    """One process. Returns the run record (status ok/crash/timeout/wrong/error).
    wrap: probes.strace_wrap or probes.callgrind_wrap, to run under that tool."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    argv, preload, wrap_out = prog_argv(job, args), alloc["path"], None
    if job["prog"].endswith(".py"):
        env["PYTHONMALLOC"] = "malloc"
    if wrap:
        argv, preload, wrap_out = wrap(argv, preload)
    if preload:
        env["LD_PRELOAD"] = preload
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, start_new_session=True, text=True, errors="replace")
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    secs = time.monotonic() - t0
    rc = proc.returncode

    result = None
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            try:
                result = json.loads(line)
            except ValueError:
                pass
            break

    if timed_out:
        status, detail = "timeout", "killed after %ds" % timeout
    elif rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = "signal %d" % -rc
        status, detail = "crash", name
    elif rc == 2 or (result is not None and not result.get("ok")):
        status, detail = "wrong", first_line(err, "CHECK FAILED").replace("CHECK FAILED: ", "")
    elif rc != 0 or result is None:
        status, detail = "error", "exit %d: %s" % (rc, first_line(err, ""))
    elif not served_by(result.get("malloc_from", ""), alloc):
        status = "error"
        detail = "malloc came from %s, not %s" % (result.get("malloc_from"), alloc["path"] or "glibc")
    else:
        status, detail = "ok", ""
    run = {"job": job["id"], "workload": job["workload"], "alloc": alloc["name"],
           "status": status, "detail": detail, "rc": rc, "secs": round(secs, 3),
           "result": result, "stderr": err[-1500:] if err else ""}
    if wrap is probes.strace_wrap:
        run["kind"] = "syscalls"
        run["syscalls"] = probes.strace_counts(wrap_out)
    elif wrap is probes.callgrind_wrap:
        run["instructions"] = probes.callgrind_total(err)
        if status == "ok" and run["instructions"] is None:
            run["status"], run["detail"] = "error", "no instruction count from callgrind"
    return run


def run_syscalls(job, alloc, timeout):
    """The job once more under strace: its memory syscalls, per 1000 mallocs."""
    run = run_one(job, alloc, timeout, wrap=probes.strace_wrap)
    if run["status"] == "ok":
        for c in run["result"]["cases"]:
            c["metrics"] = probes.syscall_metrics(run["syscalls"], c["metrics"].get("mallocs"))
    return run


def run_callgrind(job, alloc, timeout):
    """Instructions per malloc+free pair: the job at two iteration counts under
    callgrind, for the allocator and (once per job) for the empty loop."""
    if "loop_instr" not in job:
        base = [run_one(job, {"name": "glibc", "path": ""}, timeout, probes.callgrind_wrap,
                        dict(job["args"], iters=n, alloc="none")) for n in job["iters"]]
        ok = all(b["status"] == "ok" for b in base)
        job["loop_instr"] = probes.per_pair([b["instructions"] for b in base], job["iters"],
                                            probes.STANDIN_INSTR) if ok else None
    runs = [run_one(job, alloc, timeout, probes.callgrind_wrap, dict(job["args"], iters=n))
            for n in job["iters"]]
    run = next((r for r in runs if r["status"] != "ok"), runs[-1])
    if run["status"] == "ok" and job["loop_instr"] is None:
        run["status"], run["detail"] = "error", "the empty loop did not run under callgrind"
    if run["status"] == "ok":
        pair = probes.per_pair([r["instructions"] for r in runs], job["iters"], job["loop_instr"])
        for c in run["result"]["cases"]:
            c["metrics"] = {"instr_per_pair": pair, "loop_instr": job["loop_instr"]}
    return run


def first_line(text, prefix):
    for line in text.splitlines():
        if line.startswith(prefix) and line.strip():
            return line.strip()[:200]
    return (text.strip().splitlines() or ["no output"])[-1][:200]


def served_by(origin, alloc):
    """Did LD_PRELOAD take effect? (ld.so only warns when it cannot preload.)"""
    if not alloc["path"]:
        return "libc.so" in os.path.basename(origin)
    try:
        return os.path.realpath(origin) == os.path.realpath(alloc["path"])
    except OSError:
        return False


class Progress:
    """One live line on stderr (a line every ~5% when stderr is not a terminal)."""

    def __init__(self, total_est, runs):
        self.tty = sys.stderr.isatty()
        self.total_est, self.runs = total_est, runs
        self.done_est, self.done, self.failed, self.shown = 0.0, 0, 0, -1
        self.t0 = time.monotonic()

    def show(self, label):
        elapsed = time.monotonic() - self.t0
        left = (self.total_est - self.done_est) * (elapsed / self.done_est if self.done_est else 1.0)
        line = "[%3d/%d] %-40s %s elapsed, ~%s left%s" % (
            self.done + 1, self.runs, label[:40], clock(elapsed), clock(left),
            ", %d FAILED" % self.failed if self.failed else "")
        if self.tty:
            sys.stderr.write("\r\033[K" + line)
            sys.stderr.flush()
        elif self.done * 20 // self.runs != self.shown:
            self.shown = self.done * 20 // self.runs
            print(line, file=sys.stderr, flush=True)

    def step(self, est, ok):
        self.done += 1
        self.done_est += est
        self.failed += not ok

    def end(self):
        if self.tty:
            sys.stderr.write("\r\033[K")
        print("bench: %d runs in %s, %d failed" % (self.done, clock(time.monotonic() - self.t0),
                                                  self.failed), file=sys.stderr, flush=True)


def clock(s):
    s = int(max(0, s))
    return "%d:%02d" % (s // 60, s % 60)


# ---- figures ---------------------------------------------------------------------

def summarize(jobs, allocs, runs):
    """summary[workload] = rows in order: {job, case, threads, size, metrics, failed}.
    A job's syscall-counting run adds its sys_* metrics to the rows; its failure
    is listed with the others but does not mark the timed cells."""
    summary = {}
    for job in jobs:
        rows, order = {}, []
        job_runs = [r for r in runs if r["job"] == job["id"]]
        for r in job_runs:
            if r["status"] != "ok":
                continue
            for c in r["result"]["cases"]:
                row = rows.get(c["case"])
                if row is None:
                    row = rows[c["case"]] = {"job": job["id"], "case": c["case"],
                                             "threads": c.get("threads"), "size": c.get("size"),
                                             "values": {}}
                    order.append(c["case"])
                for m, v in c["metrics"].items():
                    if v is None:  # the program could not compute it
                        continue
                    row["values"].setdefault(m, {}).setdefault(r["alloc"], []).append(v)
        job_runs = [r for r in job_runs if r.get("kind") != "syscalls"]
        failed = {}
        for r in job_runs:
            if r["status"] != "ok":
                failed.setdefault(r["alloc"], []).append(r["status"])
        if not order:  # every run failed: one row that says so
            rows["(no run passed)"] = {"job": job["id"], "case": job_label(job),
                                       "threads": None, "size": None, "values": {}}
            order.append("(no run passed)")
        for case in order:
            row = rows[case]
            row["failed"] = failed
            row["reps"] = {a["name"]: sum(1 for r in job_runs if r["alloc"] == a["name"])
                           for a in allocs}
            row["metrics"] = {m: {a: stats(v) for a, v in per.items()}
                              for m, per in row.pop("values").items()}
            summary.setdefault(job["workload"], []).append(row)
    return summary


def stats(values):
    med = statistics.median(values)
    return {"median": med, "min": min(values), "max": max(values), "n": len(values),
            "spread_pct": (max(values) - min(values)) / 2 / med * 100 if med else 0.0,
            "values": values}


# ---- facts about the machine -------------------------------------------------------

def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            mem = round(int(f.readline().split()[1]) / 2**20, 1)
    except OSError:
        mem = "?"
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gib": mem, "kernel": platform.release(),
            "glibc": (os.confstr("CS_GNU_LIBC_VERSION") or "?").replace("glibc ", "")}


def load():
    try:
        return "%.2f" % os.getloadavg()[0]
    except OSError:
        return "?"


def command_out(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10,
                              cwd=ROOT).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def lib_version(name, path):
    if not path:
        return "glibc " + machine()["glibc"]
    if name.startswith("brisk") or path.startswith(ROOT):
        return os.path.relpath(path, ROOT) if path.startswith(ROOT) else path
    owner = command_out(["dpkg-query", "-S", os.path.realpath(path)]).split(":")[0]
    if owner:
        ver = command_out(["dpkg-query", "-W", "-f", "${Version}", owner])
        return "%s %s" % (owner, ver)
    return path


# ---- main ---------------------------------------------------------------------------

def usable(jobs):
    """The jobs whose programs and tools are here, and notes on what is not."""
    notes, keep = [], []
    for job in jobs:
        prog = job["prog"]
        if prog.endswith(".py"):
            if not PYTHON:
                notes.append("no Python interpreter: %s left out" % job["workload"])
                continue
        elif not os.access(os.path.join(BIN, prog), os.X_OK):
            sys.exit("bench: program %s not built; run make -C bench" % prog)
        if job.get("tool") == "callgrind" and not probes.have("valgrind"):
            notes.append("valgrind not found: no instruction counts (callgrind)")
            continue
        if job.get("syscalls") and not probes.have("strace"):
            notes.append("strace not found: no syscall counts")
            job["syscalls"] = False
        keep.append(job)
    return keep, sorted(set(notes))


def tasks(jobs, allocs, reps):
    """(rep, job, allocator, estimated seconds, kind) in the order they run:
    every repetition runs each job under every allocator, in an order rotated
    by one from job to job and from repetition to repetition; callgrind jobs
    run in the first repetition only (their counts do not vary); last, one
    strace run per allocator of each job that counts syscalls."""
    todo = []
    for rep in range(reps):
        for job in jobs:
            if job.get("tool") == "callgrind" and rep > 0:
                continue
            mine = job_allocs(job, allocs)
            k = (rep + job["id"]) % len(mine)
            kind = job.get("tool") or "timed"
            todo += [(rep, job, a, job["est"], kind) for a in mine[k:] + mine[:k]]
    for job in jobs:
        if job.get("syscalls"):
            todo += [("syscalls", job, a, 1.5 * job["est"], "syscalls") for a in job_allocs(job, allocs)]
    return todo


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=MODES, default="quick")
    ap.add_argument("--alloc", action="append", default=[], metavar="NAME=PATH",
                    help="an allocator to test; an empty PATH means glibc (no LD_PRELOAD)")
    ap.add_argument("--missing", action="append", default=[], metavar="NAME=REASON",
                    help="an allocator that could not be tested, named in the report")
    ap.add_argument("--only", default="", help="comma-separated workloads (default: all)")
    ap.add_argument("--reps", type=int, help="repetitions (default: by mode)")
    ap.add_argument("--out", help="results directory (default: bench/results/<time>-<mode>)")
    ap.add_argument("--plot-python", help="a python with matplotlib, to draw the PNGs")
    ap.add_argument("--command", default=" ".join(sys.argv), help="command shown in the report")
    args = ap.parse_args()

    allocs, skipped = [], {}
    for spec in args.alloc:
        name, _, path = spec.partition("=")
        if path and not os.path.exists(path):
            skipped[name] = "%s not found" % path
            print("bench: %s: %s not found, skipped" % (name, path), file=sys.stderr)
            continue
        allocs = [a for a in allocs if a["name"] != name]  # a later --alloc NAME wins
        skipped.pop(name, None)
        allocs.append({"name": name, "path": os.path.abspath(path) if path else ""})
    for spec in args.missing:
        name, _, why = spec.partition("=")
        if name not in [a["name"] for a in allocs]:
            skipped[name] = why
    if not allocs:
        allocs = [{"name": "glibc", "path": ""}]
    for a in allocs:
        a["version"] = lib_version(a["name"], a["path"])
    mode = MODES[args.mode]
    reps = args.reps or mode["reps"]
    only = set(filter(None, args.only.split(",")))
    unknown = only - {w for w, *_ in WORKLOADS}
    if unknown:
        sys.exit("bench: no workload named %s" % ", ".join(sorted(unknown)))
    jobs, notes = usable(plan(args.mode, os.cpu_count() or 1, only))
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = args.out or os.path.join(
        HERE, "results", "smoke" if args.mode == "smoke" else "%s-%s" % (stamp, args.mode))
    os.makedirs(out_dir, exist_ok=True)
    jobs, replay_notes = traces.prepare(jobs, mode.get("replay", {}), out_dir)
    notes = sorted(set(notes + replay_notes))

    meta = {"mode": args.mode, "command": args.command, "reps": reps,
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "commit": command_out(["git", "rev-parse", "--short", "HEAD"]) or "an uncommitted tree",
            "machine": machine(), "load_before": load(), "skipped": skipped,
            "notes": notes, "params": {k: v for k, v in mode.items()}}

    runs = []
    jobs = [j for j in jobs if job_allocs(j, allocs)]
    for i, job in enumerate(jobs):
        job["id"] = i
    todo = tasks(jobs, allocs, reps)
    progress = Progress(sum(t[3] for t in todo), len(todo))
    for rep, job, alloc, est, kind in todo:
        progress.show("%s %s %s" % ("rep %d/%d" % (rep + 1, reps) if kind == "timed" else kind,
                                    job_label(job), alloc["name"]))
        if kind == "syscalls":
            run = run_syscalls(job, alloc, mode["timeout"])
        elif kind == "callgrind":
            run = run_callgrind(job, alloc, mode["timeout"])
        else:
            run = run_one(job, alloc, mode["timeout"])
        run["rep"] = rep
        runs.append(run)
        progress.step(est, run["status"] == "ok")
        if run["status"] != "ok":
            print("%sbench: %s under %s%s: %s (%s)" % (
                "\n" if progress.tty else "", job_label(job), alloc["name"],
                " (%s)" % kind if kind != "timed" else "", run["status"].upper(), run["detail"]),
                file=sys.stderr)
    progress.end()
    meta["load_after"] = load()

    summary = summarize(jobs, allocs, runs)
    results = {"meta": meta, "allocators": allocs, "jobs": jobs, "summary": summary, "runs": runs}
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)

    plots = []
    if args.plot_python:
        proc = subprocess.run([args.plot_python, os.path.join(HERE, "plot.py"), out_dir],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            plots = [(line.split()[0], line.split()[1:]) for line in proc.stdout.splitlines()
                     if line.strip()]
        else:
            print("bench: plots failed: %s" % proc.stderr.strip()[-500:], file=sys.stderr)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(report(meta, allocs, jobs, summary, runs, plots))

    if args.out is None and args.mode != "smoke":
        latest = os.path.join(HERE, "results", "latest")
        if os.path.islink(latest) or not os.path.exists(latest):
            if os.path.islink(latest):
                os.unlink(latest)
            os.symlink(os.path.basename(out_dir), latest)
    failed = sum(r["status"] != "ok" for r in runs)
    print("bench: %d runs, %d failed; report: %s" % (
        len(runs), failed, os.path.relpath(os.path.join(out_dir, "report.md"), os.getcwd())),
        file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

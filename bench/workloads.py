"""What the benchmark suite runs: the parameters of each mode (MODES), the
report's sections and tables (WORKLOADS, METRIC_LABELS) and the jobs of one
repetition (plan()). bench/run.py runs them; see bench/README.md.
"""
# ---- what runs in each mode --------------------------------------------------

# Per workload: the key=value arguments of its jobs, or the values plan() makes
# them from (a list there gives one job, so one process, per value).
MODES = {
    "smoke": {
        "reps": 1,
        "timeout": 10,
        "sweep": {"ms": 5, "sizes": "16,64,1K,64K,1M,32M"},
        "ring": {"threads": [1, 2], "slots": 1000, "ms": 20, "slots_small": 200},
        "xthread": {"ms": 20, "rounds": 500, "slots": 1000},
        "sizecat": {"ms": 5},
        "sizecat_bulk": {"live": [100, 50, 8, 2], "fill": [0], "ms": 5},
        "large": {"count": 2, "min": "1M", "max": "4M", "ms": 20, "settle_ms": 0},
        "large_loop": {"count": 1, "ms": 20, "settle_ms": 0},
        "churn": {"ms": 30, "blocks": 100},
        "fixed": {"count": 1000, "ms": 5},
        "bursty": {"threads": 4, "rounds": 20, "burst": 50, "generations": [1, 10]},
        "wide": {"window": 16, "ms": 20},
        "server": {"ms": 20},
        "falseshare": {"ms": 10},
        "cpython": {"ms": 20, "entries": 200},
        "replay": {"python_ms": 20, "sqlite_rows": 2000, "sort_lines": 5000},
    },
    "quick": {
        "reps": 3,
        "timeout": 60,
        "sweep": {"ms": 15},
        "ring": {"threads": [1, 2, 4, 8], "slots": 100000, "ms": 150, "slots_small": 4000},
        "xthread": {"ms": 200, "rounds": 10000, "slots": 10000},
        "sizecat": {"ms": 30},
        "sizecat_bulk": {"live": [10000, 2000, 256, 32], "fill": [0], "ms": 100},
        "large": {"count": 8, "ms": 300, "settle_ms": 1000},
        "large_loop": {"count": 12, "ms": 300, "settle_ms": 1000},
        "churn": {"ms": 300, "blocks": 1000},
        "fixed": {"count": 100000, "ms": 50},
        "bursty": {"threads": 8, "rounds": 1000, "burst": 200, "generations": [1, 200]},
        "wide": {"window": 256, "ms": 300},
        "server": {"ms": 400},
        "falseshare": {"ms": 150},
        "cpython": {"ms": 600},
        "replay": {"python_ms": 300, "sqlite_rows": 30000, "sort_lines": 100000},
        "callgrind": {"live": [0, 1000], "iters": [20000, 40000]},
    },
    "full": {
        "reps": 5,
        "timeout": 180,
        "sweep": {"ms": 100},
        "ring": {"threads": [1, 2, 4, 8], "slots": 100000, "ms": 1000, "slots_small": 4000},
        "xthread": {"ms": 1000, "rounds": 20000, "slots": 10000},
        "sizecat": {"ms": 200},
        "sizecat_bulk": {"live": [10000, 2000, 256, 32], "fill": [0, 1], "ms": 1000},
        "large": {"count": 16, "ms": 1000, "settle_ms": 1500},
        "large_loop": {"count": 12, "ms": 1000, "settle_ms": 1000},
        "churn": {"ms": 1000, "blocks": 1000},
        "fixed": {"count": 100000, "ms": 200},
        "bursty": {"threads": 8, "rounds": 4000, "burst": 200, "generations": [1, 200]},
        "wide": {"window": 256, "ms": 2000},
        "server": {"ms": 2000},
        "falseshare": {"ms": 1000},
        "cpython": {"ms": 3000},
        "replay": {"python_ms": 1000, "sqlite_rows": 100000, "sort_lines": 300000},
        "callgrind": {"live": [0, 1000], "iters": [20000, 40000]},
    },
}

# The syscall counts of bench/probes.py, as metrics.
SYSCALL_METRICS = ["sys_mmap", "sys_munmap", "sys_madvise", "sys_mremap", "sys_brk", "sys_all"]

SWEEP_SIZES = 13  # the sweep program's default list
SIZE_RANGES = 4   # sizecat's categories

# For the report: workload id, title, what it does, and its tables:
# (table title, metrics shown, +1 if higher is better / -1 if lower is).
WORKLOADS = [
    ("sweep", "1. Size sweep",
     "`malloc(N)`, write `p[0]`, `free`, in a loop; each thread on its own.",
     [("M ops/s (one op = malloc + write + free)", ["mops"], +1)]),
    ("ring", "2. Mixed ring",
     "Each thread replaces random slots of a ring of blocks (60% 16-256 B, "
     "30% 512 B-2 KiB, 10% 4-32 KiB, each memset); 100 000 slots per thread, "
     "and 4000 at 2 threads (\"4000 live\"). Latency: one replacement in 16 timed, "
     "the timer's own ~20 ns subtracted, percentiles interpolated between the "
     "clock's steps (bench/latency.h).",
     [("M replacements/s", ["mops"], +1),
      ("Peak RSS, MiB", ["peak_rss_mb"], -1),
      ("malloc latency, ns", ["malloc_p50", "malloc_p99", "malloc_p999", "malloc_max",
                              "malloc_mean"], -1),
      ("free latency, ns", ["free_p50", "free_p99", "free_p999", "free_max", "free_mean"], -1)]),
    ("xthread", "3. Cross-thread free",
     "Producers allocate, consumers free (batches of 256 over a lock-free "
     "queue); larson: threads swap blocks through a shared table and are "
     "replaced every few thousand steps.",
     [("M blocks/s", ["mops"], +1),
      ("larson: worker threads replaced per second", ["threads_per_s"], +1)]),
    ("sizecat", "4. Size categories",
     "Random sizes within a category, window of 8 live blocks per thread; "
     "`free` = malloc + free only, `fill` = every byte written and checked. "
     "`N live`: many blocks live, one thread: N allocated, then all freed (in "
     "allocation order, in reverse, in random order, by turns), over and over; "
     "syscalls from one more run per allocator under strace.",
     [("k ops/s (one op = malloc + free, + fill + check)", ["kops"], +1),
      ("memory syscalls per 1000 mallocs, many live (strace -c)", SYSCALL_METRICS, -1)]),
    ("large", "5. Large buffers",
     "Buffers of 1-32 MiB, and of 5-25 MiB (the loop of the issue), written in full. "
     "First touch: all live at once, every page new. Recycled: one at a time, "
     "malloc/write/free. RSS once all are freed: at once, and after settling (1 s).",
     [("GB/s written", ["gbps"], +1),
      ("minor page faults per MiB", ["faults_per_mib"], -1),
      ("RSS after the phase, MiB", ["rss_after_mb", "rss_settled_mb"], -1)]),
    ("churn", "6. Thread churn",
     "Short-lived threads allocate, hand half their blocks to a survivor "
     "thread, free the rest and exit.",
     [("short threads per second", ["threads_per_s"], +1),
      ("RSS, MiB", ["rss_early_mb", "rss_end_mb", "peak_rss_mb"], -1)]),
    ("fixed", "7. Fixed-size objects",
     "Many objects of one size allocated in bulk, then all freed: with each allocator's "
     "`malloc`, and with brisk's pool API (`brisk_pool`, brisk only, compared with the "
     "peers' best `malloc`).",
     [("M objects/s (alloc + free)", ["mops"], +1)]),
    ("bursty", "8. Bursty cross-thread transfer",
     "8 thread slots, each round: free what others handed over, allocate a burst of "
     "mixed sizes (70% 16-256 B, 25% to 8 KiB, 5% to 64 KiB), keep a quarter a few "
     "rounds, hand half to another slot (a lock-free inbox), free the rest. A fixed "
     "amount of work; with G generations each slot's rounds are split among G "
     "threads that exit in turn. The program's own live bytes peak near 20 MiB "
     "(`live_peak_mb` in results.json).",
     [("seconds for the whole run", ["secs"], -1),
      ("RSS, MiB", ["peak_rss_mb", "rss_end_mb"], -1)]),
    ("wide", "9. Wide random sizes",
     "2 threads, a window of live blocks each, random replacements; sizes 16 B-4 MiB, "
     "log-uniform (each power of two as likely, so a third are 64 KiB or more). "
     "`touch ends`: the first and last 8 bytes written; `touch pages`: a word on "
     "every 4 KiB page too. Syscalls: one more run per allocator under strace.",
     [("k ops/s (one op = free + malloc + touch)", ["kops"], +1),
      ("Peak RSS, MiB", ["peak_rss_mb"], -1),
      ("memory syscalls per 1000 mallocs (strace -c)", SYSCALL_METRICS, -1)]),
    ("server", "10. Server",
     "Acceptor threads build requests (an object, a 64 B-16 KiB body, 1-8 header "
     "strings) and queue them in batches of 16; worker threads check each request, "
     "allocate scratch buffers and a 64 B-16 KiB response, free the request; a writer "
     "thread frees the responses. About 10 mallocs per request, nearly all freed by "
     "another thread. 7 threads on 2 cores: expect a wide spread.",
     [("k requests/s", ["kreqs"], +1),
      ("Peak RSS, MiB", ["peak_rss_mb"], -1)]),
    ("falseshare", "11. False sharing",
     "After Hoard's cache-thrash (active) and cache-scratch (passive): each thread "
     "allocates 4 objects of 8 B, increments each byte 100 times, checks and frees "
     "them; passive: the objects are first allocated side by side by the main thread, "
     "dealt out and freed by the workers. Objects of two threads on one cache line "
     "slow the writes; with 1 thread there is nothing to share.",
     [("M writes/s per thread", ["mwrites_per_thr"], +1)]),
    ("cpython", "12. CPython",
     "python3 with PYTHONMALLOC=malloc (every object from the allocator tested) "
     "building dicts of 2000 records (strings, ints, floats, lists, nested dicts), "
     "json.dumps and json.loads, each round trip checked; the last 8 documents "
     "stay alive.",
     [("k records/s (built, dumped, loaded, compared)", ["krecords"], +1),
      ("Peak RSS, MiB", ["peak_rss_mb"], -1)]),
    ("callgrind", "13. Instructions per malloc + free",
     "`p = malloc(32); p[0] = x; free(p)` in a loop, with no other block live and with "
     "1000 live, counted by valgrind's callgrind: the difference between runs of 40000 "
     "and 20000 iterations (start-up and exit excluded), less the same loop calling "
     "empty stand-ins (the loop excluded). Counted once; instructions, not time.",
     [("instructions per 32 B malloc + free pair (callgrind)", ["instr_per_pair"], -1)]),
    ("replay", "14. Replays of real programs",
     "Traces recorded at bench time (bench/traces.py, the recorder of `brisk-run --record`) "
     "from python3 (bench/cpython.py, PYTHONMALLOC=malloc), sqlite3 (a table filled, indexed, "
     "grouped, updated, vacuumed), g++ -O2 compiling tests/preload/sample.cpp (cc1plus) and "
     "sort through temporary files, then replayed by brisk-replay-driver with the recorded "
     "threads and cross-thread frees: the allocator's share of each program, without the "
     "program. RSS is over the driver's own (the loaded trace); every replay makes every "
     "recorded call (else WRONG).",
     [("seconds for the whole replay", ["secs"], -1),
      ("CPU seconds", ["cpu_secs"], -1),
      ("RSS, MiB", ["peak_rss_mb", "final_rss_mb"], -1),
      ("page faults", ["faults"], -1),
      ("malloc latency, ns", ["malloc_p50", "malloc_p99", "malloc_p999"], -1),
      ("memory syscalls per 1000 mallocs (strace -c)", SYSCALL_METRICS, -1)]),
]

METRIC_LABELS = {
    "malloc_p50": "P50", "malloc_p99": "P99", "malloc_p999": "P99.9", "malloc_max": "max",
    "free_p50": "P50", "free_p99": "P99", "free_p999": "P99.9", "free_max": "max",
    "malloc_mean": "mean", "free_mean": "mean",
    "sys_mmap": "mmap", "sys_munmap": "munmap", "sys_madvise": "madvise",
    "sys_mremap": "mremap", "sys_brk": "brk", "sys_all": "all memory syscalls",
    "rss_after_mb": "at once", "rss_settled_mb": "after settling",
    "rss_early_mb": "after 1/4 of the run", "rss_end_mb": "at the end", "peak_rss_mb": "peak",
    "final_rss_mb": "final",
}


def plan(mode, ncpu, only):
    """The jobs of one repetition: dicts with workload, prog, args, est (s)."""
    p = MODES[mode]
    jobs = []

    def add(workload, est, only_alloc=None, job=None, **args):
        """job: more of the job's fields: prog (when not the workload's name),
        syscalls=True (one more run under strace per allocator), tool="callgrind"
        with iters=[n1, n2] (run once, under valgrind; see bench/probes.py)."""
        if only and workload not in only:
            return
        jobs.append(dict({"id": len(jobs), "workload": workload, "prog": workload,
                          "args": args, "est": est + 0.05, "only_alloc": only_alloc}, **(job or {})))

    both = sorted({1, ncpu})
    s = p["sweep"]
    nsizes = len(s["sizes"].split(",")) if "sizes" in s else SWEEP_SIZES
    for t in both:
        add("sweep", nsizes * s["ms"] / 1000, threads=t, **s)
    r = dict(p["ring"])
    small = r.pop("slots_small")
    for t in r.pop("threads"):
        add("ring", r["ms"] / 1000 + t * r["slots"] * 4e-6, threads=t, **r)
    r["slots"] = small
    add("ring", r["ms"] / 1000 + 2 * small * 4e-6, threads=2, **r)
    x = p["xthread"]
    xt = max(2, ncpu)
    add("xthread", x["ms"] / 1000, mode="pc64", threads=xt, ms=x["ms"])
    add("xthread", x["ms"] / 1000, mode="pcmixed", threads=xt, ms=x["ms"])
    add("xthread", x["ms"] / 1000, mode="larson", threads=xt, **x)
    for t in both:
        add("sizecat", 2 * SIZE_RANGES * p["sizecat"]["ms"] / 1000, threads=t, **p["sizecat"])
    # many blocks live, one thread, one process per range (syscalls per range)
    sb = p["sizecat_bulk"]
    for fill in sb["fill"]:
        for rng, live in enumerate(sb["live"]):
            add("sizecat", sb["ms"] / 1000 + fill * live * 2**rng * 3e-4,
                job={"syscalls": not fill}, mode="bulk", ranges=rng, live=live, fill=fill,
                threads=1, ms=sb["ms"])
    g = p["large"]
    add("large", g["count"] * 0.02 + (g["ms"] + g["settle_ms"]) / 1000, **g)
    # the loop of 5-25 MiB buffers, each touched and freed; RSS 1 s later
    g = p["large_loop"]
    add("large", g["count"] * 0.02 + (g["ms"] + g["settle_ms"]) / 1000, min="5M", max="25M", **g)
    add("churn", p["churn"]["ms"] / 1000, **p["churn"])
    add("fixed", 4 * p["fixed"]["ms"] / 1000, **p["fixed"])
    # brisk's pool API, under brisk only; its rows are compared with the
    # peers' malloc rows of the same size.
    add("fixed", 4 * p["fixed"]["ms"] / 1000, only_alloc="brisk", backend="brisk_pool", **p["fixed"])
    b = dict(p["bursty"])
    for g in b.pop("generations"):  # the same work, split among g threads per slot
        add("bursty", b["threads"] * b["rounds"] * b["burst"] / 3e6, generations=g, **b)
    w = p["wide"]
    for touch in ("ends", "pages"):
        add("wide", w["ms"] / 1000 + w["window"] * 1e-3, job={"syscalls": True},
            threads=2, touch=touch, **w)
    add("server", p["server"]["ms"] / 1000, acceptors=2, workers=2 * max(2, ncpu), **p["server"])
    for t in both:
        add("falseshare", 2 * p["falseshare"]["ms"] / 1000, threads=t, **p["falseshare"])
    add("cpython", 0.2 + p["cpython"]["ms"] / 1000, job={"prog": "cpython.py"}, **p["cpython"])
    if "replay" in p:  # traces made at bench time: bench/traces.py fills in trace=
        for name in ("python", "sqlite3", "g++", "sort"):
            add("replay", 0.5, job={"prog": "brisk-replay-driver", "syscalls": True}, name=name)
    if "callgrind" in p:  # not in smoke mode: valgrind takes seconds
        cg = p["callgrind"]
        for live in cg["live"]:
            add("callgrind", 1.5, job={"prog": "pairs", "tool": "callgrind", "iters": cg["iters"]},
                size=32, live=live)
    return jobs

#!/usr/bin/env python3
"""Draws the PNG plots of one results directory (needs matplotlib):

    .venv-bench/bin/python bench/plot.py bench/results/latest

Reads results.json, writes the PNGs beside it and prints one line per plot,
"<file> <workload>", which run.py uses to place it in report.md. Error bars
span the lowest and highest repetition; the dot is the median.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def size_label(n):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %s" % (n >> shift, unit)
    return "%d B" % n


class Plotter:
    def __init__(self, out):
        self.out = out
        with open(os.path.join(out, "results.json")) as f:
            self.res = json.load(f)
        self.names = [a["name"] for a in self.res["allocators"]]
        self.summary = self.res["summary"]
        self.made = []

    def style(self, name):
        color = "C%d" % self.names.index(name)
        return {"color": color, "linewidth": 2.6 if name == "brisk" else 1.4,
                "marker": "o", "markersize": 4, "capsize": 2}

    def line(self, ax, rows, metric, x_of):
        """One line per allocator through rows, x from x_of(row)."""
        for name in self.names:
            pts = [(x_of(r), r["metrics"][metric][name]) for r in rows
                   if name in r["metrics"].get(metric, {})]
            if not pts:
                continue
            pts.sort(key=lambda p: p[0])
            xs = [p[0] for p in pts]
            med = [p[1]["median"] for p in pts]
            err = [[p[1]["median"] - p[1]["min"] for p in pts],
                   [p[1]["max"] - p[1]["median"] for p in pts]]
            ax.errorbar(xs, med, yerr=err, label=name, **self.style(name))

    def bars(self, ax, row, metrics, labels):
        """Grouped bars: one group per metric, one bar per allocator."""
        width = 0.8 / max(1, len(self.names))
        for i, name in enumerate(self.names):
            xs, med, lo, hi = [], [], [], []
            for j, m in enumerate(metrics):
                st = row["metrics"].get(m, {}).get(name)
                if st:
                    xs.append(j + (i - (len(self.names) - 1) / 2) * width)
                    med.append(st["median"])
                    lo.append(st["median"] - st["min"])
                    hi.append(st["max"] - st["median"])
            if xs:
                ax.bar(xs, med, width, yerr=[lo, hi], label=name, color="C%d" % i,
                       edgecolor="black" if name == "brisk" else None, capsize=2)
        ax.set_xticks(range(len(metrics)))
        ax.set_xticklabels(labels)

    @staticmethod
    def merged(pairs):
        """One row for bars() out of (row, metric) pairs: metric i is "i"."""
        return {"metrics": {str(i): row["metrics"].get(m, {}) for i, (row, m) in enumerate(pairs)}}

    def bars_of(self, ax, pairs, labels):
        """Grouped bars, one group per (row, metric) pair."""
        self.bars(ax, self.merged(pairs), [str(i) for i in range(len(pairs))], labels)

    def args(self, row):
        """The arguments of the job that made the row."""
        return self.res["jobs"][row["job"]]["args"]

    def ring_rows(self, small=False):
        """The ring's rows with the most slots (or, small=True, the others)."""
        rows = self.summary.get("ring", [])
        most = max((self.args(r).get("slots", 0) for r in rows), default=0)
        return [r for r in rows if (self.args(r).get("slots", 0) < most) == small]

    def save(self, fig, name, workload):
        fig.tight_layout()
        fig.savefig(os.path.join(self.out, name), dpi=110)
        plt.close(fig)
        self.made.append((name, workload))

    def throughput_vs_size(self):
        rows = [r for r in self.summary.get("sweep", []) if r.get("size")]
        threads = sorted({r["threads"] for r in rows})
        if not threads:
            return
        fig, axes = plt.subplots(1, len(threads), figsize=(6.5 * len(threads), 4.5), squeeze=False)
        for ax, t in zip(axes[0], threads):
            sub = [r for r in rows if r["threads"] == t]
            self.line(ax, sub, "mops", lambda r: r["size"])
            sizes = sorted({r["size"] for r in sub})
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(sizes)
            ax.set_xticklabels([size_label(s) for s in sizes], rotation=60, fontsize=8)
            ax.minorticks_off()
            ax.set_title("malloc + write + free, %d thread%s" % (t, "s" if t > 1 else ""))
            ax.set_ylabel("M ops/s (log)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        self.save(fig, "throughput_vs_size.png", "sweep")

    def throughput_vs_threads(self):
        rows = self.ring_rows()
        if not any(r["metrics"] for r in rows):
            return
        fig, ax = plt.subplots(figsize=(6.5, 4.5))
        self.line(ax, [r for r in rows if r["threads"]], "mops", lambda r: r["threads"])
        threads = sorted({r["threads"] for r in rows if r["threads"]})
        ax.set_xscale("log", base=2)
        ax.set_xticks(threads)
        ax.set_xticklabels([str(t) for t in threads])
        ax.minorticks_off()
        ax.set_xlabel("threads")
        ax.set_ylabel("M replacements/s")
        ax.set_title("mixed ring: throughput vs threads")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        self.save(fig, "throughput_vs_threads.png", "ring")

    def latency(self):
        # one line of panels per ring size: the thread count nearest 2 of each
        picked = []
        for small in (False, True):
            rows = [r for r in self.ring_rows(small) if r["metrics"].get("malloc_p50")]
            if rows:
                picked.append(min(rows, key=lambda r: abs((r["threads"] or 0) - 2)))
        if not picked:
            return
        fig, axes = plt.subplots(len(picked), 2, figsize=(12, 4.5 * len(picked)), squeeze=False)
        for row, pair in zip(picked, axes):
            for ax, op in zip(pair, ("malloc", "free")):
                self.bars(ax, row, ["%s_%s" % (op, p) for p in ("p50", "p99", "p999", "max", "mean")],
                          ["P50", "P99", "P99.9", "max", "mean"])
                ax.set_yscale("log")
                ax.set_ylabel("ns (log)")
                ax.set_title("mixed ring, %s latency, %s" % (op, row["case"]))
                ax.grid(alpha=0.3, axis="y")
                ax.legend(fontsize=8)
        self.save(fig, "latency.png", "ring")

    def rss(self):
        panels = []
        ring = [r for r in self.ring_rows() if r["metrics"].get("peak_rss_mb")]
        if ring:
            panels.append("ring")
        large = [r for r in self.summary.get("large", []) if r["metrics"].get("rss_after_mb")]
        churn = [r for r in self.summary.get("churn", []) if r["metrics"].get("rss_end_mb")]
        panels += ["large"] * bool(large) + ["churn"] * bool(churn)
        if not panels:
            return
        fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.5), squeeze=False)
        for ax, panel in zip(axes[0], panels):
            if panel == "ring":
                self.line(ax, ring, "peak_rss_mb", lambda r: r["threads"])
                ax.set_xscale("log", base=2)
                ticks = sorted({r["threads"] for r in ring})
                ax.set_xticks(ticks)
                ax.set_xticklabels([str(t) for t in ticks])
                ax.minorticks_off()
                ax.set_xlabel("threads")
                ax.set_title("mixed ring: peak RSS")
            elif panel == "large":
                pairs = [(r, m) for r in large for m in ("rss_after_mb", "rss_settled_mb")]
                self.bars_of(ax, pairs, ["%s\n%s" % (r["case"].split(", ", 1)[-1],
                                                      "at once" if m == "rss_after_mb" else "settled")
                                         for r, m in pairs])
                ax.set_title("large buffers: RSS once all are freed")
            else:
                self.bars(ax, churn[0], ["rss_early_mb", "rss_end_mb", "peak_rss_mb"],
                          ["after 1/4", "at end", "peak"])
                ax.set_title("thread churn: RSS")
            ax.set_ylabel("MiB")
            ax.grid(alpha=0.3, axis="y")
            ax.legend(fontsize=8)
        self.save(fig, "rss.png", "large" if "large" in panels else panels[0])


    def bursty(self):
        rows = [r for r in self.summary.get("bursty", []) if r["metrics"].get("secs")]
        if not rows:
            return
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        self.bars_of(axes[0], [(r, "secs") for r in rows], [r["case"] for r in rows])
        axes[0].set_ylabel("seconds")
        axes[0].set_title("bursty cross-thread: time for the same work")
        pairs = [(r, m) for r in rows for m in ("peak_rss_mb", "rss_end_mb")]
        self.bars_of(axes[1], pairs, ["%s\n%s" % (r["case"].split(", ")[-1],
                                                   "peak" if m == "peak_rss_mb" else "at the end")
                                      for r, m in pairs])
        axes[1].set_ylabel("MiB")
        axes[1].set_title("bursty cross-thread: RSS")
        for ax in axes:
            ax.grid(alpha=0.3, axis="y")
            ax.legend(fontsize=8)
        self.save(fig, "bursty.png", "bursty")

    def syscalls(self):
        rows = [(w, r) for w in ("wide", "sizecat") for r in self.summary.get(w, [])
                if r["metrics"].get("sys_all")]
        if not rows:
            return
        fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(rows)), 4.5))
        self.bars_of(ax, [(r, "sys_all") for _, r in rows],
                     ["%s\n%s" % (w, r["case"].replace(", 1 thr", "").replace(", 2 thr", ""))
                      for w, r in rows])
        ax.set_yscale("log")
        ax.set_ylabel("per 1000 mallocs (log)")
        ax.set_title("memory syscalls (strace -c: mmap, munmap, madvise, mremap, brk, ...)")
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
        self.save(fig, "syscalls.png", "wide")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: plot.py RESULTS_DIR")
    p = Plotter(sys.argv[1])
    for draw in (p.throughput_vs_size, p.throughput_vs_threads, p.latency, p.rss, p.bursty,
                 p.syscalls):
        draw()
    for name, workload in p.made:
        print(name, workload)


if __name__ == "__main__":
    main()

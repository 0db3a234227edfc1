#!/usr/bin/env bash
# The Rust benchmark: brisk, the system allocator (glibc), mimalloc and
# jemalloc (the mimalloc and tikv-jemallocator crates) as Rust's global
# allocator, each workload in a process of its own, every allocator in turn
# within a round, RUNS rounds; prints the median time and peak RSS of each
# as Markdown tables (README.md, "Rust").
#
#   rust/bench/run.sh            5 rounds, 1 and 8 threads
#   RUNS=3 THREADS="1 4 16" rust/bench/run.sh
#   SCALE=0.2 RUNS=1 rust/bench/run.sh     a quick look
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
RUNS=${RUNS:-5}
THREADS=${THREADS:-1 8}
SCALE=${SCALE:-1}
WORKLOADS=${WORKLOADS:-vec string hashmap btreemap xthread}
ALLOCATORS=(system brisk mimalloc jemalloc)

cargo build --release --quiet
OUT=target/results.tsv
: >"$OUT"
for run in $(seq 1 "$RUNS"); do
  echo "round $run of $RUNS" >&2
  for w in $WORKLOADS; do
    for t in $THREADS; do
      # Each round starts with another allocator.
      for i in 0 1 2 3; do
        a=${ALLOCATORS[$(( (i + run) % 4 ))]}
        "target/release/$a" "$w" "$t" "$SCALE" >>"$OUT"
      done
    done
  done
done

python3 - "$OUT" "$RUNS" <<'PY'
import statistics, sys
from collections import defaultdict
rows = defaultdict(lambda: defaultdict(list))
order = []
for line in open(sys.argv[1]):
    alloc, work, threads, ms, rss = line.split("\t")
    key = (work, int(threads))
    if key not in order:
        order.append(key)
    rows[key][alloc].append((float(ms), int(rss)))
allocs = ["system", "brisk", "mimalloc", "jemalloc"]
def table(title, pick, fmt):
    print(f"{title}\n")
    print("| workload | threads | " + " | ".join(allocs) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in allocs) + " |")
    for key in order:
        cells = []
        meds = {a: statistics.median(pick(r) for r in rows[key][a]) for a in allocs}
        best = min(meds.values())
        for a in allocs:
            cell = fmt(meds[a])
            cells.append(f"**{cell}**" if meds[a] == best else cell)
        print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    print()
table(f"Time in ms, median of {sys.argv[2]} (lower is better; best in bold)", lambda r: r[0], lambda v: f"{v:.0f}")
table(f"Peak RSS in MiB, median of {sys.argv[2]}", lambda r: r[1] / 1024, lambda v: f"{v:.1f}")
PY

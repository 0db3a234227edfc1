"""Runs under a tool, for bench/run.py (standard library only):

- strace: memory syscall counts (`strace -f -c -e trace=memory`), taken in one
  extra run per allocator of the jobs that ask for them, never in a timed run
  (strace slows every traced call). The counts become metrics sys_<name>, per
  1000 mallocs of that run (the program reports its `mallocs`), so a run that
  did more work under a faster allocator is not charged for it.
- callgrind: instructions per malloc+free pair, from `valgrind --tool=callgrind`
  totals of two runs of bench/pairs.c with different iteration counts (the
  difference excludes start-up and exit), minus the same difference for the
  loop calling two empty stand-in functions (the loop itself).
"""
import os
import re
import shutil
import tempfile

# The syscalls shown, in order; "all" is strace's total of the memory class
# (mprotect, mlock and the rest included).
SYSCALLS = ["mmap", "munmap", "madvise", "mremap", "brk", "all"]

# The empty stand-ins of bench/pairs.c (alloc=none) run 3 instructions a pair
# (lea + ret, ret at -O2 on x86-64) that a real malloc and free replace: they
# are the allocator's share, added back after the loop is subtracted.
STANDIN_INSTR = 3


def have(tool):
    return shutil.which(tool) is not None


def strace_wrap(argv, preload):
    """(argv, env LD_PRELOAD, output file) for a counted run. The allocator is
    preloaded into the traced program only (-E), not into strace."""
    fd, out = tempfile.mkstemp(prefix="bench-strace-", suffix=".txt")
    os.close(fd)
    wrapped = ["strace", "-f", "-c", "--seccomp-bpf", "-e", "trace=memory", "-o", out]
    if preload:
        wrapped += ["-E", "LD_PRELOAD=" + preload]
    return wrapped + argv, "", out


def strace_counts(path):
    """{syscall: calls, ..., "all": total} from an `strace -c` summary file."""
    counts = {}
    try:
        with open(path) as f:
            text = f.read()
    finally:
        os.unlink(path)
    for line in text.splitlines():
        cols = line.split()
        if len(cols) < 5 or not cols[0][0].isdigit():
            continue
        name = cols[-1]
        try:
            calls = int(cols[3])
        except ValueError:
            continue
        counts["all" if name == "total" else name] = calls
    return counts


def syscall_metrics(counts, mallocs):
    """sys_<name>: calls per 1000 mallocs, for the names in SYSCALLS."""
    if not mallocs:
        return {}
    return {"sys_" + n: counts.get(n, 0) * 1000.0 / mallocs for n in SYSCALLS}


def callgrind_wrap(argv, preload):
    return ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + argv, preload, None


def callgrind_total(stderr):
    """The instruction count callgrind prints at exit ("Collected : N")."""
    m = re.search(r"Collected\s*:\s*(\d+)", stderr or "")
    return int(m.group(1)) if m else None


def per_pair(totals, iters, loop):
    """Instructions per pair from the totals of two runs of iters[0] and
    iters[1] pairs, less `loop` (the loop's own, per pair)."""
    return (totals[1] - totals[0]) / float(iters[1] - iters[0]) - loop + STANDIN_INSTR

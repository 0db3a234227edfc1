#!/usr/bin/env python3
"""Picks the inputs of a fuzz corpus to commit, within a byte budget.

Reads a libFuzzer merge control file (-merge=1 -merge_control_file=F) and
prints the paths of the inputs to keep: first a set that covers every
code edge (COV) any input reaches, the cheapest per new edge first, then
more inputs by new features (FT: edges with hit counts, comparisons) per
byte, while the budget lasts. scripts/fuzz.sh --minimize calls it so the
committed corpus stays small and the test command's smoke replays it in
seconds.

    select_corpus.py CONTROL_FILE BUDGET_BYTES
"""
import sys


def read_control(path):
    with open(path) as f:
        lines = f.read().splitlines()
    count = int(lines[0])
    files = lines[2 : 2 + count]
    size, feats, cov = {}, {}, {}
    for line in lines[2 + count :]:
        kind, _, rest = line.partition(" ")
        idx, _, values = rest.partition(" ")
        if kind == "STARTED":
            size[int(idx)] = int(values)
        elif kind == "FT":
            feats[int(idx)] = set(values.split())
        elif kind == "COV":
            cov[int(idx)] = set(values.split())
    return files, size, feats, cov


def greedy(candidates, sets, size, have, budget, used, chosen):
    """Adds the input with the most new elements per byte until none adds any."""
    while True:
        best, best_score = None, 0.0
        for i in candidates:
            if i in chosen or used + size[i] > budget:
                continue
            new = len(sets.get(i, ()) - have)
            score = new / (size[i] + 64)  # a file costs more than its bytes
            if new and score > best_score:
                best, best_score = i, score
        if best is None:
            return used
        chosen.add(best)
        have |= sets[best]
        used += size[best]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    files, size, feats, cov = read_control(sys.argv[1])
    budget = int(sys.argv[2])
    done = [i for i in size if i in feats]  # inputs that ran to the end
    chosen = set()
    used = greedy(done, cov, size, set(), budget, 0, chosen)
    have_ft = set().union(*(feats[i] for i in chosen)) if chosen else set()
    greedy(done, feats, size, have_ft, budget, used, chosen)
    for i in sorted(chosen):
        print(files[i])


if __name__ == "__main__":
    main()

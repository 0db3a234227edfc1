#!/usr/bin/env python3
"""brisk's layer check on the symbols of a build (python3, stdlib only).

    scripts/layers.py BUILDDIR [--picture] [--root DIR] [--target NAME]

Finds the object files under BUILDDIR that were compiled from src/ (CMake puts
them at BUILDDIR/CMakeFiles/<target>.dir/src/core/heap.c.o), takes one
target's set (brisk_core_objects when there is one; a source file that target
does not compile, such as the api layer's malloc overrides, is taken from
another target, unchecked builds first), runs `nm` on each and builds the
file -> file graph: A depends on B when A uses a global symbol that B defines.

  - An edge from a lower layer up to a higher one is an error, printed as
    `src/os/linux.c:LINE: message` (LINE: where the source names the symbol).
  - So is an object file whose source is not in a layer folder.
  - Cycles between files of one layer (strongly connected components of more
    than one file) are warnings, printed so that they stay visible.
  - --picture prints the layers for docs/design.md instead of the summary:
    top layer first, each file with the files it calls into (same layer by
    name, lower layers as layer/name), and the lower layers each one uses.
    Diagnostics then go to stderr.

Exit status: 0 clean (warnings allowed), 1 on an error, 2 on bad usage.
Only symbols show up here: what a file takes from a header (static inline
functions, macros) is the include check's business (scripts/lint.sh).
"""
import argparse
import os
import re
import subprocess
import sys

# Layers bottom to top: a file may use its own layer and the ones below.
LAYERS = ["os", "ds", "core", "extra", "api"]
RANK = {name: i for i, name in enumerate(LAYERS)}

# Targets to read, best first; after them any other, checked builds last.
PREFERRED_TARGETS = ["brisk_core_objects", "brisk_core", "brisk_static_objects", "brisk"]

DEFINED_TYPES = set("ABCDGRSTVWiu")  # global (or weak, common, unique) definitions
UNDEFINED_TYPES = set("Uvw")


def layer_of(rel):
    """'src/core/heap.c' -> 'core'; None when rel is not in a layer folder."""
    parts = rel.split("/")
    if len(parts) >= 3 and parts[0] == "src" and parts[1] in RANK:
        return parts[1]
    return None


def short(rel):
    """'src/core/heap.c' -> 'core/heap.c'."""
    return rel[4:] if rel.startswith("src/") else rel


def find_objects(builddir, root=None):
    """{target: {source path relative to the root: object path}} for objects from src/."""
    groups = {}
    for dirpath, dirnames, filenames in os.walk(builddir):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(".o"):
                continue
            obj = os.path.join(dirpath, name)
            parts = os.path.relpath(obj, builddir).split(os.sep)
            if "src" not in parts[:-1]:
                continue
            i = parts.index("src")
            target = parts[i - 1] if i > 0 else "."
            if target.endswith(".dir"):
                target = target[: -len(".dir")]
            src = "/".join(parts[i:])[: -len(".o")]
            if not re.search(r"\.(c|cc|cpp|cxx|S|s)$", src):
                src += ".c"
            # A build directory reused across a move keeps the objects of
            # sources that are gone: only today's sources count.
            if root and not os.path.exists(os.path.join(root, src)):
                continue
            groups.setdefault(target, {})[src] = obj
    return groups


def choose_objects(groups, target=None):
    """One target's objects, completed from the others; returns ({src: obj}, description)."""
    if target is not None:
        if target not in groups:
            print(f"layers.py: no objects of target {target} (have: {', '.join(sorted(groups))})", file=sys.stderr)
            sys.exit(2)
        order = [target]
    else:
        rest = sorted((t for t in groups if t not in PREFERRED_TARGETS),
                      key=lambda t: ("checked" in t, -len(groups[t]), t))
        order = [t for t in PREFERRED_TARGETS if t in groups] + rest
    chosen = dict(groups[order[0]])
    extra = []
    if target is None:
        for t in order[1:]:
            for src, obj in sorted(groups[t].items()):
                if src not in chosen:
                    chosen[src] = obj
                    extra.append(f"{short(src)} from {t}")
    desc = f"{len(groups[order[0]])} object files of {order[0]}"
    if extra:
        desc += " + " + ", ".join(extra)
    return chosen, desc


def read_symbols(objects):
    """{src: (defined set, undefined set)} from one `nm -P -A` over every object."""
    by_obj = {obj: src for src, obj in objects.items()}
    syms = {src: (set(), set()) for src in objects}
    try:
        out = subprocess.run(["nm", "-P", "-A"] + sorted(by_obj), check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        print(f"layers.py: nm failed: {getattr(err, 'stderr', None) or err}", file=sys.stderr)
        sys.exit(2)
    for line in out.splitlines():
        head, sep, rest = line.partition(": ")
        fields = rest.split()
        if not sep or len(fields) < 2 or head not in by_obj:
            continue
        name, kind = fields[0], fields[1]
        defined, undefined = syms[by_obj[head]]
        if kind in DEFINED_TYPES:
            defined.add(name)
        elif kind in UNDEFINED_TYPES:
            undefined.add(name)
    return syms


def build_graph(syms):
    """{a: {b: sorted symbols a takes from b}}."""
    definers = {}
    for src, (defined, _) in syms.items():
        for name in defined:
            definers.setdefault(name, []).append(src)
    graph = {src: {} for src in syms}
    for src, (_, undefined) in syms.items():
        for name in sorted(undefined):
            for dep in definers.get(name, []):
                if dep != src:
                    graph[src].setdefault(dep, []).append(name)
    return graph


def source_line(root, rel, symbol):
    """The first line of rel that names symbol outside a comment (1 if none)."""
    try:
        with open(os.path.join(root, rel), errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return 1
    pattern = re.compile(r"(?<![\w.>])" + re.escape(symbol) + r"\b")
    in_comment = False
    for n, line in enumerate(lines, 1):
        code = re.sub(r"/\*.*?\*/", " ", line)
        if in_comment:
            if "*/" not in code:
                continue
            code, in_comment = code.split("*/", 1)[1], False
        code = code.split("//", 1)[0]
        if "/*" in code:
            code, in_comment = code.split("/*", 1)[0], True
        if pattern.search(code):
            return n
    return 1


def components(nodes, edges):
    """Strongly connected components (Tarjan, iterative) with more than one node, sorted."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    result.append(sorted(comp))
    return sorted(result)


def shortest_cycle(start, members, edges):
    """start -> ... -> start inside members (breadth first), as a list of nodes."""
    prev, queue = {start: None}, [start]
    for node in queue:
        for child in sorted(edges.get(node, ())):
            if child == start:
                path = [node]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return path[::-1] + [start]
            if child in members and child not in prev:
                prev[child] = node
                queue.append(child)
    return [start]


def plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def stem(rel):
    return os.path.splitext(os.path.basename(rel))[0]


def picture(graph, desc):
    lines = [f"brisk layers, top first (from `nm` over {desc}; header-only code does not show)"]
    for layer in reversed(LAYERS):
        files = sorted(f for f in graph if layer_of(f) == layer)
        used = sorted({layer_of(d) for f in files for d in graph[f]} - {layer, None}, key=RANK.get, reverse=True)
        lower = [u for u in used if RANK[u] < RANK[layer]]
        head = f"{layer} (layer {RANK[layer]})"
        if not files:
            lines.append(f"{head}: no object files")
            continue
        upward = [u for u in used if RANK[u] > RANK[layer]]
        up = f"; calls UP into {', '.join(upward)} (errors)" if upward else ""
        lines.append(f"{head}: uses {', '.join(lower) if lower else 'no lower layer'}{up}")
        for f in files:
            deps = sorted(graph[f], key=lambda d: (d.split("/")[1] != layer, -RANK.get(layer_of(d), -1), d))
            names = [stem(d) if layer_of(d) == layer else f"{layer_of(d) or short(os.path.dirname(d))}/{stem(d)}"
                     for d in deps]
            lines.append(f"  {short(f)}" + (f" -> {', '.join(names)}" if names else ""))
    others = sorted(f for f in graph if layer_of(f) is None)
    if others:
        lines.append("not in a layer: " + ", ".join(short(f) for f in others))
    return lines


def main():
    ap = argparse.ArgumentParser(description="brisk's layer check on the symbols of a build")
    ap.add_argument("builddir")
    ap.add_argument("--picture", action="store_true", help="print the layers for docs/design.md")
    ap.add_argument("--root", help="source root, for line numbers (default: the build's CMakeCache, else .)")
    ap.add_argument("--target", help="read only this target's objects")
    args = ap.parse_args()

    if not os.path.isdir(args.builddir):
        print(f"layers.py: {args.builddir} is not a directory", file=sys.stderr)
        return 2
    root = args.root
    if root is None:
        root = "."
        try:
            with open(os.path.join(args.builddir, "CMakeCache.txt")) as fh:
                for line in fh:
                    if line.startswith("CMAKE_HOME_DIRECTORY:"):
                        root = line.split("=", 1)[1].strip()
        except OSError:
            pass

    groups = find_objects(args.builddir, root)
    if not groups:
        print(f"layers.py: no object files from src/ under {args.builddir} (build it first)", file=sys.stderr)
        return 2
    objects, desc = choose_objects(groups, args.target)
    graph = build_graph(read_symbols(objects))

    errors, warnings = [], []
    for f in sorted(graph):
        if layer_of(f) is None:
            errors.append(f"{f}:1: object file of a source outside the layer folders "
                          f"(src/{{{','.join(LAYERS)}}}/)")
    for f in sorted(graph):
        lf = layer_of(f)
        for dep, names in sorted(graph[f].items()):
            ld = layer_of(dep)
            if lf is None or ld is None or RANK[ld] <= RANK[lf]:
                continue
            more = f" (and {len(names) - 1} more)" if len(names) > 1 else ""
            errors.append(f"{f}:{source_line(root, f, names[0])}: uses {names[0]}{more} from {short(dep)}: "
                          f"{lf} (layer {RANK[lf]}) must not call up into {ld} (layer {RANK[ld]})")
    same_layer = {f: [d for d in deps if layer_of(d) == layer_of(f)] for f, deps in graph.items()}
    cycles = components(graph, same_layer)
    for comp in cycles:
        members = set(comp)
        path = shortest_cycle(comp[0], members, same_layer)
        text = " -> ".join(stem(p) for p in path)
        rest = f"; with {', '.join(stem(c) for c in comp if c not in path)}" if len(comp) > len(path) - 1 else ""
        warnings.append(f"warning: cycle in {layer_of(comp[0]) or 'src'}: {text}{rest}")

    diag = sys.stderr if args.picture else sys.stdout
    if args.picture:
        print("\n".join(picture(graph, desc)), flush=True)
    for line in errors + warnings:
        print(line, file=diag)
    edges = sum(len(d) for d in graph.values())
    print(f"layers.py: {desc}; {edges} file dependencies, {plural(len(errors), 'error')}, "
          f"{plural(len(cycles), 'cycle')} (warning)", file=diag)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

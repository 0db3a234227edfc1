"""cpython.py: workload 12, CPython on dicts and JSON.

Run by bench/run.py as `PYTHONMALLOC=malloc python3 bench/cpython.py ms=1000`
under each allocator (LD_PRELOAD): with PYTHONMALLOC=malloc every object
comes from malloc, not from CPython's own small-object arenas, so the
allocator serves a real program's mix of tiny, short-lived blocks.

A round builds a document: `entries` (2000) records, each a dict of strings,
ints, floats, a list and a nested dict; indexes them in a dict by key; turns
the document into JSON text (json.dumps) and back (json.loads); checks that
the copy equals the original and that the text of the copy is the same text;
splits and joins the keys. The last `keep` (8) documents stay alive, so old
objects are freed while new ones are made. Rounds run for ms milliseconds.

Prints one JSON line like the C programs: k records/s (records built, dumped,
loaded and compared per second), rounds/s, peak RSS (VmHWM); "ok": false and
exit 2 when a round trip did not give back what went in; exit 64 on a bad
argument. Standard library only.
"""
import collections
import ctypes
import json
import os
import random
import sys
import time


def args(argv, defaults):
    """key=value arguments over the defaults; an unknown key is an error."""
    out = dict(defaults)
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or key not in out:
            sys.stderr.write("unknown argument: %s\n" % arg)
            sys.exit(64)
        try:
            out[key] = int(value)
        except ValueError:
            sys.stderr.write("bad number: %s\n" % arg)
            sys.exit(64)
    return out


TEXT = "".join(random.Random(7).choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(4096))


def record(rng, i, seq):
    r = rng.getrandbits(64)
    off, n = r & 4095, 4 + (r >> 12) % 40
    return "user-%d-%08x" % (i, r >> 32), {
        "id": seq * 100003 + i,
        "name": TEXT[off:off + n],
        "score": (r >> 20 & 0xfffff) / 1024.0,
        "tags": list(range(r >> 40 & 0xff, (r >> 40 & 0xff) + (r >> 48) % 12)),
        "active": bool(r & 1 << 52),
        "address": {"city": "c%d" % (r % 997), "zip": "%05d" % (r % 99991),
                    "lines": ["line %d" % k for k in range(1 + (r >> 56) % 3)]},
    }


def one_round(rng, seq, entries):
    """(document, records, bytes of JSON, ok)."""
    doc = {"seq": seq, "records": {}}
    for i in range(entries):
        key, rec = record(rng, i, seq)
        doc["records"][key] = rec
    text = json.dumps(doc)
    back = json.loads(text)
    ok = back == doc and json.dumps(back) == text
    keys = "\n".join(back["records"])
    ok = ok and keys.split("\n") == list(doc["records"])
    return back, entries, len(text), ok


def malloc_from():
    """The file that serves malloc in this process (proves LD_PRELOAD took)."""
    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]
    try:
        libc = ctypes.CDLL(None)
        info = DlInfo()
        addr = ctypes.cast(libc.malloc, ctypes.c_void_p)
        if libc.dladdr(addr, ctypes.byref(info)) and info.dli_fname:
            return info.dli_fname.decode(errors="replace")
    except (OSError, AttributeError):
        pass
    return "?"


def peak_rss_kb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def main():
    a = args(sys.argv[1:], {"ms": 1000, "entries": 2000, "keep": 8})
    if a["entries"] < 1 or a["keep"] < 1 or a["ms"] < 0:
        sys.stderr.write("entries, keep >= 1\n")
        sys.exit(64)
    if os.environ.get("PYTHONMALLOC") != "malloc":
        sys.stderr.write("note: PYTHONMALLOC is not malloc: pymalloc serves small objects\n")
    rng = random.Random(12345)
    kept = collections.deque(maxlen=a["keep"])
    written = read = rounds = records = errors = 0
    t0 = time.monotonic()
    deadline = t0 + a["ms"] / 1000.0
    while True:
        doc, n, size, ok = one_round(rng, rounds, a["entries"])
        kept.append(doc)
        rounds += 1
        records += n
        written += size
        if ok:
            read += size
        else:
            errors += 1
            if errors <= 10:
                sys.stderr.write("CHECK FAILED: round %d: the JSON round trip changed the document\n"
                                 % rounds)
        if time.monotonic() >= deadline:
            break
    secs = time.monotonic() - t0
    peak = peak_rss_kb()
    out = {"bench": "cpython",
           "cases": [{"case": "dicts + json, %d records a round" % a["entries"], "threads": 1,
                      "metrics": {"krecords": records / secs / 1e3, "rounds_per_s": rounds / secs,
                                  "peak_rss_mb": peak / 1024.0}}],
           "ok": errors == 0, "errors": errors,
           "written": "%016x" % written, "read": "%016x" % read,
           "peak_rss_kb": peak, "malloc_from": malloc_from()}
    print(json.dumps(out, separators=(",", ":")))
    sys.stdout.flush()
    return 2 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

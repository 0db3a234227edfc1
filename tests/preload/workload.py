"""Dict/json-heavy workload for the preload test. Checks itself (asserts) and
prints a checksum that must be the same with and without brisk."""
import hashlib
import json
import random
import threading

rng = random.Random(12345)


def make_record(i):
    return {
        "id": i,
        "name": "item-%d-%s" % (i, "x" * (i % 37)),
        "tags": ["t%d" % ((i * k) % 101) for k in range(i % 9)],
        "score": (i * 7919) % 10007 / 3.0,
        "nested": {"a": list(range(i % 23)), "b": {"c": str(i) * (i % 5)}},
    }


def work(seed, n, out, idx):
    r = random.Random(seed)
    table = {}
    for i in range(n):
        rec = make_record(r.randrange(1000000))
        table[rec["name"]] = rec
        if i % 3 == 0 and table:
            table.pop(next(iter(table)))
    text = json.dumps(table, sort_keys=True)
    back = json.loads(text)
    assert back == table, "json round trip changed the data"
    big = {k: v for k, v in sorted(back.items())}
    joined = "|".join(big)
    out[idx] = hashlib.sha256((text + joined).encode()).hexdigest()


def main():
    h = hashlib.sha256()
    # One large single-threaded phase: big dicts, big strings, resizes.
    d = {}
    for i in range(200000):
        d["k%d" % rng.randrange(10**9)] = [i, str(i) * (i % 7), {"v": i}]
    for k in list(d)[::2]:
        del d[k]
    blob = json.dumps(d, sort_keys=True)
    assert json.loads(blob) == d
    h.update(blob.encode())
    big_list = sorted(d, key=lambda k: (len(k), k))
    h.update("".join(big_list).encode())
    del d, blob, big_list
    # Several threads allocating at once.
    out = [None] * 4
    ts = [threading.Thread(target=work, args=(s, 15000, out, s)) for s in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(out), "a worker thread failed"
    for o in out:
        h.update(o.encode())
    print(h.hexdigest())


main()

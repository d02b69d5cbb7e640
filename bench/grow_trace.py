"""A larger Kineto trace from a real one: its events repeated (shifted in time, correlation
and external ids renumbered), so the size grows while the content stays real.

    python3 bench/grow_trace.py SRC.json.gz OUT (--repeat N | --bytes B) [--rank R]

OUT ending in .gz is written gzip-compressed.
"""
import argparse
import copy
import gzip
import json


def grow(src, repeat=None, target_bytes=None, rank=None):
    d = json.load(gzip.open(src))
    ev = d["traceEvents"]
    xs = [e for e in ev if isinstance(e, dict) and "ts" in e]
    t0 = min(float(e["ts"]) for e in xs)
    span = max(float(e["ts"]) + float(e.get("dur", 0)) for e in xs) - t0
    if repeat is None:
        repeat = target_bytes // len(json.dumps(d)) + 1
    big = []
    for r in range(repeat):
        for e in ev:
            if isinstance(e, dict) and "ts" in e and r > 0:
                e = copy.deepcopy(e)
                e["ts"] = float(e["ts"]) + r * (span + 1000.0)
                a = e.get("args")
                if isinstance(a, dict):
                    for k in ("correlation", "External id"):
                        if isinstance(a.get(k), int):
                            a[k] = a[k] + r * 10_000_000
                if "id" in e and isinstance(e["id"], int):
                    e["id"] = e["id"] + r * 10_000_000
            elif r > 0:
                continue
            big.append(e)
    d["traceEvents"] = big
    if rank is not None:
        d["distributedInfo"] = {"rank": rank}
    return d


def write(d, out):
    opener = gzip.open if out.endswith(".gz") else open
    with opener(out, "wt") as f:
        json.dump(d, f)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--repeat", type=int)
    ap.add_argument("--bytes", type=int)
    ap.add_argument("--rank", type=int)
    a = ap.parse_args()
    write(grow(a.src, a.repeat, a.bytes, a.rank), a.out)

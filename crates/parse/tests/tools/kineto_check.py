#!/usr/bin/env python3
"""Independent numbers for the Kineto analysis test, computed with plain Python over the same
traces: per device busy/span/idle (union of kernel, memcpy, memset intervals), kernel time,
NCCL time and its overlap with other kernels, copies per direction, launch calls.
Usage: python3 crates/parse/tests/tools/kineto_check.py crates/parse/tests/data/kineto/*.json.gz"""
import collections, gzip, json, math, sys

def union(iv):
    iv = sorted(iv); out = []
    for s, e in iv:
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out

def inter(a, b):
    i = j = 0; t = 0.0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0]); hi = min(a[i][1], b[j][1])
        if hi > lo: t += hi - lo
        if a[i][1] < b[j][1]: i += 1
        else: j += 1
    return t

for path in sys.argv[1:]:
    ev = json.load(gzip.open(path))["traceEvents"]
    # The window HTA uses: with two ProfilerStep#N or more, only GPU work whose launching
    # runtime call started before the last step began.
    steps = sorted({e["ts"] for e in ev if isinstance(e, dict) and e.get("ph") == "X"
                    and e.get("cat") in ("cpu_op", "user_annotation")
                    and str(e.get("name", "")).startswith("ProfilerStep#")})
    runtime = {e["args"]["correlation"]: e["ts"] for e in ev if isinstance(e, dict) and e.get("ph") == "X"
               and e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    cutoff = steps[-1] if len(steps) >= 2 else None
    def kept(e):
        if cutoff is None:
            return True
        c = e.get("args", {}).get("correlation")
        return c in runtime and runtime[c] < cutoff
    dev = collections.defaultdict(lambda: {"all": [], "comm": [], "comp": [], "k": 0.0})
    copies = collections.defaultdict(lambda: [0, 0])
    sizes = collections.defaultdict(list)
    pageable = collections.Counter()
    launches = kernels = 0
    for e in ev:
        if not isinstance(e, dict) or e.get("ph") != "X": continue
        c, a = e.get("cat"), e.get("args", {})
        if c in ("kernel", "gpu_memcpy", "gpu_memset") and "device" in a and kept(e):
            d = dev[a["device"]]; iv = (e["ts"], e["ts"] + e["dur"]); d["all"].append(iv)
            if c == "kernel":
                kernels += 1; d["k"] += e["dur"]
                (d["comm"] if "nccl" in e["name"].lower() else d["comp"]).append(iv)
            if c == "gpu_memcpy":
                for k in ("HtoD", "DtoH", "DtoD", "PtoP", "HtoH"):
                    if k in e["name"]:
                        copies[k][0] += 1; copies[k][1] += a.get("bytes", 0)
                        sizes[k].append(a.get("bytes", 0)); pageable[k] += "Pageable" in e["name"]
        if c in ("cuda_runtime", "cuda_driver") and (e["name"].startswith("cudaLaunchKernel") or e["name"].startswith("cuLaunchKernel")) \
                and (cutoff is None or e["ts"] < cutoff):
            launches += 1
    print(path.split("/")[-1], "steps", len(steps), "kernels", kernels, "launches", launches, "copies", dict(copies))
    for k in sorted(sizes):
        v = sorted(sizes[k])
        rank = lambda q: v[max(1, math.ceil(q * len(v))) - 1]
        print(f"  {k}: p50 {rank(0.5)} p95 {rank(0.95)} pageable {pageable[k]}")
    for k in sorted(dev):
        d = dev[k]; u = union(d["all"]); span = u[-1][1] - u[0][0]; busy = sum(e - s for s, e in u)
        cm, cp = union(d["comm"]), union(d["comp"])
        print(f"  device {k}: span {span:.3f} busy {busy:.3f} kernel {d['k']:.3f} comm {sum(e-s for s,e in cm):.3f} overlap {inter(cm, cp):.3f}")

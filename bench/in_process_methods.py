"""pyinstrument and scalene (run by system-profile) against a long py-spy run, on pyperformance
bodies run unchanged in pyperf's worker mode: does each name the same top function, and
what does each cost in wall time against the program alone?

    python3 bench/in_process_methods.py [system-profile binary] [python]

py-spy's reference runs 4x as many loops at 1 kHz with --gil (the truth corpus's method).
Prints one JSON line per body.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/debug/system-profile"
PY = sys.argv[2] if len(sys.argv) > 2 else sys.executable
BODIES = {"richards": 20, "nbody": 8, "spectral_norm": 3, "raytrace": 2}


def body_dir(name):
    import pyperformance

    return Path(pyperformance.__file__).parent / "data-files" / "benchmarks" / f"bm_{name}"


def argv(script, loops):
    return [PY, script, "--worker", "--values", "1", "--warmups", "0", "--loops", str(loops)]


def short(f):
    return f.rsplit(".", 1)[-1]


def via_system_profile(method, command, cwd):
    out = subprocess.run([BIN, "call", "run_profiler",
                          json.dumps({"profiler": method, "target": {"command": command}})],
                         cwd=cwd, capture_output=True, text=True, timeout=900)
    run = json.loads(out.stdout)
    top = run["metrics"]["stacks"]["by_self"][:3]
    return {"wall_s": round(run["wall_s"], 2), "top": [(f["function"], round(f["self_percent"], 1)) for f in top]}


def py_spy_top(command, cwd):
    raw = Path(cwd) / "ref.folded"
    subprocess.run(["py-spy", "record", "--gil", "--rate", "1000", "--format", "raw", "-o", str(raw), "--"] + command,
                   cwd=cwd, capture_output=True, timeout=900)
    own = {}
    total = 0
    for line in raw.read_text().splitlines():
        stack, n = line.rsplit(" ", 1)
        leaf = stack.split(";")[-1].split(" (")[0]
        own[leaf] = own.get(leaf, 0) + int(n)
        total += int(n)
    return [(f, round(100 * n / total, 1)) for f, n in sorted(own.items(), key=lambda x: -x[1])[:3]]


for name, loops in BODIES.items():
    d = Path(tempfile.mkdtemp(prefix=f"inproc-{name}-"))
    shutil.copy(body_dir(name) / "run_benchmark.py", d / f"{name}.py")
    cmd = argv(f"{name}.py", loops)
    t = time.monotonic()
    subprocess.run(cmd, cwd=d, capture_output=True, check=True)
    alone_s = time.monotonic() - t
    ref = py_spy_top(argv(f"{name}.py", loops * 4), d)
    row = {"body": name, "alone_s": round(alone_s, 2), "py_spy_1khz_4x": ref}
    for method in ["pyinstrument", "scalene"]:
        r = via_system_profile(method, cmd, d)
        r["agrees"] = short(r["top"][0][0]) == short(ref[0][0])
        r["in_top3"] = short(r["top"][0][0]) in [short(f) for f, _ in ref]
        r["x_alone"] = round(r["wall_s"] / alone_s, 2)
        row[method] = r
    print(json.dumps(row), flush=True)
    shutil.rmtree(d, ignore_errors=True)

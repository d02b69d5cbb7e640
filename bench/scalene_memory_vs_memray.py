"""Scalene's per-line memory (run by system-profile) against memray's top allocation site (run
by system-profile), on pyperformance bodies run unchanged in pyperf's worker mode: does
Scalene name memray's top allocating line of the program, and how close are the bytes? And
the same for what was live at the peak: Scalene's per-line peak against memray's high-water
mark (`memray transform csv`, summed by the program's line).

    python3 bench/scalene_memory_vs_memray.py [system-profile binary] [python]

memray records every allocation (its stats rank locations by bytes allocated over the run);
Scalene samples one allocation about every MB and reports the program's own lines only, so
memray's sites are compared on the program's own file. A third view, memray run directly with
--trace-python-allocators (every pymalloc allocation, not only the arenas it asks malloc for),
is the closest thing to an exact count of bytes allocated per line; system-profile's memray
passes that flag by default since this measurement, and `SP_ARENAS_ONLY=1` runs it with
`python_allocators: false` (the view it had before). Prints one JSON line per
body.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = str(Path(sys.argv[1] if len(sys.argv) > 1 else "target/debug/system-profile").resolve())
PY = sys.argv[2] if len(sys.argv) > 2 else sys.executable
BODIES = {"float": 10, "nqueens": 20, "chaos": 20, "go": 10, "raytrace": 10, "xml_etree": 3}


def body_dir(name):
    import pyperformance

    return Path(pyperformance.__file__).parent / "data-files" / "benchmarks" / f"bm_{name}"


def argv(script, loops):
    return [PY, script, "--worker", "--values", "1", "--warmups", "0", "--loops", str(loops)]


def sites(method, command, cwd, own):
    args = {"profiler": method, "target": {"command": command}}
    if method == "memray" and os.environ.get("SP_ARENAS_ONLY"):
        args["options"] = {"python_allocators": False}
    out = subprocess.run([BIN, "call", "run_profiler", json.dumps(args)],
                         cwd=cwd, capture_output=True, text=True, timeout=1800)
    run = json.loads(out.stdout)
    a = (run.get("metrics") or {}).get("allocations") or {}
    mine = [s for s in a.get("top_by_size", []) if s["file"].endswith(own) and s.get("line")]
    by_function = {}
    for x in mine:
        f = x["function"].rsplit(".", 1)[-1]
        by_function[f] = by_function.get(f, 0) + (x.get("size_bytes") or 0)
    held = [s for s in a.get("at_peak", []) if s["file"].endswith(own) and s.get("line")]
    return {"wall_s": round(run["wall_s"], 2),
            "top_function": max(by_function, key=by_function.get) if by_function else None,
            "total_mib": round(a.get("total_bytes_allocated", 0) / 2**20, 1),
            "peak_mib": round(a.get("peak_bytes", 0) / 2**20, 1),
            "top": [(s["line"], round((s.get("size_bytes") or 0) / 2**20, 1), s["function"][:40])
                    for s in mine[:3]],
            "at_peak": [(s["line"], round(s["live_bytes"] / 2**20, 1), s["function"][:40])
                        for s in held[:3]]}


def all_allocators(command, cwd, own):
    """memray with --trace-python-allocators, run directly: its top own-file lines and function."""
    subprocess.run([PY, "-m", "memray", "run", "-q", "-f", "--trace-python-allocators", "-o", "all.bin"]
                   + command[1:], cwd=cwd, capture_output=True, timeout=1800, check=True)
    subprocess.run([PY, "-m", "memray", "stats", "--json", "-f", "-o", "all.json", "all.bin"],
                   cwd=cwd, capture_output=True, timeout=1800, check=True)
    stats = json.loads((Path(cwd) / "all.json").read_text())
    mine, by_function = [], {}
    for t in stats["top_allocations_by_size"]:
        function, file, line = t["location"].rsplit(":", 2)
        if file.endswith(own):
            mine.append((int(line), round(t["size"] / 2**20, 1), function))
            by_function[function] = by_function.get(function, 0) + t["size"]
    return {"total_mib": round(stats["total_bytes_allocated"] / 2**20, 1),
            "top_function": max(by_function, key=by_function.get) if by_function else None,
            "top": mine[:3]}


for name, loops in BODIES.items():
    d = Path(tempfile.mkdtemp(prefix=f"mem-{name}-"))
    own = f"{name}.py"
    shutil.copy(body_dir(name) / "run_benchmark.py", d / own)
    for extra in (body_dir(name) / "data").glob("*") if (body_dir(name) / "data").is_dir() else []:
        (d / "data").mkdir(exist_ok=True)
        shutil.copy(extra, d / "data" / extra.name)
    cmd = argv(own, loops)
    row = {"body": name, "loops": loops}
    for method in ["memray", "scalene"]:
        row[method] = sites(method, cmd, d, own)
    row["memray_all_allocators"] = all_allocators(cmd, d, own)
    m, s = row["memray"]["top"], row["scalene"]["top"]
    row["same_top_function"] = row["memray"]["top_function"] == row["scalene"]["top_function"]
    row["same_top_line"] = bool(m and s and m[0][0] == s[0][0])
    row["scalene_top_in_memray_top3"] = bool(m and s and s[0][0] in [x[0] for x in m])
    if m and s and m[0][0] == s[0][0] and m[0][1]:
        row["scalene_over_memray_bytes"] = round(s[0][1] / m[0][1], 2)
    # Live at the peak: Scalene's per-line peak against memray's high-water mark.
    mp, sp = row["memray"]["at_peak"], row["scalene"]["at_peak"]
    row["same_peak_line"] = bool(mp and sp and mp[0][0] == sp[0][0])
    if row["same_peak_line"] and mp[0][1]:
        row["scalene_over_memray_peak_bytes"] = round(sp[0][1] / mp[0][1], 2)
    print(json.dumps(row), flush=True)
    shutil.rmtree(d, ignore_errors=True)

"""Establish each truth-corpus scenario's truth without system-profile, and the peers' top
findings, and write them beside the scenario (`truth.observed.json`).

    .venv/bin/python tests/truth/establish.py [scenario ...]
    .venv/bin/python tests/truth/establish.py --only torch_key_averages word_language_model
    .venv/bin/python tests/truth/establish.py --only ab thread_pool_gil

`--only KEY` measures one figure and keeps the rest of the file as it is (a new check on a
scenario whose other figures the truth's `how` already cites).

The methods are independent of the one under test:
- `/usr/bin/time -v` (getrusage of the command and its children): wall, user, sys, voluntary
  and involuntary context switches: a program that blocks gives the CPU up (voluntary); one
  that is runnable but not scheduled is preempted (involuntary).
- py-spy with `--gil` at 1 kHz over the whole run (a service: 20 s): only samples holding the
  GIL, which is Python code running, never a thread blocked in a call that releases it.
- cProfile's exact call counts and own times (a started command only).
- torch.profiler's own operator table (`key_averages`, by operator and by input shape), made
  in the profiled process by torch (`torch_table` in the scenario), over the whole run and over
  training steps 5-7 (torch's schedule stepped by torch's optimizer hook).
- A clock around the functions that make the program's phases (`phases`), tracemalloc's
  snapshot when one of them is first called (`live_at`), memray's own `stats` (`memray_stats`),
  and every allocation counted by the allocator hooks in their exact mode (`exact_allocations`).
- The kernel's own sampler by shared object (`perf record -e cpu-clock`, `perf_by_library`).
- A/B runs: the program with an environment setting (`ab_env`), or with one change to its
  source that a recommendation suggests (`ab_source`, in a copy), interleaved, `time -v`.
Peers, side by side: py-spy's default record (100 Hz, idle threads left out by py-spy's own
heuristics) and Scalene (`scalene run --cpu-only`, its JSON; it starts its program, so not a service).
"""
import json
import os
import pstats
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PY = str(ROOT / ".venv/bin/python")
PYSPY = str(ROOT / ".venv/bin/py-spy")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def module_dir(module):
    out = subprocess.run([PY, "-c", f"import {module}, os; print(os.path.dirname({module}.__file__))"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def prepare(sc, scratch):
    for f in sc.get("files", []):
        src = module_dir(f["module"]) / f["path"] if "module" in f else (HERE / f["local"]).resolve()
        dst = scratch / f["to"]
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
        else:
            shutil.copy(src, dst)
    # Inputs too large to keep in the repository, written the same on every run.
    if "setup" in sc:
        subprocess.run(subst(sc["setup"]), cwd=scratch, check=True)


def subst(argv, port=None):
    return [a.replace("{python}", PY).replace("{port}", str(port)) for a in argv]


def top_self(folded, n=5):
    """Top functions by own samples from py-spy's raw (folded) output."""
    own, total = Counter(), 0
    for line in Path(folded).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [f for f in stack.split(";") if not f.startswith("process ")]
        if not frames:
            continue
        name = frames[-1].split(" (")[0]
        own[name] += int(count)
        total += int(count)
    return [{"function": f, "self_percent": round(100 * c / total, 1)} for f, c in own.most_common(n)] if total else []


def time_v(argv, cwd):
    out = subprocess.run(["/usr/bin/time", "-v"] + argv, cwd=cwd, capture_output=True, text=True)
    fields = {}
    for line in out.stderr.splitlines():
        k, _, v = line.strip().rpartition(": ")
        fields[k] = v
    wall = fields.get("Elapsed (wall clock) time (h:mm:ss or m:ss)", "0:0")
    parts = [float(p) for p in wall.split(":")]
    wall_s = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    user, sys_ = float(fields["User time (seconds)"]), float(fields["System time (seconds)"])
    return {"wall_s": wall_s, "user_s": user, "sys_s": sys_, "cores": round((user + sys_) / wall_s, 2),
            "voluntary_ctx_switches": int(fields["Voluntary context switches"]),
            "involuntary_ctx_switches": int(fields["Involuntary context switches"]),
            "minor_faults": int(fields["Minor (reclaiming a frame) page faults"]),
            "max_rss_kib": int(fields["Maximum resident set size (kbytes)"])}


def ab_runs(argv, cwd, env, rounds=3):
    """The program alone, then with `env` set, interleaved `rounds` times: medians of each
    `time -v` figure, for the setting a recommendation suggests."""
    import statistics
    runs = {"without": [], "with": []}
    for _ in range(rounds):
        runs["without"].append(time_v(argv, cwd))
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            runs["with"].append(time_v(argv, cwd))
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    out = {"env": env, "rounds": rounds}
    for side, rs in runs.items():
        out[side] = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
    return out


def ab_source(argv, cwd, change, rounds=3):
    """The program as it is, then with one change to its source that a recommendation
    suggests (`change`: the file, the text replaced and its replacement, in a copy), interleaved
    `rounds` times: medians of each `time -v` figure."""
    import statistics
    original = cwd / change["file"]
    text = original.read_text()
    if change["replace"] not in text:
        sys.exit(f"ab_source: {change['file']} does not hold the text to replace")
    changed = original.with_name(original.stem + "_changed" + original.suffix)
    changed.write_text(text.replace(change["replace"], change["with"]))
    changed_argv = [str(changed.name) if a == change["file"] else a for a in argv]
    runs = {"without": [], "with": []}
    for _ in range(rounds):
        runs["without"].append(time_v(argv, cwd))
        runs["with"].append(time_v(changed_argv, cwd))
    out = {"change": change, "rounds": rounds}
    for side, rs in runs.items():
        out[side] = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
    return out


def perf_by_library(argv, cwd):
    """Where the CPU went by shared object, from the kernel's own sampler (`perf record -e
    cpu-clock`, software clock: no hardware counters needed), not from any Python profiler:
    each library's share of the samples."""
    data = cwd / "perf.data"
    rec = subprocess.run(["perf", "record", "-e", "cpu-clock", "-F", "999", "-o", str(data), "--"] + argv,
                         cwd=cwd, capture_output=True, text=True)
    if rec.returncode != 0 or not data.exists():
        return {"error": rec.stderr.strip()[-300:]}
    rep = subprocess.run(["perf", "report", "-i", str(data), "--sort", "dso", "--stdio"],
                         capture_output=True, text=True)
    shares = {}
    for line in rep.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].endswith("%") and not line.startswith("#"):
            shares[parts[1]] = float(parts[0].rstrip("%"))
    return shares


def cprofile_top(argv, cwd, n=5):
    prof = cwd / "truth.pstats"
    subprocess.run([argv[0], "-m", "cProfile", "-o", str(prof)] + argv[1:], cwd=cwd, capture_output=True)
    if not prof.exists():
        return []
    st = pstats.Stats(str(prof))
    rows = sorted(st.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:n]
    total = st.total_tt or 1
    return [{"function": name, "file": os.path.basename(file), "line": line, "calls": nc,
             "own_s": round(tt, 3), "own_percent": round(100 * tt / total, 1)}
            for (file, line, name), (cc, nc, tt, ct, callers) in rows]


def cprofile_calls_into(argv, cwd, callee):
    """Who calls `callee` (a library function), from cProfile's exact caller table: each caller
    function, its calls, the callee's cumulative time through it, and the lines of its source
    that call it (found in the source, not by a profiler)."""
    prof = cwd / "calls.pstats"
    subprocess.run([argv[0], "-m", "cProfile", "-o", str(prof)] + argv[1:], cwd=cwd, capture_output=True)
    st = pstats.Stats(str(prof))
    total = st.total_tt or 1
    out = []
    for (file, line, name), (cc, nc, tt, ct, callers) in st.stats.items():
        if name != callee:
            continue
        for (cfile, cline, cname), (_, cnc, _, cct) in callers.items():
            path = Path(cfile) if os.path.isabs(cfile) else cwd / cfile
            lines = []
            if path.is_file() and ".py" in path.suffix:
                for i, text in enumerate(path.read_text().splitlines(), 1):
                    if i > cline and text[:1].strip():
                        break  # the caller's body ended (a top-level statement)
                    if i > cline and f"{callee}(" in text.split("#")[0]:
                        lines.append(i)
            out.append({"callee": f"{os.path.basename(file)}:{name}", "caller": cname,
                        "caller_file": os.path.basename(cfile), "calls": cnc,
                        "cum_s": round(cct, 3), "cum_percent": round(100 * cct / total, 1),
                        "source_lines_calling": lines[:3]})
    return sorted(out, key=lambda c: -c["cum_s"])


# What both operator tables share: the program's command line, and torch's own
# `key_averages` written out (by operator, by operator and input shape, torch's text table).
TORCH_TABLE_HEAD = r"""
import json, os, runpy, sys
import torch
from torch.profiler import ProfilerActivity, profile
out, script, args = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.argv = [script] + args
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
def rows(averages, n):
    total = sum(e.self_cpu_time_total for e in averages) or 1
    top = sorted(averages, key=lambda e: -e.self_cpu_time_total)[:n]
    return [{"name": e.key, "calls": e.count, "self_us": round(e.self_cpu_time_total, 1),
             "self_percent": round(100 * e.self_cpu_time_total / total, 1),
             "input_shapes": str(e.input_shapes) if e.input_shapes else None} for e in top]
def write(prof, **more):
    with open(out, "w") as f:
        json.dump(dict(more, by_operator=rows(prof.key_averages(), 8),
                       by_operator_and_shape=rows(prof.key_averages(group_by_input_shape=True), 8),
                       table=prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8)), f)
"""

TORCH_TABLE = TORCH_TABLE_HEAD + r"""
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    runpy.run_path(script, run_name="__main__")
write(prof)
"""


# The same table over training steps 5-7 only (three unprofiled steps, one of warm-up), the
# steps counted at each optimizer step, else each backward from the second: the window
# system-profile's torch_training recipe traces, so its shares are compared with torch's over
# the same steps (the whole run's table also counts validation and test, forward passes only).
# The stepping is written here again, not imported from the runner: the truth owes nothing to
# the code it judges.
TORCH_TABLE_STEPS = TORCH_TABLE_HEAD + r"""
from torch.optim.optimizer import register_optimizer_step_post_hook
schedule = torch.profiler.schedule(wait=3, warmup=1, active=3, repeat=1)
seen = {"optimizer": 0, "backward": 0}
def stepped(kind):
    # A step at each optimizer step; in a loop without an optimizer (a hand-written update,
    # as word_language_model's) at each backward from the second, whose first comes before
    # its iteration ends.
    seen[kind] += 1
    if kind == "optimizer" or (not seen["optimizer"] and seen["backward"] >= 2):
        prof.step()
with profile(activities=[ProfilerActivity.CPU], record_shapes=True, schedule=schedule,
             on_trace_ready=lambda p: write(p, steps="5-7")) as prof:
    register_optimizer_step_post_hook(lambda *a: stepped("optimizer"))
    backward = torch.autograd.backward
    def backward_then_step(*a, **kw):
        result = backward(*a, **kw)
        stepped("backward")
        return result
    torch.autograd.backward = backward_then_step
    runpy.run_path(script, run_name="__main__")
"""


def torch_key_averages(argv, cwd, table=TORCH_TABLE):
    """torch.profiler's own operator table for the program (its `key_averages`, by operator and
    by operator and input shape), written by torch in the profiled process: no part of
    system-profile reads or runs it."""
    out = cwd / "key_averages.json"
    subprocess.run([argv[0], "-c", table, str(out)] + argv[1:], cwd=cwd, capture_output=True)
    return json.loads(out.read_text()) if out.exists() else None


PHASES = r"""
import importlib, json, os, runpy, sys, time, tracemalloc
out, names, snapshot_at = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
target = sys.argv[4:]
spent = {n: 0.0 for n in names}
state = {"snapshot": None}
def timed(name, fn):
    def wrapper(*a, **kw):
        if name == snapshot_at and tracemalloc.is_tracing() and state["snapshot"] is None:
            snap = tracemalloc.take_snapshot()
            state["snapshot"] = [{"file": os.path.basename(s.traceback[0].filename), "line": s.traceback[0].lineno,
                                  "bytes": s.size, "blocks": s.count} for s in snap.statistics("lineno")[:3]]
        t = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            spent[name] += time.perf_counter() - t
    return wrapper
for n in names:
    mod, attr = n.rsplit(".", 1)
    m = importlib.import_module(mod)
    setattr(m, attr, timed(n, getattr(m, attr)))
if snapshot_at:
    tracemalloc.start()
t0 = time.perf_counter()
sys.argv = target[1:] if target[0] == "-m" else target
try:
    if target[0] == "-m":
        runpy.run_module(target[1], run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(target[0], run_name="__main__")
except SystemExit:
    pass
wall = time.perf_counter() - t0
with open(out, "w") as f:
    json.dump({"wall_s": wall, "phases_s": spent, "snapshot": state["snapshot"]}, f)
"""


def timed_phases(argv, cwd, names, rounds=3):
    """The program's phases timed by a clock around the functions that make them (`phases` in
    the scenario, wrapped in the program's process; no profiler), medians of `rounds` runs, each
    as seconds and as a share of the wall time."""
    import statistics
    out = cwd / "phases.json"
    runs = []
    for _ in range(rounds):
        subprocess.run([argv[0], "-c", PHASES, str(out), ",".join(names), ""] + argv[1:], cwd=cwd,
                       capture_output=True)
        runs.append(json.loads(out.read_text()))
    wall = statistics.median(r["wall_s"] for r in runs)
    phases = {n: statistics.median(r["phases_s"][n] for r in runs) for n in names}
    return {"rounds": rounds, "wall_s": round(wall, 3),
            "phases": {n: {"s": round(v, 3), "percent": round(100 * v / wall, 1)} for n, v in phases.items()}}


def tracemalloc_live_at(argv, cwd, name):
    """What Python held when `name` was first called (tracemalloc's snapshot there, the lines
    that allocated it): for a program whose peak is its loaded input, the peak's sites."""
    out = cwd / "snapshot.json"
    subprocess.run([argv[0], "-c", PHASES, str(out), name, name] + argv[1:], cwd=cwd, capture_output=True)
    return json.loads(out.read_text())["snapshot"] if out.exists() else None


def memray_stats(argv, cwd):
    """memray's own statistics (`memray stats --json`) of a run with the same flags ours uses
    (`--trace-python-allocators`): its top locations by bytes allocated and the peak."""
    binary, stats = cwd / "truth-memray.bin", cwd / "truth-memray-stats.json"
    subprocess.run([argv[0], "-m", "memray", "run", "-q", "-f", "--trace-python-allocators", "-o", str(binary)]
                   + argv[1:], cwd=cwd, capture_output=True)
    subprocess.run([argv[0], "-m", "memray", "stats", "--json", "-f", "-o", str(stats), str(binary)], cwd=cwd,
                   capture_output=True)
    if not stats.exists():
        return None
    d = json.loads(stats.read_text())
    top = d["top_allocations_by_size"][:3]
    return {"total_bytes_allocated": d["total_bytes_allocated"], "peak_bytes": d["metadata"]["peak_memory"],
            "top_allocations_by_size": top,
            "top_site_blocks": memray_top_site_blocks(binary, top[0]["location"]) if top else None}


def memray_top_site_blocks(binary, location):
    """The blocks memray recorded at `location` (`function:file:line`, its stats' form), by size:
    on Python 3.11 its profile hook makes a frame object for each generator resumption it
    sees, and records it as the program's (json.tool's `dump`: 72-byte blocks)."""
    import memray
    by_size = Counter()
    for rec in memray.FileReader(str(binary)).get_allocation_records():
        top = rec.stack_trace(max_stacks=1)
        if top and f"{top[0][0]}:{top[0][1]}:{top[0][2]}" == location:
            by_size[rec.size] += rec.n_allocations
    return {"bytes": sum(s * n for s, n in by_size.items()),
            "largest_counts_by_block_size": [[s, n] for s, n in by_size.most_common(3)]}


SAMPLER = ROOT / "crates/runner/src/methods/py/sp_allocsample.c"


def exact_allocations(argv, cwd, n=5):
    """Every allocation through CPython's allocators, by the innermost frame that made it:
    system-profile's allocation sampler built apart and run in its exact mode (every allocation
    written, nothing estimated; its records streamed through a pipe and summed here), against
    which its sampled estimates are judged. memray's own count at the top site, less the blocks
    its profile hook makes, is the cross-check (`memray_stats`)."""
    build = cwd / "exact-sampler"
    build.mkdir(exist_ok=True)
    info = subprocess.run([argv[0], "-c", "import sysconfig;print(sysconfig.get_paths()['include']);"
                           "print(sysconfig.get_config_var('EXT_SUFFIX'))"], capture_output=True, text=True)
    include, suffix = info.stdout.split()
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", f"-I{include}", str(SAMPLER), "-o",
                    str(build / f"sp_allocsample{suffix}"), "-lm"], check=True)
    fifo = cwd / "exact.fifo"
    os.mkfifo(fifo)
    runner = ("import sys, runpy; sys.path.insert(0, sys.argv[1]); import sp_allocsample as s; out = sys.argv[2];"
              "t = sys.argv[3:]; s.start(out, 1)\n"
              "try:\n    sys.argv = t[1:] if t[0] == '-m' else t\n"
              "    runpy.run_module(t[1], run_name='__main__', alter_sys=True) if t[0] == '-m' else "
              "runpy.run_path(t[0], run_name='__main__')\nfinally:\n    s.stop()")
    p = subprocess.Popen([argv[0], "-c", runner, str(build), str(fifo)] + argv[1:], cwd=cwd,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    codes, sums, totals = {}, Counter(), None
    counts = Counter()
    with open(fifo) as f:
        for line in f:
            if line.startswith("A "):
                parts = line.split(" ", 5)
                top = parts[4].split(":") if len(parts) > 4 else None
                key = f"{codes[top[0]]}:{top[1].strip()}" if top else "[no Python frame]"
                sums[key] += int(parts[3])
                counts[key] += 1
            elif line.startswith("C "):
                _, cid, rest = line.rstrip("\n").split(" ", 2)
                name, file = rest.split("\t")
                codes[cid] = f"{name}:{file}"
            elif line.startswith("T "):
                totals = [int(v) for v in line.split()[1:]]
    p.wait()
    return {"total_allocations": totals[0], "total_bytes_allocated": totals[1],
            "top_by_size": [[k, b, counts[k]] for k, b in sums.most_common(n)]}


def scalene_top(argv, cwd, n=3):
    out = cwd / "scalene.json"
    program = [a for a in argv[1:]]
    if program[:1] == ["-m"]:
        return [{"function": "n/a: Scalene 2 runs a script, not `-m module`", "file": "", "cpu_percent": 0}]
    subprocess.run([PY, "-m", "scalene", "run", "--cpu-only", "-o", str(out), program[0], "---"] + program[1:],
                   cwd=cwd, capture_output=True, timeout=600)
    if not out.exists():
        return []
    data = json.loads(out.read_text() or "{}")
    funcs = []
    for file, f in data.get("files", {}).items():
        for fn in f.get("functions", []):
            cpu = fn.get("n_cpu_percent_python", 0) + fn.get("n_cpu_percent_c", 0) + fn.get("n_sys_percent", 0)
            funcs.append({"function": fn.get("line"), "file": os.path.basename(file), "cpu_percent": round(cpu, 1)})
    return sorted(funcs, key=lambda f: -f["cpu_percent"])[:n]


ONLY = {"torch_key_averages": lambda argv, cwd, sc: torch_key_averages(argv, cwd),
        "torch_key_averages_steps_5_7": lambda argv, cwd, sc: torch_key_averages(argv, cwd, TORCH_TABLE_STEPS),
        "ab": lambda argv, cwd, sc: ab_runs(argv, cwd, sc["ab_env"]),
        "exact_allocations": lambda argv, cwd, sc: exact_allocations(argv, cwd),
        "memray_stats": lambda argv, cwd, sc: memray_stats(argv, cwd)}


def establish_one(name, key):
    """Measure one figure (`ONLY`) of a started command and put it into the existing file."""
    sc = json.loads((HERE / "scenarios" / name / "scenario.json").read_text())
    out = HERE / "scenarios" / name / "truth.observed.json"
    observed = json.loads(out.read_text())
    scratch = Path(tempfile.mkdtemp(prefix=f"truth-{name}-"))
    try:
        prepare(sc, scratch)
        observed[key] = ONLY[key](subst(sc["command"]), scratch, sc)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    out.write_text(json.dumps(observed, indent=2) + "\n")
    print(json.dumps(observed[key], indent=1))


def establish(name):
    sc = json.loads((HERE / "scenarios" / name / "scenario.json").read_text())
    scratch = Path(tempfile.mkdtemp(prefix=f"truth-{name}-"))
    prepare(sc, scratch)
    started, observed = [], {"scenario": name, "date": time.strftime("%Y-%m-%d"), "python": sys.version.split()[0]}
    try:
        hogs = os.cpu_count() + sc["hogs_beyond_cpus"] if "hogs_beyond_cpus" in sc else 0
        for _ in range(hogs):
            started.append(subprocess.Popen([PY, "-c", "while True: pass"]))
        if "service" in sc:
            port = free_port()
            svc = subprocess.Popen(subst(sc["service"]["argv"], port), cwd=scratch)
            started.append(svc)
            deadline = time.time() + 60
            while time.time() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.2)
            started.append(subprocess.Popen(subst(sc["load"]["argv"], port), cwd=scratch,
                                            stdout=subprocess.DEVNULL))
            time.sleep(2)
            folded = scratch / "gil.folded"
            subprocess.run([PYSPY, "record", "--gil", "-r", "1000", "--subprocesses", "--format", "raw", "-o",
                            str(folded), "--pid", str(svc.pid), "--duration", "20"], capture_output=True)
            observed["py_spy_gil_1khz_top_self"] = top_self(folded) if folded.exists() else []
            default = scratch / "default.folded"
            subprocess.run([PYSPY, "record", "-r", "100", "--subprocesses", "--format", "raw", "-o", str(default),
                            "--pid", str(svc.pid), "--duration", "20"], capture_output=True)
            observed["peer_py_spy_top_self"] = top_self(default) if default.exists() else []
            observed["peer_scalene_top"] = "n/a: Scalene starts its program; it cannot attach to a running service"
            with open(f"/proc/{svc.pid}/status") as f:
                observed["service_status_threads"] = [l.split()[1] for l in f if l.startswith("Threads")]
        else:
            argv = subst(sc["command"])
            observed["time_v"] = time_v(argv, scratch)
            folded = scratch / "gil.folded"
            subprocess.run([PYSPY, "record", "--gil", "-r", "1000", "--subprocesses", "--format", "raw", "-o",
                            str(folded), "--"] + argv, cwd=scratch, capture_output=True)
            observed["py_spy_gil_1khz_top_self"] = top_self(folded) if folded.exists() else []
            observed["cprofile_top_own"] = cprofile_top(argv, scratch)
            for callee in sc.get("calls_into", []):
                observed.setdefault("cprofile_calls_into", []).extend(
                    cprofile_calls_into(argv, scratch, callee))
            default = scratch / "default.folded"
            subprocess.run([PYSPY, "record", "-r", "100", "--subprocesses", "--format", "raw", "-o", str(default),
                            "--"] + argv, cwd=scratch, capture_output=True)
            observed["peer_py_spy_top_self"] = top_self(default) if default.exists() else []
            observed["peer_scalene_top"] = (
                "skipped: " + sc["skip_scalene"] if "skip_scalene" in sc else scalene_top(argv, scratch))
            if "ab_env" in sc:
                observed["ab"] = ab_runs(argv, scratch, sc["ab_env"])
            if "ab_source" in sc:
                observed["ab_source"] = ab_source(argv, scratch, sc["ab_source"])
            if sc.get("perf_by_library"):
                observed["perf_by_library"] = perf_by_library(argv, scratch)
            if sc.get("torch_table"):
                observed["torch_key_averages"] = torch_key_averages(argv, scratch)
                observed["torch_key_averages_steps_5_7"] = torch_key_averages(argv, scratch, TORCH_TABLE_STEPS)
            if "phases" in sc:
                observed["timed_phases"] = timed_phases(argv, scratch, sc["phases"])
            if "live_at" in sc:
                observed["tracemalloc_live_at"] = tracemalloc_live_at(argv, scratch, sc["live_at"])
            if sc.get("memray_stats"):
                observed["memray_stats"] = memray_stats(argv, scratch)
            if sc.get("exact_allocations"):
                observed["exact_allocations"] = exact_allocations(argv, scratch)
    finally:
        for p in reversed(started):
            p.kill()
            p.wait()
        shutil.rmtree(scratch, ignore_errors=True)
    out = HERE / "scenarios" / name / "truth.observed.json"
    out.write_text(json.dumps(observed, indent=2) + "\n")
    print(json.dumps(observed, indent=1))


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--only"]:
        for n in args[2:]:
            establish_one(n, args[1])
        sys.exit(0)
    names = args or sorted(p.name for p in (HERE / "scenarios").iterdir())
    for n in names:
        establish(n)

"""The whole pipeline's wall time against the program's own (issue 26), with peers side by side.

For each program, rounds of: the program alone, `system-profile profile` (before and after,
each its own binary), Scalene, py-spy record, memray run and, for the torch program,
torch.profiler around it; the order inside a round rotates (interleaved), the figure is the
median of the rounds, given as a ratio to the program alone in the same rounds.

    .venv/bin/python bench/pipeline_wall.py --before /tmp/sp_before \
        --after target/release/system-profile [--rounds 3] [--programs richards,json_tool,lm]

Each `profile` is run twice per round: the recipe's default focus (CPU and memory) and `cpu`.
The programs are built in a scratch folder: pyperformance's bm_richards body (~5 s here),
`python -m json.tool` on a 37.5 MB file (tests/truth/programs/json_tool/make_input.py), and
pytorch/examples' word_language_model for one short epoch on the CPU
(tests/truth/programs/word_language_model).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# Seconds a peer may take before it is stopped and shown as `> limit`.
PEER_LIMIT_S = 120

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VENV = os.path.join(ROOT, ".venv", "bin")
# The real interpreter, not pyenv's shim: its start-up is not the program's.
PY = subprocess.run([os.path.join(VENV, "python"), "-c", "import sys; print(sys.executable)"],
                    capture_output=True, text=True, check=True).stdout.strip()


def programs(work):
    import pyperformance
    bm = os.path.join(os.path.dirname(pyperformance.__file__), "data-files", "benchmarks",
                      "bm_richards", "run_benchmark.py")
    out = {}
    d = os.path.join(work, "richards")
    os.makedirs(d)
    shutil.copy(bm, os.path.join(d, "richards.py"))
    out["richards"] = (d, ["richards.py", "--worker", "--values", "1", "--warmups", "0", "--loops", "100"])
    d = os.path.join(work, "json_tool")
    os.makedirs(d)
    shutil.copy(os.path.join(ROOT, "tests/truth/programs/json_tool/make_input.py"), d)
    subprocess.run([PY, "make_input.py", "big.json"], cwd=d, check=True)
    out["json_tool"] = (d, ["-m", "json.tool", "big.json", "out.json"])
    d = os.path.join(work, "lm")
    shutil.copytree(os.path.join(ROOT, "tests/truth/programs/word_language_model"), d)
    out["lm"] = (d, ["main.py", "--epochs", "1", "--save", "model.pt"])
    return out


class Limit:
    """A peer stopped at this many seconds (Scalene on richards grew to 15.6 GB in 4 minutes):
    its figure is then a lower bound, printed as `>`."""
    s = 3600.0


def timed(argv, cwd, env=None, limit_s=None):
    t = time.monotonic()
    try:
        r = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           env=env, timeout=limit_s or Limit.s)
    except subprocess.TimeoutExpired:
        subprocess.run(["pkill", "-f", " ".join(argv[:4])])
        return float("inf")
    wall = time.monotonic() - t
    if r.returncode != 0:
        print(f"  ! {argv[:4]} exited {r.returncode}: {r.stderr.decode()[-300:]}", file=sys.stderr)
    return wall


def clean(cwd):
    for f in ("profile_output", "profile.json", "profile.html", "memray.bin", "trace.json"):
        p = os.path.join(cwd, f)
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.remove(p)


def script_args(args):
    """Scalene 2 runs a script, not `-m module`: the module's file in its place."""
    if args[0] != "-m":
        return args
    import importlib.util
    return [importlib.util.find_spec(args[1]).origin] + args[2:]


def runners(name, cwd, args, before, after):
    env = dict(os.environ, PATH=VENV + ":" + os.environ["PATH"])
    words = " ".join(args)
    r = {
        "program": lambda: timed([PY] + args, cwd),
        "before": lambda: timed([before, "profile", "--python", PY, words], cwd, env),
        "after": lambda: timed([after, "profile", "--python", PY, words], cwd, env),
        "before cpu": lambda: timed([before, "profile", "--python", PY, words + " cpu"], cwd, env),
        "after cpu": lambda: timed([after, "profile", "--python", PY, words + " cpu"], cwd, env),
        "scalene": lambda: timed([PY, "-m", "scalene", "run", "-o", "profile.json", "---"]
                                 + script_args(args), cwd, env, limit_s=PEER_LIMIT_S),
        "py-spy": lambda: timed([os.path.join(VENV, "py-spy"), "record", "-o", "profile.svg", "--"]
                                + [PY] + args, cwd, env),
        "memray": lambda: timed([PY, "-m", "memray", "run", "-f", "-o", "memray.bin"] + args, cwd, env),
    }
    if name == "lm":
        wrapper = ("import runpy,sys,torch;sys.argv=sys.argv[1:];"
                   "p=torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]);p.start();"
                   "runpy.run_path(sys.argv[0],run_name='__main__');p.stop();p.export_chrome_trace('trace.json')")
        r["torch.profiler"] = lambda: timed([PY, "-c", wrapper] + args, cwd, env)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--programs", default="richards,json_tool,lm")
    ap.add_argument("--only", default="", help="comma-separated runner names to keep")
    a = ap.parse_args()
    before, after = os.path.abspath(a.before), os.path.abspath(a.after)
    work = tempfile.mkdtemp(prefix="pipeline-wall-")
    progs = programs(work)
    results = {}
    for name in a.programs.split(","):
        cwd, args = progs[name]
        rs = runners(name, cwd, args, before, after)
        if a.only:
            rs = {k: v for k, v in rs.items() if k == "program" or k in a.only.split(",")}
        names = list(rs)
        walls = {k: [] for k in names}
        for i in range(a.rounds):
            order = names[i % len(names):] + names[:i % len(names)]
            for k in order:
                clean(cwd)
                w = rs[k]()
                walls[k].append(w)
                print(f"{name} round {i + 1}: {k} {w:.1f} s", file=sys.stderr, flush=True)
        results[name] = walls
    print(json.dumps(results))
    print("\n| Program | program alone (s) | " + " | ".join(k for k in names if k != "program") + " |")
    for name, walls in results.items():
        base = statistics.median(walls["program"])
        cells = []
        for k, w in walls.items():
            if k == "program":
                continue
            ratios = [x / p for x, p in zip(w, walls["program"])]
            med = statistics.median(w)
            if med == float("inf"):
                cells.append(f"> {PEER_LIMIT_S} s (stopped)")
            else:
                cells.append(f"{med:.1f} s ({statistics.median(ratios):.2f}x)")
        print(f"| {name} | {base:.1f} | " + " | ".join(cells) + " |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""summarize on a session with 50 runs and a 1 GB trace analysis already done (issue 7's
benchmark), beside what the same GPU tables cost without a stored analysis: Holistic Trace
Analysis loading and analysing that trace.

    python3 bench/summarize.py [--repeat 5] [--hta /tmp/htavenv/bin/python]

Needs the release build (cargo build --release -p system-profile-mcp). The trace is the real
2-rank NCCL trace of crates/parse/tests/data/kineto with its events repeated (shifted in time,
ids renumbered) until the JSON passes 1 GB.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from grow_trace import grow, write  # noqa: E402
from stdio_client import Server  # noqa: E402

REPO = os.path.dirname(HERE)
BIN = os.path.join(REPO, "target", "release", "system-profile")
SRC = os.path.join(REPO, "crates/parse/tests/data/kineto/hta-a100-2rank-nccl-allreduce.json.gz")


def say(text):
    print(text, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--hta", default=None, help="a Python with HolisticTraceAnalysis")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="sp-bench-summarize-")
    trace = os.path.join(work, "rank0.json")
    write(grow(SRC, target_bytes=1 << 30), trace)
    say(f"trace: {os.path.getsize(trace) / 1e9:.2f} GB of JSON")
    s = Server(BIN, work)
    t = time.monotonic()
    for _ in range(50):
        s.call("run_profiler", {"profiler": "measure",
                                "target": {"command": [sys.executable, "-c", "sum(range(3_000_000))"]}})
    say(f"50 measure runs: {time.monotonic() - t:.1f} s")
    t = time.monotonic()
    stored = s.call("analyze_trace", {"paths": ["rank0.json"]})["stored"]
    say(f"analyze_trace of the 1 GB trace: {time.monotonic() - t:.2f} s (stored as {stored})")
    times = []
    for _ in range(a.repeat):
        t = time.monotonic()
        out = s.call("summarize", {})
        times.append(time.monotonic() - t)
    # summarize's structured result names the report's data file, report.json.
    with open(os.path.join(work, out["json_path"])) as fh:
        rep = json.load(fh)
    ours = statistics.median(times)
    say(f"summarize over stdio: median {ours:.3f} s, min {min(times):.3f} s ({a.repeat} calls; "
        f"{len(rep['runs'])} runs, {len(rep['charts'])} charts, {len(rep['cpu'])} CPU rows)")
    cli = []
    for _ in range(a.repeat):
        t = time.monotonic()
        subprocess.run([BIN, "call", "summarize", json.dumps({"session": rep["session"]}),
                        "--root", work], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        cli.append(time.monotonic() - t)
    say(f"system-profile call summarize (a new process each): median {statistics.median(cli):.3f} s")
    s.close()
    if a.hta:
        code = ("import time, sys; t = time.monotonic()\n"
                "from hta.trace_analysis import TraceAnalysis\n"
                "ta = TraceAnalysis(trace_dir=sys.argv[1])\n"
                "ta.get_temporal_breakdown(visualize=False)\n"
                "print(f'{time.monotonic() - t:.2f}')\n")
        hdir = os.path.join(work, "hta")
        os.makedirs(hdir)
        os.link(trace, os.path.join(hdir, "rank0.json"))
        r = subprocess.run([a.hta, "-c", code, hdir], capture_output=True, text=True,
                           env={**os.environ, "HTA_DISABLE_NS_ROUNDING": "1"})
        if r.returncode == 0:
            hta_s = float(r.stdout.strip().splitlines()[-1])
            say(f"HTA load + temporal breakdown of the same trace: {hta_s:.2f} s ({hta_s / ours:.0f}x summarize)")
        else:
            say(f"HTA failed: {r.stderr[-500:]}")
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()

"""summarize on a session with 50 runs and a 1 GB trace analysis already done (issue 7's
benchmark), beside what the same tables cost without a stored analysis: Holistic Trace
Analysis loading and analysing that trace.

    python3 bench/summarize.py [--repeat 5] [--hta /tmp/htavenv/bin/python]

Needs the release build (cargo build --release -p system-profile-mcp). The trace is the real
2-rank NCCL trace of crates/parse/tests/data/kineto with its events repeated (shifted in time,
ids renumbered) until the JSON passes 1 GB.
"""
import argparse, copy, gzip, json, os, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BIN = os.path.join(REPO, "target", "release", "system-profile")
SRC = os.path.join(REPO, "crates/parse/tests/data/kineto/hta-a100-2rank-nccl-allreduce.json.gz")


def big_trace(path, target_bytes=1 << 30):
    d = json.load(gzip.open(SRC))
    ev = d["traceEvents"]
    xs = [e for e in ev if isinstance(e, dict) and "ts" in e]
    t0 = min(float(e["ts"]) for e in xs)
    span = max(float(e["ts"]) + float(e.get("dur", 0)) for e in xs) - t0
    one = len(json.dumps(d))
    repeat = target_bytes // one + 1
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
            elif r > 0:
                continue
            big.append(e)
    d["traceEvents"] = big
    with open(path, "w") as f:
        json.dump(d, f)
    return os.path.getsize(path)


class Server:
    def __init__(self, root):
        self.p = subprocess.Popen([BIN, "serve", "--root", root], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.n = 0
        self.ask("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "bench", "version": "1"}})

    def ask(self, method, params):
        self.n += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method,
                                       "params": params}) + "\n")
        self.p.stdin.flush()
        while True:
            msg = json.loads(self.p.stdout.readline())
            if msg.get("id") == self.n:
                return msg

    def call(self, name, args):
        r = self.ask("tools/call", {"name": name, "arguments": args})
        if r.get("result", {}).get("isError") or "error" in r:
            raise SystemExit(f"{name}: {r}")
        return r["result"]["structuredContent"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--hta", default=None, help="a Python with HolisticTraceAnalysis")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="sp-bench-summarize-")
    trace = os.path.join(work, "rank0.json")
    size = big_trace(trace)
    print(f"trace: {size / 1e9:.2f} GB of JSON")
    s = Server(work)
    py = sys.executable
    t = time.monotonic()
    for i in range(50):
        s.call("run_profiler", {"profiler": "measure",
                                "target": {"command": [py, "-c", "sum(range(3_000_000))"]}})
    print(f"50 measure runs: {time.monotonic() - t:.1f} s")
    t = time.monotonic()
    stored = s.call("analyze_trace", {"paths": ["rank0.json"]})["stored"]
    analysed = time.monotonic() - t
    print(f"analyze_trace of the 1 GB trace: {analysed:.2f} s (stored as {stored})")
    times = []
    for _ in range(a.repeat):
        t = time.monotonic()
        out = s.call("summarize", {})
        times.append(time.monotonic() - t)
    rep = out["report"]
    print(f"summarize over stdio: median {statistics.median(times):.3f} s, min {min(times):.3f} s "
          f"({a.repeat} calls; {len(rep['runs'])} runs, {len(rep['charts'])} charts, "
          f"{len(rep['cpu'])} CPU rows)")
    session = rep["session"]
    cli = []
    for _ in range(a.repeat):
        t = time.monotonic()
        subprocess.run([BIN, "call", "summarize", json.dumps({"session": session}), "--root", work],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cli.append(time.monotonic() - t)
    print(f"system-profile call summarize (new process each): median {statistics.median(cli):.3f} s")
    if a.hta:
        code = ("import time,sys; t=time.monotonic();"
                "from hta.trace_analysis import TraceAnalysis;"
                "ta=TraceAnalysis(trace_dir=sys.argv[1]); b=ta.get_temporal_breakdown(visualize=False);"
                "print(f'{time.monotonic()-t:.2f}')")
        hdir = os.path.join(work, "hta")
        os.makedirs(hdir)
        os.link(trace, os.path.join(hdir, "rank0.json"))
        r = subprocess.run([a.hta, "-c", code, hdir], capture_output=True, text=True,
                           env={**os.environ, "HTA_DISABLE_NS_ROUNDING": "1"})
        hta_s = float(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else None
        print(f"HTA load + temporal breakdown of the same trace: {hta_s} s"
              + (f" ({hta_s / statistics.median(times):.0f}x summarize)" if hta_s else f" failed: {r.stderr[-300:]}"))
    s.p.stdin.close()
    s.p.wait()
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()

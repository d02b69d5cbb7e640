"""Benchmarks of the server, each against a peer measured in the same run (BENCHMARKS.md).

Usage: .venv/bin/python bench/bench.py [--binary target/release/system-profile] [--rounds N]

1. initialize + tools/list round trip over stdio (median of N), system-profile vs the official
   MCP Python SDK's stdio server (bench/peer_python_sdk_server.py), driven by the same loop.
2. idle RSS after initialize (VmRSS from /proc/PID/status), both servers.
3. start to first answer: spawn, send initialize, read the answer (median of 20 spawns).
4. detect_tools cold (first call of a fresh server) and cached (second call), against
   bench/detect_sequential.sh probing the same tools one after another.

The real interpreter (sys.executable), never the pyenv shim, is the Python both sides use.
Prints a Markdown table of medians and ratios.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable  # the venv's interpreter, which has the SDK


class Stdio:
    def __init__(self, argv, env=None):
        self.t_spawn = time.perf_counter()
        self.p = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=ROOT,
            bufsize=-1,  # buffered: an unbuffered readline() reads a byte per syscall
        )
        self.next_id = 0

    def ask(self, method, params=None):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError(f"server closed while waiting for {method}")
            answer = json.loads(line)
            if answer.get("id") == self.next_id:
                return answer

    def rss_kb(self):
        for line in Path(f"/proc/{self.p.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return None

    def close(self):
        self.p.stdin.close()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "bench", "version": "0"},
}


def servers(binary):
    env = dict(os.environ, PATH=f"{ROOT / '.venv/bin'}:{os.environ.get('PATH', '')}")
    return {
        "system-profile": ([binary, "serve", "--python", PY], env),
        "python-sdk": ([PY, str(ROOT / "bench/peer_python_sdk_server.py")], env),
    }


def round_trips(argv, env, rounds):
    s = Stdio(argv, env)
    s.ask("initialize", INIT)
    for _ in range(20):  # warm up
        s.ask("initialize", INIT)
        s.ask("tools/list")
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        a = s.ask("initialize", INIT)
        b = s.ask("tools/list")
        samples.append((time.perf_counter() - t0) * 1e3)
        assert "result" in a and "result" in b, (a, b)
    time.sleep(0.5)  # let it go idle
    rss = s.rss_kb()
    s.close()
    return statistics.median(samples), rss


def first_answer(argv, env, spawns=20):
    samples = []
    for _ in range(spawns):
        s = Stdio(argv, env)
        s.ask("initialize", INIT)
        samples.append((time.perf_counter() - s.t_spawn) * 1e3)
        s.close()
    return statistics.median(samples)


def detect(binary, env, runs, python):
    cold, cached = [], []
    for _ in range(runs):
        s = Stdio([binary, "serve", "--python", python], env)
        s.ask("initialize", INIT)
        t0 = time.perf_counter()
        r = s.ask("detect_tools")
        cold.append((time.perf_counter() - t0) * 1e3)
        assert r["result"]["cached"] is False
        t0 = time.perf_counter()
        r = s.ask("detect_tools")
        cached.append((time.perf_counter() - t0) * 1e3)
        assert r["result"]["cached"] is True
        s.close()
    seq, seq_one = [], []
    for _ in range(runs):
        for mode, out in (("per-module", seq), ("one-python", seq_one)):
            t0 = time.perf_counter()
            subprocess.run(
                ["bash", str(ROOT / "bench/detect_sequential.sh"), python, mode],
                env=env,
                check=True,
            )
            out.append((time.perf_counter() - t0) * 1e3)
    m = statistics.median
    return m(cold), m(cached), m(seq), m(seq_one)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=str(ROOT / "target/release/system-profile"))
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--detect-runs", type=int, default=7)
    args = ap.parse_args()
    results = {}
    for name, (argv, env) in servers(args.binary).items():
        rt, rss = round_trips(argv, env, args.rounds)
        fa = first_answer(argv, env)
        results[name] = (rt, rss, fa)
    env = servers(args.binary)["system-profile"][1]
    # The interpreter behind `python3` outside the venv (the pyenv shim resolved), and the venv's.
    bare = subprocess.run(
        ["python3", "-c", "import sys; print(sys.executable)"],
        capture_output=True, text=True, check=True,
        env=dict(os.environ, PATH=os.environ.get("PATH", "").replace(f"{ROOT / '.venv/bin'}:", "")),
    ).stdout.strip()
    detects = {
        f"bare {bare}": detect(args.binary, env, args.detect_runs, bare),
        f"venv {PY} (py-spy, memray, line_profiler, mcp installed)": detect(
            args.binary, env, args.detect_runs, PY
        ),
    }

    ours, peer = results["system-profile"], results["python-sdk"]
    print(f"machine: {os.cpu_count()} CPUs; python {PY}; {time.strftime('%Y-%m-%d %H:%M')}")
    print()
    print("| metric | system-profile | peer | peer / ours |")
    print("|---|---|---|---|")
    print(
        f"| initialize + tools/list round trip, median of {args.rounds} | {ours[0]:.3f} ms | "
        f"{peer[0]:.3f} ms (Python SDK server) | {peer[0] / ours[0]:.1f}x |"
    )
    print(
        f"| idle RSS after initialize | {ours[1] / 1024:.1f} MB | {peer[1] / 1024:.1f} MB "
        f"(Python SDK server) | {peer[1] / ours[1]:.1f}x |"
    )
    print(
        f"| spawn to first answer (initialize), median of 20 | {ours[2]:.1f} ms | "
        f"{peer[2]:.1f} ms (Python SDK server) | {peer[2] / ours[2]:.1f}x |"
    )
    for label, (cold, cached, seq, seq_one) in detects.items():
        print(
            f"| detect_tools cold, median of {args.detect_runs}, {label} | {cold:.1f} ms | "
            f"{seq:.1f} ms (detect_sequential.sh, one process per probe) | {seq / cold:.1f}x |"
        )
        print(
            f"| detect_tools cold, median of {args.detect_runs}, {label} | {cold:.1f} ms | "
            f"{seq_one:.1f} ms (detect_sequential.sh one-python) | {seq_one / cold:.1f}x |"
        )
        print(
            f"| detect_tools cached round trip, median of {args.detect_runs}, {label} | "
            f"{cached:.3f} ms | {cold:.1f} ms (our own cold call) | {cold / cached:.0f}x |"
        )


if __name__ == "__main__":
    main()

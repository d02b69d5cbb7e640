"""64 concurrent tool calls over one stdio connection, with `ping` sent every 20 ms while they
run: how long ping takes (issue 9's target: under 50 ms), and that every call is answered.

    python3 bench/load.py [--rounds 5] [--calls 64]

Needs the release build (cargo build --release -p system-profile-mcp). Each call is a
`run_profiler` of `custom` on `sleep 0.5` (a child process started, waited for, recorded in
the manifest), so the server starts 64 process groups at once and writes the manifest 128
times while the pings go through.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, "target", "release", "system-profile")


def round_once(calls):
    root = tempfile.mkdtemp(prefix="sp-bench-load-")
    p = subprocess.Popen([BIN, "serve", "--root", root], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, bufsize=1)

    def send(msg):
        p.stdin.write(json.dumps(msg) + "\n")
        p.stdin.flush()

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "0"}}})
    p.stdout.readline()
    for i in range(calls):
        send({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call", "params": {
            "name": "run_profiler",
            "arguments": {"profiler": "custom", "target": {"command": ["sleep", "0.5"]}}}})
    answered, pings, ping_id = set(), [], 10_000
    while len(answered) < calls:
        ping_id += 1
        sent = time.perf_counter()
        send({"jsonrpc": "2.0", "id": ping_id, "method": "ping"})
        while True:
            msg = json.loads(p.stdout.readline())
            if msg.get("id") == ping_id:
                if len(answered) < calls:
                    pings.append((time.perf_counter() - sent) * 1000)
                break
            if msg["result"]["isError"] or msg["result"]["structuredContent"]["status"] != "completed":
                raise SystemExit(f"call failed: {msg}")
            answered.add(msg["id"])
        time.sleep(0.02)
    p.stdin.close()
    p.wait(timeout=30)
    return pings


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=64)
    a = ap.parse_args()
    every = []
    for r in range(a.rounds):
        pings = round_once(a.calls)
        every += pings
        print(f"round {r + 1}: {a.calls} calls answered; {len(pings)} pings mid-load, "
              f"median {statistics.median(pings):.1f} ms, max {max(pings):.1f} ms", flush=True)
    every.sort()
    p95 = every[int(len(every) * 0.95) - 1]
    print(f"all rounds: {len(every)} pings, median {statistics.median(every):.1f} ms, "
          f"p95 {p95:.1f} ms, max {every[-1]:.1f} ms")


if __name__ == "__main__":
    main()

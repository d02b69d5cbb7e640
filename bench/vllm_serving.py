"""`profile "vllm serving"` against a real vLLM server: the pipeline's wall time, and the
server's throughput at the user's client with and without the pipeline observing it.

    python bench/vllm_serving.py [--rounds N] [--binary target/release/system-profile]

Starts vLLM's CPU build with the tiny model (tests/vllm/vllm.sh, the profiler's endpoints on),
then for each round: the user's load alone (tests/vllm/client.py, 4 streams of 32 tokens) for
the pipeline's length, and the same load while `system-profile profile --budget 150 "vllm
serving"` runs; the client's requests per second and generated tokens per second are counted
over the same stretch (from its 10th second to the pipeline's end) in both. Prints one JSON line
a round and the medians.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
VLLM = ROOT / "tests/vllm/vllm.sh"


def venv():
    out = subprocess.run(["bash", str(VLLM), "venv"], check=True, capture_output=True, text=True)
    return pathlib.Path(out.stdout.strip())


def rate(record, start, end, tokens):
    done = [r for r in record["requests"] if start <= r["start_unix_s"] and r["start_unix_s"] + r["e2e_s"] <= end]
    span = end - start
    return len(done) / span, len(done) * tokens / span


def client(py, url, out, seconds):
    return subprocess.Popen(
        [str(py), str(ROOT / "tests/vllm/client.py"), url, str(out), "--seconds", str(seconds),
         "--concurrency", "4", "--max-tokens", "32"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--binary", default=str(ROOT / "target/release/system-profile"))
    ap.add_argument("--port", type=int, default=8417)
    args = ap.parse_args()
    py = venv() / "bin/python"
    work = pathlib.Path(tempfile.mkdtemp())
    model = work / "model"
    subprocess.run(["bash", str(VLLM), "model", str(model)], check=True, capture_output=True)
    config = json.dumps({"profiler": "torch", "torch_profiler_dir": str(work / "traces"),
                         "torch_profiler_with_stack": False})
    subprocess.run(["bash", str(VLLM), "start", str(model), str(args.port), "--profiler-config", config],
                   check=True, capture_output=True)
    url = f"http://127.0.0.1:{args.port}"
    rows = []
    try:
        for i in range(args.rounds):
            # With the pipeline.
            rec = work / f"with-{i}.json"
            c = client(py, url, rec, 200)
            time.sleep(10)
            root = work / f"root-{i}"
            root.mkdir()
            t0 = time.time()
            subprocess.run([args.binary, "profile", "--root", str(root), "--budget", "150", "vllm serving"],
                           check=True, capture_output=True, env={**os.environ, "PATH": f"{py.parent}:{os.environ['PATH']}"})
            t1 = time.time()
            c.kill()
            c.wait()
            with_rps, with_tps = rate(json.load(open(rec)), t0, t1, 32)
            # The same load alone, over a stretch as long.
            rec = work / f"alone-{i}.json"
            c = client(py, url, rec, 200)
            time.sleep(10)
            a0 = time.time()
            time.sleep(t1 - t0)
            a1 = time.time()
            c.kill()
            c.wait()
            alone_rps, alone_tps = rate(json.load(open(rec)), a0, a1, 32)
            row = {"round": i, "pipeline_wall_s": round(t1 - t0, 1), "alone_rps": round(alone_rps, 2),
                   "with_rps": round(with_rps, 2), "alone_tok_s": round(alone_tps), "with_tok_s": round(with_tps),
                   "throughput_ratio": round(with_rps / alone_rps, 3)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        subprocess.run(["bash", str(VLLM), "stop", str(model)])
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0] if k != "round"}
    print(json.dumps({"median": med}))


if __name__ == "__main__":
    sys.exit(main())

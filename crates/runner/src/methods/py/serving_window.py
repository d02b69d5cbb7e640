"""serving_window: one window of a running LLM server (vLLM's OpenAI server) under load.

    python serving_window.py --url URL [--url URL...] --duration S --out DIR [--profiler-dir D]
                             [--concurrency C] [--max-tokens T] [--profile-s P] [--stop-timeout S]

Standard library only, so any interpreter runs it. It scrapes the server's /metrics every
second into DIR/serving-metrics.txt (each scrape after a `# sp-scrape <unix s>` line); decides
whose load the window sees (requests already arriving: the user's, and ours is not started;
else a bounded streaming load of ours, C requests at a time until the window ends, each timed
on our clock into DIR/serving-requests.jsonl); after the window's last scrape, under the same
load, runs vLLM's profiler for P seconds through /start_profile and /stop_profile when the
server has them, the stop bounded, and copies the traces it wrote into DIR; and writes what it did to
DIR/serving-window.json. Everything the server returns is data: it is written down, never run.
"""

import argparse
import asyncio
import json
import os
import re
import shutil
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

STARTED = time.monotonic()
PROMPT = (
    "Write a short story about a lighthouse keeper who finds a message in a bottle. "
    "The story should be told in the first person and end with a question. "
)
MAX_TRACE_BYTES = 256 << 20


def http(url, method="GET", timeout=10.0):
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def counter(text, name):
    """The sum of a metric's samples (every label set), or None where it is absent."""
    total = None
    pat = re.compile(r"^" + re.escape(name) + r"(\{[^}]*\})? (\S+)", re.M)
    for m in pat.finditer(text):
        try:
            total = (total or 0.0) + float(m.group(2))
        except ValueError:
            pass
    return total


class Scraper:
    def __init__(self, url, path):
        self.url = url + "/metrics"
        self.out = open(path, "w")
        self.last = ""
        self.count = 0

    def scrape(self):
        at = time.time()
        try:
            _, body = http(self.url, timeout=5.0)
        except (OSError, urllib.error.URLError) as e:
            return str(e)
        self.last = body.decode("utf-8", "replace")
        self.out.write(f"# sp-scrape {at:.6f}\n")
        self.out.write(self.last)
        if not self.last.endswith("\n"):
            self.out.write("\n")
        self.out.flush()
        self.count += 1
        return None


async def one_request(host, port, path, body, record):
    """One streamed completion over a raw connection, timed from before the request is sent."""
    started = time.perf_counter()
    record["start_unix_s"] = time.time()
    reader, writer = await asyncio.open_connection(host, port)
    try:
        payload = json.dumps(body).encode()
        writer.write(
            b"POST " + path.encode() + b" HTTP/1.1\r\nHost: " + host.encode()
            + b"\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"
            + b"Connection: close\r\nContent-Length: " + str(len(payload)).encode()
            + b"\r\n\r\n" + payload
        )
        await writer.drain()
        status = await reader.readline()
        if b" 200 " not in status:
            rest = await reader.read(2000)
            raise RuntimeError(status.decode("latin-1").strip() + " " + rest[-300:].decode("utf-8", "replace"))
        chunked = False
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b""):
                break
            if line.lower().startswith(b"transfer-encoding:") and b"chunked" in line.lower():
                chunked = True
        first = last = None
        gaps = []
        chunks = 0
        buf = b""
        done = False
        while not done:
            if chunked:
                size_line = await reader.readline()
                if not size_line:
                    break
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    break
                data = await reader.readexactly(size + 2)
                data = data[:-2]
            else:
                data = await reader.read(65536)
                if not data:
                    break
            now = time.perf_counter()
            buf += data
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                for line in event.split(b"\n"):
                    if not line.startswith(b"data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == b"[DONE]":
                        done = True
                        continue
                    # A chunk with text is a token (or a few) reaching the client.
                    if b'"text":""' in payload.replace(b" ", b""):
                        continue
                    chunks += 1
                    if first is None:
                        first = now
                    else:
                        gaps.append(now - last)
                    last = now
        ended = time.perf_counter()
        record.update(
            ttft_s=(first - started) if first is not None else None,
            itl_s=gaps,
            e2e_s=ended - started,
            chunks=chunks,
            # ignore_eos: every request generates exactly max_tokens, however they were chunked.
            tokens=body["max_tokens"],
        )
    finally:
        writer.close()


async def our_load(url, model, stop, concurrency, max_tokens, path):
    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname, parts.port or 80
    body = {
        "model": model,
        "prompt": PROMPT,
        "max_tokens": max_tokens,
        "stream": True,
        "ignore_eos": True,
        "temperature": 1.0,
    }
    out = open(path, "w")

    async def worker():
        while not stop.is_set():
            record = {}
            try:
                await asyncio.wait_for(
                    one_request(host, port, "/v1/completions", body, record), timeout=120
                )
            except Exception as e:  # a failed request is a figure, not the end of the load
                record["error"] = f"{type(e).__name__}: {e}"[:300]
                await asyncio.sleep(0.2)
            out.write(json.dumps(record) + "\n")
            out.flush()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    out.close()


def served_model(url):
    try:
        _, body = http(url + "/v1/models", timeout=5.0)
        data = json.loads(body).get("data") or []
        return data[0]["id"] if data else None
    except (OSError, ValueError, KeyError, urllib.error.URLError):
        return None


def profiler_call(url, what, timeout):
    started = time.monotonic()
    try:
        status, _ = http(url + "/" + what, method="POST", timeout=timeout)
        return status, time.monotonic() - started
    except urllib.error.HTTPError as e:
        return e.code, time.monotonic() - started
    except (OSError, urllib.error.URLError) as e:
        return str(e), time.monotonic() - started


def choose_url(urls):
    """The first of the process's addresses whose /metrics has vLLM's figures."""
    why = []
    for url in urls:
        try:
            _, body = http(url + "/metrics", timeout=5.0)
        except (OSError, urllib.error.URLError) as e:
            why.append(f"{url}/metrics: {e}")
            continue
        if counter(body.decode("utf-8", "replace"), "vllm:generation_tokens_total") is not None:
            return url, None
        why.append(f"{url}/metrics has no vllm:generation_tokens_total")
    return None, "; ".join(why) or "no address"


async def window(args, account):
    url, why = choose_url(args.url)
    if url is None:
        account["error"] = f"no address of the server answered vLLM's /metrics ({why})"
        return
    args.url = account["url"] = url
    scraper = Scraper(args.url, os.path.join(args.out, "serving-metrics.txt"))
    err = scraper.scrape()
    if err is not None:
        account["error"] = f"/metrics did not answer: {err}"
        return
    before = counter(scraper.last, "vllm:generation_tokens_total") or 0
    running = counter(scraper.last, "vllm:num_requests_running") or 0
    await asyncio.sleep(1.0)
    scraper.scrape()
    after = counter(scraper.last, "vllm:generation_tokens_total") or 0
    user = running > 0 or after > before
    account["load"] = "user" if user else "ours"
    began = time.monotonic()
    until = began + args.duration
    load = None
    stop_load = asyncio.Event()
    if not user:
        model = served_model(args.url)
        account["model"] = model
        if model is None:
            account["error"] = "/v1/models named no model to load the server with"
            return
        load = asyncio.ensure_future(
            our_load(args.url, model, stop_load, args.concurrency, args.max_tokens,
                     os.path.join(args.out, "serving-requests.jsonl"))
        )
    profiler = account["profiler"]
    while time.monotonic() < until:
        await asyncio.sleep(max(0.0, min(1.0, until - time.monotonic())))
        await asyncio.get_running_loop().run_in_executor(None, scraper.scrape)
    # The window ends at its last scrape: the figures are the server's alone. The profiler
    # runs after it, under the same load, so its cost stays out of them.
    account["scrapes"] = scraper.count
    account["window_end_unix_s"] = time.time()
    left = args.budget_s - (time.monotonic() - STARTED) if args.budget_s else float("inf")
    if args.profile_s > 0 and left < args.profile_s + 15:
        profiler["state"] = "skipped"
        profiler["answer"] = f"{left:.0f} s of the run's time left: too little to profile and flush"
    elif args.profile_s > 0:
        stop_timeout = max(5.0, min(args.stop_timeout, left - args.profile_s - 5))
        loop = asyncio.get_running_loop()
        status, _ = await loop.run_in_executor(None, profiler_call, args.url, "start_profile", 30.0)
        if status == 200:
            profiler["state"] = "started"
            profiler["started_unix_s"] = time.time()
            await asyncio.sleep(args.profile_s)
            profiler["stopping_unix_s"] = time.time()
            stop = loop.run_in_executor(None, profiler_call, args.url, "stop_profile", stop_timeout)
            if load is not None:
                stop_load.set()
            status, took = await stop
            profiler["stop_s"] = round(took, 3)
            if status != 200:
                profiler["state"] = "stop_timed_out" if not isinstance(status, int) else "failed"
                profiler["answer"] = str(status)
        else:
            profiler["state"] = "absent" if status == 404 else "failed"
            profiler["answer"] = str(status)
    if load is not None:
        stop_load.set()
        await asyncio.wait_for(load, timeout=150)


def copy_traces(args, account):
    profiler = account["profiler"]
    if profiler.get("state") != "started" or not args.profiler_dir:
        return
    since = profiler.get("started_unix_s", 0) - 5
    copied = []
    try:
        names = sorted(os.listdir(args.profiler_dir))
    except OSError as e:
        profiler["copy_error"] = str(e)
        return
    for name in names:
        src = os.path.join(args.profiler_dir, name)
        try:
            st = os.stat(src)
        except OSError:
            continue
        if st.st_mtime < since or not os.path.isfile(src) or st.st_size > MAX_TRACE_BYTES:
            continue
        if not (name.endswith(".pt.trace.json.gz") or name.endswith(".pt.trace.json")
                or name.endswith("profiler_out.txt")):
            continue
        dst = "vllm-" + re.sub(r"[^A-Za-z0-9._-]", "_", name)
        shutil.copyfile(src, os.path.join(args.out, dst))
        copied.append(dst)
    profiler["traces"] = copied


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", action="append", required=True)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--profiler-dir")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--profile-s", type=float, default=0.0)
    ap.add_argument("--stop-timeout", type=float, default=60.0)
    ap.add_argument("--budget-s", type=float, help="the whole run's time: the profiler fits in it or is skipped")
    args = ap.parse_args()
    account = {"url": "", "profiler": {}, "started_unix_s": time.time()}
    try:
        asyncio.run(window(args, account))
        copy_traces(args, account)
    finally:
        account["ended_unix_s"] = time.time()
        with open(os.path.join(args.out, "serving-window.json"), "w") as f:
            json.dump(account, f)
    if "error" in account:
        print(account["error"], file=sys.stderr)
        sys.exit(3)


if __name__ == "__main__":
    main()

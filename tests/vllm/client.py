"""A user's load on a vLLM server through the official `openai` client, and its own figures:
the truth the serving window's /metrics figures are checked against.

    python client.py BASE_URL OUT.json [--requests N | --seconds S] [--concurrency C] [--max-tokens T]

Streams completions with `ignore_eos` (every request generates exactly T tokens) and times
each on its own clock: time to first token (first content chunk), inter-token latency (gaps
between content chunks), end to end, and when it started (Unix seconds). Each stream's first
request warms the client up and is not recorded. Bounded: N requests or S seconds, then it
ends (OUT.json is rewritten after every request, so a client that is stopped keeps its record).
"""

import argparse
import asyncio
import json
import os
import time

from openai import AsyncOpenAI

PROMPTS = [
    "def fibonacci(n): return",
    "import os\nimport sys\n\nclass Reader:",
    "for line in open(path):",
    "The quick brown fox jumps over the lazy dog. " * 8,
]


async def one(client, i, max_tokens):
    started_unix_s = time.time()
    started = time.perf_counter()
    first = None
    last = None
    gaps = []
    chunks = 0
    stream = await client.completions.create(
        model="tiny",
        prompt=PROMPTS[i % len(PROMPTS)],
        max_tokens=max_tokens,
        stream=True,
        extra_body={"ignore_eos": True},
    )
    async for chunk in stream:
        if not chunk.choices or not chunk.choices[0].text:
            continue
        now = time.perf_counter()
        chunks += 1
        if first is None:
            first = now
        else:
            gaps.append(now - last)
        last = now
    ended = time.perf_counter()
    return {
        "start_unix_s": started_unix_s,
        "ttft_s": (first or ended) - started,
        "itl_s": gaps,
        "e2e_s": ended - started,
        "chunks": chunks,
    }


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base_url")
    ap.add_argument("out")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--seconds", type=float, help="issue requests until this long has passed")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=32)
    args = ap.parse_args()
    client = AsyncOpenAI(base_url=args.base_url + "/v1", api_key="unused", max_retries=0)
    queue = list(range(args.requests))
    results = []
    started = time.time()
    until = time.monotonic() + args.seconds if args.seconds else None

    def save():
        with open(args.out + ".tmp", "w") as f:
            json.dump({"started": started, "ended": time.time(), "requests": results}, f)
        os.replace(args.out + ".tmp", args.out)

    async def worker(w):
        await one(client, w, args.max_tokens)  # warm-up: connection and the SDK's first use
        i = 0
        while (until is None and queue) or (until is not None and time.monotonic() < until):
            i = queue.pop() if until is None else i + 1
            results.append(await one(client, i, args.max_tokens))
            save()

    await asyncio.gather(*(worker(w) for w in range(args.concurrency)))
    save()


asyncio.run(main())

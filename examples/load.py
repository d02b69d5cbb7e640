"""Load for examples/http_service.py: GET /report from a few threads for a while.

    python examples/load.py --port 8765 --seconds 10 [--threads 2] [--path /report]
"""
import argparse
import threading
import time
import urllib.request


def hammer(url, until, counts):
    n = 0
    while time.time() < until:
        with urllib.request.urlopen(url, timeout=10) as r:
            r.read()
        n += 1
    counts.append(n)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--path", default="/report")
    a = ap.parse_args()
    until = time.time() + a.seconds
    counts = []
    threads = [threading.Thread(target=hammer, args=(f"http://127.0.0.1:{a.port}{a.path}", until, counts))
               for _ in range(a.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"{sum(counts)} requests in {a.seconds:.0f} s")


if __name__ == "__main__":
    main()

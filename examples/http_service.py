"""A long-running HTTP service to attach to by PID or by name, with a known hot handler.

GET /report renders a page by computing digests in pure Python (render_page is the hotspot);
GET /health answers at once. It writes its PID to --pidfile when given and serves until
killed. Put it under load with examples/load.py.

    python examples/http_service.py --port 8765 [--pidfile service.pid]
"""
import argparse
import hashlib
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def render_page(n=20000):
    digest = b""
    for i in range(n):
        digest = hashlib.sha256(digest + str(i).encode()).digest()
    rows = "".join(f"<tr><td>{i}</td><td>{digest[i % 32]}</td></tr>" for i in range(200))
    return f"<html><body><table>{rows}</table></body></html>".encode()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = render_page() if self.path.startswith("/report") else b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # keep stderr quiet under load
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--pidfile")
    a = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    if a.pidfile:
        with open(a.pidfile, "w") as f:
            f.write(str(os.getpid()))
    server.serve_forever()


if __name__ == "__main__":
    main()

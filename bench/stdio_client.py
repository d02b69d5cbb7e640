"""A minimal JSON-RPC client of `system-profile serve` over stdio: one request at a time,
answers matched by id, tool errors raised. Shared by the benchmarks and the capture scripts."""
import json
import os
import subprocess


class Server:
    def __init__(self, binary, root, env=None):
        self.p = subprocess.Popen([binary, "serve", "--root", root], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=env or dict(os.environ))
        self.n = 0
        self.ask("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "system-profile-scripts", "version": "1"}})
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        self.p.stdin.flush()

    def ask(self, method, params):
        self.n += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method,
                                       "params": params}) + "\n")
        self.p.stdin.flush()
        while True:
            msg = json.loads(self.p.stdout.readline())
            if msg.get("id") == self.n:
                return msg

    def call(self, name, arguments):
        r = self.ask("tools/call", {"name": name, "arguments": arguments})
        if "error" in r or r.get("result", {}).get("isError"):
            raise SystemExit(f"{name} failed: {r}")
        return r["result"]["structuredContent"]

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)

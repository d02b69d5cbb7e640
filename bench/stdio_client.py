"""A minimal JSON-RPC client of an MCP server over stdio: one request at a time, answers
matched by id. `Stdio` speaks to any server's command line (the context benchmark measures
peers with it); `Server` is `system-profile serve` with tool errors raised. Shared by the
benchmarks and the capture scripts."""
import json
import os
import subprocess


class Stdio:
    def __init__(self, argv, cwd=None, env=None, stderr=subprocess.DEVNULL):
        self.p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=stderr, text=True, env=env or dict(os.environ))
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
            line = self.p.stdout.readline()
            if not line:
                raise SystemExit(f"the server ended while answering {method}")
            msg = json.loads(line)
            if msg.get("id") == self.n:
                return msg

    def close(self):
        self.p.stdin.close()
        try:
            self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()


class Server(Stdio):
    def __init__(self, binary, root, env=None):
        super().__init__([binary, "serve", "--root", root], env=env, stderr=None)

    def call(self, name, arguments):
        r = self.ask("tools/call", {"name": name, "arguments": arguments})
        if "error" in r or r.get("result", {}).get("isError"):
            raise SystemExit(f"{name} failed: {r}")
        return r["result"]["structuredContent"]

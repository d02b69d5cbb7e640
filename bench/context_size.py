"""What a model reads of an MCP server: the tool definitions (name, description, input schema)
before its first call, and the text of every result in a scripted six-step session.

Counted in bytes and in tokens of a real tokenizer from PyPI: the `tokenizer.json` that the
`anthropic==0.38.0` package ships (Claude's earlier tokenizer, read with `tokenizers`);
tiktoken's encodings are downloaded at run time, which a machine without that network cannot
do. Without the tokenizer, tokens are estimated as bytes / 4 and marked `~`.

    .venv/bin/python bench/context_size.py --binary target/release/system-profile \
        [--peer "uvx mcp-server-git"] [--sessions cpu,memory,service]

Sessions (each on a scratch copy of examples/, one server process per session):
- cpu: `examples/cpu_hotspot.py 100`, identify -> detect -> plan -> every planned run -> list
  -> summarize;
- memory: `examples/memory_hog.py memory`, plus instrument_file on its `build` function with the
  runner strategy and list_changes;
- service: `examples/http_service.py` under load, by `pid N`.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from stdio_client import Stdio  # noqa: E402


def tokenizer():
    try:
        import anthropic
        from tokenizers import Tokenizer
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(anthropic.__file__), "tokenizer.json")
    return Tokenizer.from_file(path) if os.path.exists(path) else None


TOK = tokenizer()


def count(text):
    b = len(text.encode())
    if TOK is None:
        return b, f"~{b // 4}"
    return b, str(len(TOK.encode(text).ids))


def definitions(server, label):
    tools = server.ask("tools/list", {})["result"]["tools"]
    whole = json.dumps({"tools": tools}, separators=(",", ":"), ensure_ascii=False)
    read = "".join(json.dumps({"name": t["name"], "description": t.get("description", ""),
                               "inputSchema": t.get("inputSchema", {})},
                              separators=(",", ":"), ensure_ascii=False) for t in tools)
    rb, rt = count(read)
    print(f"| {label} | {len(tools)} | {rb:,} | {rt} | {len(whole.encode()):,} |")


class Session:
    """Calls tools and counts what the model reads of each result: its text content."""

    def __init__(self, server, name):
        self.server, self.name, self.rows = server, name, []

    def call(self, tool, arguments):
        r = self.server.ask("tools/call", {"name": tool, "arguments": arguments})
        result = r.get("result", {})
        text = "".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")
        self.rows.append((tool, *count(text)))
        if "error" in r or result.get("isError"):
            raise SystemExit(f"{tool} failed: {r}")
        return result["structuredContent"]

    def steps(self, arguments, before_runs=None):
        t = self.call("identify_target", {"arguments": arguments})
        self.call("detect_tools", {})
        # A server before target ids took the whole target back.
        target = {"target_id": t["target_id"]} if "target_id" in t else {"target": t}
        plan = self.call("plan_profile", {**target, "time_budget_s": 60})
        if before_runs:
            before_runs(plan)
        for step in plan["steps"]:
            if step["run_profiler"].get("background"):
                continue
            self.call("run_profiler", step["run_profiler"])
        self.call("list_runs", {})
        self.call("summarize", {})

    def table(self):
        total_b = sum(b for _, b, _ in self.rows)
        tokens = [t for _, _, t in self.rows]
        exact = all(not t.startswith("~") for t in tokens)
        total_t = sum(int(t.lstrip("~")) for t in tokens)
        biggest = max(self.rows, key=lambda r: r[1])
        print(f"| {self.name} | {len(self.rows)} | {total_b:,} | {'' if exact else '~'}{total_t:,} "
              f"| {biggest[0]} {biggest[1]:,} B / {biggest[2]} |")


def scratch():
    d = tempfile.mkdtemp(prefix="context-size-")
    shutil.copytree(os.path.join(ROOT, "examples"), os.path.join(d, "examples"))
    return d


def session_cpu(binary):
    d = scratch()
    s = Stdio([binary, "serve", "--root", d], d)
    sess = Session(s, "cpu: cpu_hotspot.py 100")
    sess.steps("examples/cpu_hotspot.py 100")
    s.close()
    return sess


def session_memory(binary):
    d = scratch()
    s = Stdio([binary, "serve", "--root", d], d)
    sess = Session(s, "memory: memory_hog.py memory, instrumented")

    def instrument(plan):
        for i in plan.get("instrumentation", []):
            change = i.get("instrument_file")
            if change:
                sess.call("instrument_file", change)
                sess.call("list_changes", {})
                return

    sess.steps("examples/memory_hog.py memory", before_runs=instrument)
    s.close()
    return sess


def session_service(binary):
    d = scratch()
    py = os.path.join(ROOT, ".venv/bin/python")
    port = "18931"
    pidfile = os.path.join(d, "service.pid")
    service = subprocess.Popen([py, "examples/http_service.py", "--port", port, "--pidfile", pidfile],
                               cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    load = None
    try:
        deadline = time.time() + 60
        while not os.path.exists(pidfile) and time.time() < deadline:
            time.sleep(0.2)
        load = subprocess.Popen([py, "examples/load.py", "--port", port, "--seconds", "3600"], cwd=d,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pid = open(pidfile).read().strip()
        s = Stdio([binary, "serve", "--root", d], d)
        sess = Session(s, "service: pid N under load")
        sess.steps(f"pid {pid}")
        s.close()
        return sess
    finally:
        for p in (load, service):
            if p:
                p.kill()
                p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "target/release/system-profile"))
    ap.add_argument("--peer", action="append", default=[],
                    help="another MCP server's stdio command line, measured the same way")
    ap.add_argument("--sessions", default="cpu,memory,service")
    a = ap.parse_args()
    a.binary = os.path.abspath(a.binary)
    print(f"tokenizer: {'anthropic 0.38.0 tokenizer.json' if TOK else 'none (bytes / 4)'}\n")
    print("| Server | Tools | Definitions read (bytes) | (tokens) | tools/list (bytes) |")
    print("|---|---|---|---|---|")
    s = Stdio([a.binary, "serve"], ROOT)
    definitions(s, "system-profile")
    s.close()
    for peer in a.peer:
        p = Stdio(peer.split(), ROOT)
        definitions(p, peer)
        p.close()
    print("\n| Session | Results | Text (bytes) | (tokens) | Largest result |")
    print("|---|---|---|---|---|")
    runs = {"cpu": session_cpu, "memory": session_memory, "service": session_service}
    for name in a.sessions.split(","):
        if name:
            sess = runs[name](a.binary)
            sess.table()
            for tool, b, t in sess.rows:
                print(f"    {tool}: {b:,} B, {t} tokens", file=sys.stderr)


if __name__ == "__main__":
    main()

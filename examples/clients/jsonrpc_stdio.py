"""Drive `system-profile serve` with plain JSON-RPC over stdio: no SDK, one JSON object per
line. Identifies a target, plans, runs every planned step, summarizes, and prints where the
report is.

    python examples/clients/jsonrpc_stdio.py examples/cpu_hotspot.py 100

Every tool is also a plain JSON-RPC method of its own name that returns the structured result,
so a script needs neither `initialize` nor `tools/call` (an MCP client would use both).
"""
import json
import shutil
import subprocess
import sys


class Server:
    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.next_id = 0

    def call(self, method, params):
        self.next_id += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.next_id,
                                          "method": method, "params": params}) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit("the server closed its output")
            answer = json.loads(line)
            if answer.get("id") == self.next_id:
                break
        if "error" in answer:
            raise SystemExit(f"{method}: {answer['error']['message']}")
        return answer["result"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def main():
    target = " ".join(sys.argv[1:]) or "examples/cpu_hotspot.py"
    binary = shutil.which("system-profile") or "target/release/system-profile"
    server = Server([binary, "serve", "--root", "."])
    found = server.call("identify_target", {"arguments": target})
    if found["needs_clarification"]:
        raise SystemExit("\n".join(found["questions"]))
    plan = server.call("plan_profile", {"target_id": found["target_id"]})
    for step in plan["steps"]:
        run = server.call("run_profiler", step["run_profiler"])
        # A method that measured nothing (not installed, or the program ended before py-spy
        # could read it) gives way to the step's next one, as `system-profile profile` does.
        for fallback in step.get("fallbacks", []):
            if not run.get("not_started"):
                break
            print(f"{step['id']} {step['method']}: {run['not_started']}; {fallback['method']} instead",
                  file=sys.stderr)
            run = server.call("run_profiler", fallback["run_profiler"])
        print(f"{step['id']} {step['method']}: {run['status']} {run.get('wall_s') or 0:.2f} s",
              file=sys.stderr)
    report = server.call("summarize", {})
    for i, r in enumerate(report["report"]["recommendations"][:3], 1):
        print(f"{i}. {r['title']}")
    print(f"report: {report['markdown_path']}")
    server.close()


if __name__ == "__main__":
    main()

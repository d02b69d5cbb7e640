"""Drive `system-profile serve` with the official MCP Python SDK (`pip install mcp`): the six
steps of /system-profile as an agent would call them, on one target.

    python examples/clients/mcp_sdk.py examples/memory_hog.py memory

Identify, detect, plan; instrument the functions the plan points at (decorators, in the
ledger); run the plan; summarize; show Part B; revert every change.
"""
import asyncio
import shutil
import sys

from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters


async def main(target: str) -> None:
    binary = shutil.which("system-profile") or "target/release/system-profile"
    server = StdioServerParameters(command=binary, args=["serve", "--root", "."])
    async with Client(server) as client:
        async def call(name, arguments):
            result = await client.call_tool(name, arguments)
            if result.is_error:
                raise SystemExit(f"{name}: {result.content[0].text}")
            return result.structured_content

        found = await call("identify_target", {"arguments": target})
        if found["needs_clarification"]:
            raise SystemExit("\n".join(found["questions"]))
        await call("detect_tools", {})
        plan = await call("plan_profile", {"target_id": found["target_id"]})
        for s in plan["instrumentation"]:
            change = s.get("instrument_file")
            if change:
                change["strategy"] = "decorator" if change.get("function") else change["strategy"]
                made = await call("instrument_file", change)
                print(f"instrumented {change['path']}: {', '.join(made['change_ids'])}", file=sys.stderr)
        for step in plan["steps"]:
            run = await call("run_profiler", step["run_profiler"])
            print(f"{step['id']} {step['method']}: {run['status']}", file=sys.stderr)
        report = await call("summarize", {})
        print(report["markdown"])
        reverted = await call("revert_changes", {"all": True})
        print(f"reverted {len(reverted['reverted'])} change(s); complete: {reverted['complete']}",
              file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "examples/memory_hog.py memory"))

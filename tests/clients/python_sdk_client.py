"""Drive `system-profile serve` with the official MCP Python SDK (pinned in .ci/run).

Usage: python_sdk_client.py MODE SERVER_BINARY [ROOT]
  MODE: legacy (initialize handshake) | auto (server/discover probe, 2026-07-28 when offered)

A whole six-step session: connects, lists the tools, calls detect_tools with a progress
callback, identifies the script `work.py memory` in ROOT and plans for the target the SDK got
back (the structured result passed through as is), reads work.py and instruments work() with a
timing decorator, runs the plan's measure step, summarizes in Japanese (reading report.md back
through its resource link), lists and reverts the changes, and gets the `system-profile`
prompt. Prints one JSON object describing what the SDK saw, for the Rust integration test to
assert on. Exit status 0 unless the SDK raised.
"""

import asyncio
import json
import sys

from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

# The server's budget for a result's text (crates/mcp/src/brief.rs, TEXT_BUDGET_BYTES).
TEXT_BUDGET_BYTES = 4 * 1024


def text_is_result_or_brief(text: str, structured: dict) -> bool:
    """The text is the whole result as JSON, or a JSON brief of it within the budget that
    keeps its keys and says where the whole is."""
    parsed = json.loads(text)
    if parsed == structured:
        return True
    return (
        len(text.encode()) <= TEXT_BUDGET_BYTES
        and "_brief" in parsed
        and set(parsed) - {"_brief"} <= set(structured)
    )


async def main(mode: str, binary: str, root: str) -> dict:
    server = StdioServerParameters(command=binary, args=["serve", "--root", root])
    progress = []

    async def on_progress(value, total, message):
        progress.append({"progress": value, "total": total, "message": message})

    async with Client(server, mode=mode) as client:
        session = client.session
        listed = await client.list_tools()
        result = await client.call_tool(
            "detect_tools", {"refresh": True}, progress_callback=on_progress
        )
        bad = await client.call_tool("detect_tools", {"probe_timeout_s": "soon"})
        target = await client.call_tool("identify_target", {"arguments": "work.py --n 3 memory"})
        plan_progress = []

        async def on_plan_progress(value, total, message):
            plan_progress.append(value)

        plan = await client.call_tool(
            "plan_profile", {"target_id": target.structured_content["target_id"]}, progress_callback=on_plan_progress
        )
        structured = result.structured_content or {}
        t = target.structured_content or {}
        p = plan.structured_content or {}
        # Steps 5 and 6: the plan's measure step as planned, then the report in Japanese (the
        # SDK checks the structured result against the tool's output schema).
        # Step 4 after reading the code (work.py is in ROOT): a timing decorator on work().
        with open(f"{root}/work.py") as fh:
            source_before = fh.read()
        instrumented = await client.call_tool(
            "instrument_file",
            {"path": "work.py", "measure": "timing", "function": "work", "strategy": "decorator"},
        )
        measure = next((s["run_profiler"] for s in p.get("steps", []) if s["method"] == "measure"), None)
        ran = await client.call_tool("run_profiler", measure) if measure else None
        # run_profiler answers with the run in brief; get_run with its whole record (which the
        # SDK also checks against get_run's output schema).
        record = (
            await client.call_tool("get_run", {"run_id": ran.structured_content["run_id"]})
            if ran and ran.structured_content
            else None
        )
        report = await client.call_tool("summarize", {"lang": "ja"})
        rs = report.structured_content or {}
        # The report's files come back as resource links; read report.md through one.
        links = [c for c in report.content if c.type == "resource_link"]
        md_link = next((l for l in links if str(l.uri).endswith("/report.md")), None)
        md = await client.read_resource(str(md_link.uri)) if md_link else None
        # The report's data is report.json, one more link: a program reads it there.
        json_link = next((l for l in links if str(l.uri).endswith("/report.json")), None)
        report_data = (
            json.loads((await client.read_resource(str(json_link.uri))).contents[0].text)
            if json_link
            else {}
        )
        listed_resources = await client.list_resources()
        changes = await client.call_tool("list_changes", {})
        reverted = await client.call_tool("revert_changes", {"all": True})
        with open(f"{root}/work.py") as fh:
            source_after = fh.read()
        prompts = await client.list_prompts()
        prompt = await client.get_prompt("system-profile", {"target": "work.py memory"})
        return {
            "mode": mode,
            "protocol_version": session.protocol_version,
            "discovered": session.discover_result is not None,
            "tools": [
                {
                    "name": t.name,
                    "title": t.title,
                    "has_output_schema": t.output_schema is not None,
                    "read_only": bool(t.annotations and t.annotations.read_only_hint),
                }
                for t in listed.tools
            ],
            "is_error": result.is_error,
            "text_is_result_or_brief": text_is_result_or_brief(result.content[0].text, structured),
            "tool_ids": [t["id"] for t in structured.get("tools", [])],
            "usable": {t["id"]: t["usable"] for t in structured.get("tools", [])},
            "perf_notes": next(
                (t.get("notes", []) for t in structured.get("tools", []) if t["id"] == "perf"),
                [],
            ),
            "progress": progress,
            "bad_is_error": bad.is_error,
            "bad_text": bad.content[0].text if bad.content else "",
            "target": {
                "is_error": target.is_error,
                "kind": t.get("kind"),
                "focus": t.get("focus"),
                "argv": (t.get("script") or {}).get("argv"),
                "needs_clarification": t.get("needs_clarification"),
            },
            "plan": {
                "is_error": plan.is_error,
                "text_is_result_or_brief": text_is_result_or_brief(plan.content[0].text, p),
                "recipe": (p.get("recipe") or {}).get("id"),
                "methods": [s["method"] for s in p.get("steps", [])],
                "run_profiler": [s["run_profiler"] for s in p.get("steps", [])],
                "progress": plan_progress,
            },
            "run_status": (ran.structured_content or {}).get("status") if ran else None,
            "record": {
                "is_error": record.is_error if record else None,
                "status": (record.structured_content or {}).get("status") if record else None,
                "metrics": sorted(((record.structured_content or {}).get("metrics") or {}).keys())
                if record
                else [],
            },
            "summary": {
                "is_error": report.is_error,
                "text": report.content[0].text if report.content else "",
                "cpu_rows": len(report_data.get("cpu", [])),
                "markdown_path": rs.get("markdown_path"),
                "part_b_files": [c["file"] for c in report_data.get("changes", {}).get("rows", [])],
                "links": [str(l.uri) for l in links],
                "read_markdown_equals": bool(md) and md.contents[0].text == rs.get("markdown"),
            },
            "resources_listed": len(listed_resources.resources),
            "instrument": {
                "is_error": instrumented.is_error,
                "change_ids": (instrumented.structured_content or {}).get("change_ids", []),
                "listed": len((changes.structured_content or {}).get("changes", [])),
                "revert_complete": (reverted.structured_content or {}).get("complete"),
                "source_restored": source_before == source_after,
            },
            "prompt": {
                "names": [x.name for x in prompts.prompts],
                "text": prompt.messages[0].content.text,
            },
        }


if __name__ == "__main__":
    mode, binary = sys.argv[1], sys.argv[2]
    root = sys.argv[3] if len(sys.argv) > 3 else "."
    print(json.dumps(asyncio.run(main(mode, binary, root))))

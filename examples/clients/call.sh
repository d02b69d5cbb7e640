#!/usr/bin/env bash
# One tool per command, JSON out: a session's runs and its report from a shell.
# Each `system-profile call` is its own session, so the report names the session the run went to.
set -euo pipefail
session=$(system-profile call run_profiler \
  '{"profiler": "py_spy_record", "target": {"command": ["python3", "examples/cpu_hotspot.py", "100"]}}' \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["session"])')
system-profile call summarize "{\"session\": \"$session\"}" \
  | python3 -c 'import json, sys; r = json.load(sys.stdin); print(r["markdown_path"])'

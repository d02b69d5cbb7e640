"""Capture the real sessions under crates/report/tests/data/sessions/ by driving the real
server over stdio (JSON-RPC lines) with real profilers on the programs beside them.

    python3 crates/report/tests/tools/capture_sessions.py target/release/system-profile [NAME...]

With names (cpu, cpu-after, memory, io), only those scenarios are captured again.

Each scenario runs in a fresh root with its own server (one server = one session). The
session folder is copied with only what `summarize` reads (manifest.json, the samplers'
procfs.jsonl / nvml.jsonl) and the instrumentation log; the root's absolute path is replaced
by @ROOT@ in those files so a test can put them under any root.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
PROGRAMS = os.path.join(DATA, "programs")
OUT = os.path.join(DATA, "sessions")
REPO = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
VENV_PY = os.path.join(REPO, ".venv", "bin", "python")
# system_profile_instrument::BACKUP_DIR
BACKUP_DIR = os.path.join("profile_output", ".backup")
sys.path.insert(0, os.path.join(REPO, "bench"))
from stdio_client import Server  # noqa: E402


def keep(root, session, name):
    """Copy what summarize reads into sessions/<name>/, the root replaced by @ROOT@."""
    src = os.path.join(root, "profile_output", session)
    dst = os.path.join(OUT, name)
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    wanted = ("manifest.json", "procfs.jsonl", "nvml.jsonl")
    for dirpath, _, files in os.walk(src):
        for f in files:
            if f not in wanted:
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
            with open(os.path.join(dirpath, f)) as fh:
                text = fh.read().replace(root, "@ROOT@")
            with open(os.path.join(dst, rel), "w") as fh:
                fh.write(text)
    log = os.path.join(root, "profile_output", "instrument", "measure.jsonl")
    if os.path.exists(log):
        with open(log) as fh:
            text = fh.read().replace(root, "@ROOT@")
        with open(os.path.join(dst, "instrument.jsonl"), "w") as fh:
            fh.write(text)
    ledger = os.path.join(root, "profile_output", "ledger.json")
    if os.path.exists(ledger):
        # The files the ledger names, as the changes left them (Part B checks their hashes).
        with open(ledger) as fh:
            for change in json.load(fh)["changes"]:
                src_file = os.path.join(root, change["file"])
                # The helper (profile_output/instrument/_sp_profile.py) is the instrument
                # crate's own source: the test installs it from there, not from a copy.
                if change["file"].startswith("profile_output/"):
                    continue
                if os.path.exists(src_file):
                    dst_file = os.path.join(dst, "files", change["file"])
                    os.makedirs(os.path.dirname(dst_file), exist_ok=True)
                    shutil.copy(src_file, dst_file)
                # The file as the change left it: the report maps lines back through it.
                after = os.path.join(BACKUP_DIR, change["id"] + ".after")
                if os.path.exists(os.path.join(root, after)):
                    dst_file = os.path.join(dst, "files", after)
                    os.makedirs(os.path.dirname(dst_file), exist_ok=True)
                    shutil.copy(os.path.join(root, after), dst_file)
        with open(ledger) as fh:
            text = fh.read().replace(root, "@ROOT@")
        with open(os.path.join(dst, "ledger.json"), "w") as fh:
            fh.write(text)
    with open(os.path.join(dst, "SESSION"), "w") as fh:
        fh.write(session + "\n")


def run_scenario(binary, name, program, runs, instrument=None, replace=None):
    root = tempfile.mkdtemp(prefix="sp-capture-")
    for f in os.listdir(PROGRAMS):
        shutil.copy(os.path.join(PROGRAMS, f), root)
    for f in ("cpu_hotspot.py", "memory_hog.py"):
        shutil.copy(os.path.join(REPO, "examples", f), root)
    if replace:
        shutil.copy(os.path.join(PROGRAMS, replace[1]), os.path.join(root, replace[0]))
    env = dict(os.environ)
    env["PATH"] = os.path.join(REPO, ".venv", "bin") + ":" + env.get("PATH", "")
    s = Server(binary, root, env)
    if instrument:
        for args in instrument:
            s.call("instrument_file", args)
    session = None
    for args in runs:
        rec = s.call("run_profiler", args)
        session = rec["session"]
        print(name, rec["run_id"], rec["status"], rec.get("wall_s"), file=sys.stderr)
    s.close()
    keep(root, session, name)
    shutil.rmtree(root)


def main():
    binary = os.path.abspath(sys.argv[1])
    wanted = set(sys.argv[2:])

    def scenario(binary, name, *args, **kwargs):
        if not wanted or name in wanted:
            run_scenario(binary, name, *args, **kwargs)

    hot = [VENV_PY, "cpu_hotspot.py", "150"]
    cpu_runs = [{"profiler": "measure", "target": {"command": hot}, "label": "baseline"}
                for _ in range(3)]
    cpu_runs += [
        {"profiler": "py_spy_record", "target": {"command": hot}},
        {"profiler": "cprofile", "target": {"command": hot}},
        {"profiler": "perf_stat", "target": {"command": hot}},
        {"profiler": "perf_record", "target": {"command": hot}},
        {"profiler": "strace_c", "target": {"command": hot}},
        {"profiler": "line_profiler", "target": {"command": hot},
         "options": {"function": "cpu_hotspot.py:busy"}},
    ]
    scenario(binary, "cpu", "cpu_hotspot.py", cpu_runs)
    after = [{"profiler": "measure", "target": {"command": hot}, "label": "fixed"}
             for _ in range(3)]
    after.append({"profiler": "py_spy_record", "target": {"command": hot}})
    scenario(binary, "cpu-after", "cpu_hotspot.py", after,
             replace=("cpu_hotspot.py", "cpu_hotspot_fixed.py"))
    hog = [VENV_PY, "memory_hog.py"]
    scenario(binary, "memory", "memory_hog.py", [
        {"profiler": "measure", "target": {"command": hog}},
        {"profiler": "tracemalloc", "target": {"command": hog}},
        {"profiler": "memray", "target": {"command": hog}},
    ], instrument=[
        {"path": "memory_hog.py", "measure": "duplicates", "function": "prepare",
         "strategy": "decorator"},
        {"path": "memory_hog.py", "measure": "memory", "function": "main",
         "strategy": "decorator"},
    ])
    wait = [VENV_PY, "io_wait.py"]
    scenario(binary, "io", "io_wait.py", [
        {"profiler": "measure", "target": {"command": wait}},
        {"profiler": "strace_c", "target": {"command": wait}},
        {"profiler": "py_spy_record", "target": {"command": wait}},
        {"profiler": "tracemalloc", "target": {"command": wait}},
    ])


if __name__ == "__main__":
    main()

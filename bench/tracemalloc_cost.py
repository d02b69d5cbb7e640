"""The tracemalloc runner's cost against the program run alone, for two revisions of the runner.

    .venv/bin/python bench/tracemalloc_cost.py [OLD_REV [NEW_REV]]   # defaults: bb662c6~1 HEAD

Each revision's TRACEMALLOC_RUNNER is read from crates/runner/src/lib.rs (git show) and run on
examples/memory_hog.py (or SP_BENCH_PROGRAM, another file of examples/) with the venv's interpreter, three times each, interleaved with the
program run alone; prints the median wall seconds and the ratio to the program alone.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PY = os.path.join(REPO, ".venv", "bin", "python")
PROGRAM = os.environ.get("SP_BENCH_PROGRAM", "memory_hog.py")


def runner(rev):
    src = subprocess.run(["git", "-C", REPO, "show", f"{rev}:crates/runner/src/lib.rs"],
                         check=True, capture_output=True, text=True).stdout
    start = src.index('const TRACEMALLOC_RUNNER: &str = r#"') + len('const TRACEMALLOC_RUNNER: &str = r#"')
    return src[start:src.index('"#;', start)]


def wall(argv, cwd):
    t = time.monotonic()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t


def main():
    old = sys.argv[1] if len(sys.argv) > 1 else "bb662c6~1"
    new = sys.argv[2] if len(sys.argv) > 2 else "HEAD"
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["cp", os.path.join(REPO, "examples", PROGRAM), d], check=True)
        codes = {rev: runner(rev) for rev in (old, new)}
        times = {"alone": [], old: [], new: []}
        for _ in range(3):
            times["alone"].append(wall([PY, PROGRAM], d))
            for rev, code in codes.items():
                times[rev].append(wall([PY, "-c", code, os.path.join(d, "out.json"), "1", "0.1", PROGRAM], d))
        base = statistics.median(times["alone"])
        for k, v in times.items():
            m = statistics.median(v)
            print(f"{k:>12}: {m:6.2f} s  ({m / base:4.1f}x the program alone)")


if __name__ == "__main__":
    main()

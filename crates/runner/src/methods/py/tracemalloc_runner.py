import json, os, runpy, sys, threading, time, tracemalloc
out, depth, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
target = sys.argv[4:]
OWN = (tracemalloc.__file__, runpy.__file__, threading.__file__, "<string>")
def top(snapshot, n=30):
    # Grouped by line first, then the runner's own lines dropped: filter_traces runs Python
    # per block and took half a minute for a few million blocks; this is one pass in C.
    out = []
    for s in snapshot.statistics("lineno"):
        f = s.traceback[0].filename
        if f in OWN or f.startswith("<frozen "):
            continue
        out.append([f, s.traceback[0].lineno, s.size, s.count])
        if len(out) >= n:
            break
    return out
state = {"timeline": [], "snap_at": 0}
stop = threading.Event()
t0 = time.monotonic()
def watch():
    last = 0
    while not stop.wait(interval):
        cur, peak = tracemalloc.get_traced_memory()
        if len(state["timeline"]) < 100000:
            state["timeline"].append([round(time.monotonic() - t0, 4), cur, peak])
        # A new snapshot every 10% of growth, and once more when growth stops at a new high
        # (a plateau 1% above the last snapshot): the peak itself, not the ramp before it.
        grew = cur > max(state["snap_at"] * 1.1, 1 << 20)
        plateau = cur > max(state["snap_at"] * 1.01, 1 << 20) and cur <= last * 1.001
        if grew or plateau:
            state["snap_at"] = cur
            # Only the copy here (C, untraced, ~0.1 s per 300,000 blocks); grouping it by line
            # is Python and slow, and done at exit: grouped here, it starved this thread for
            # seconds while the target ran on to its peak.
            state["peak_snap"] = tracemalloc.take_snapshot()
        last = cur
def statm():
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
def leading_imports(path):
    # The top-level imports before the first other statement: what the script pays before its
    # own code runs. Later imports may depend on that code (sys.path, environment variables).
    import ast
    try:
        with open(path, "rb") as f:
            src = f.read()
        body = ast.parse(src, path).body
        lines = src.decode("utf-8", "replace").splitlines()
    except Exception:
        return []
    def imported(n):
        # (module, names from it): `from a import b` may import the submodule a.b.
        if isinstance(n, ast.Import):
            return [(a.name, ()) for a in n.names]
        if isinstance(n, ast.ImportFrom):
            if n.level == 0 and n.module and n.module != "__future__":
                return [(n.module, tuple(a.name for a in n.names if a.name != "*"))]
            return []
        if isinstance(n, ast.Try) and n.body and all(isinstance(b, (ast.Import, ast.ImportFrom)) for b in n.body):
            # `try: import torch / except ImportError:` is an import too.
            return [m for b in n.body for m in imported(b)]
        return None
    names = []
    for i, n in enumerate(body):
        if i == 0 and isinstance(n, ast.Expr) and isinstance(getattr(n.value, "value", None), str):
            continue
        if isinstance(n, ast.Expr) and "__import__" in ast.unparse(n) and '# [PROFILE]' in lines[n.lineno - 1]:
            continue  # instrument_file's helper line: ours, not the program's
        more = imported(n)
        if more is None:
            break
        names += [m for m in more if m[0] != "_sp_profile"]
    return names
rss_before = statm()
imports = []
if target[0] != "-m":
    sys.path.insert(0, os.path.dirname(os.path.abspath(target[0])))
    # Imported untraced: their memory is the baseline, and tracing them slows nothing we report.
    for name, fromlist in leading_imports(target[0]):
        t_import = time.monotonic()
        row = {"module": name}
        try:
            __import__(name, fromlist=fromlist)
        except BaseException as e:
            row["error"] = "%s: %s" % (type(e).__name__, e)
        row["rss_after_bytes"] = statm()
        row["wall_s"] = round(time.monotonic() - t_import, 4)
        imports.append(row)
    sys.path.pop(0)
t0 = time.monotonic()
tracemalloc.start(depth)
watcher = threading.Thread(target=watch, daemon=True)
watcher.start()
code = 0
# The script's globals, held as the interpreter holds a `__main__`'s until it exits: what they
# keep is live at exit, not freed before the exit snapshot.
ns = None
try:
    ns = run_target(target)
except SystemExit as e:
    code = exit_status(e)
finally:
    stop.set()
    # A snapshot in flight finishes before the report is written.
    watcher.join(timeout=30)
    cur, peak = tracemalloc.get_traced_memory()
    snap = state.pop("peak_snap", None)
    at_exit = tracemalloc.take_snapshot()
    # A program that ended before the watcher's first look, or grew past its last snapshot,
    # holds more now than that snapshot saw: what is live now is the better picture of the peak.
    if snap is None or cur > state["snap_at"]:
        snap, state["snap_at"] = at_exit, cur
    report = {"current": cur, "peak": peak, "depth": depth,
              "peak_sites": top(snap),
              "exit_sites": top(at_exit, 200), "timeline": state["timeline"],
              "peak_sites_at": state["snap_at"], "rss_before_imports": rss_before,
              "imports": imports}
    tracemalloc.stop()
    with open(out, "w") as f:
        json.dump(report, f)
sys.exit(code)

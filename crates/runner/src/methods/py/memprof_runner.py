import json, linecache, os, runpy, sys, threading
out, target, qualname = sys.argv[1], os.path.realpath(sys.argv[2]), sys.argv[3]
rest = sys.argv[4:]
try:
    from memory_profiler import LineProfiler
except ImportError:
    sys.stderr.write("No module named memory_profiler\n")
    sys.exit(97)
prof = LineProfiler(backend="psutil")
prof._original_trace_function = None
def tracer(frame, event, arg):
    code = frame.f_code
    if event == "call" and code not in prof.code_map:
        if getattr(code, "co_qualname", code.co_name) == qualname and os.path.realpath(code.co_filename) == target:
            prof.code_map.add(code)
    if code in prof.code_map:
        return prof.trace_memory_usage(frame, event, arg)
    return None
def write():
    sys.settrace(None)
    rows = []
    for filename, lines in prof.code_map.items():
        for lineno, m in lines:
            rows.append({
                "line": lineno,
                "source": linecache.getline(filename, lineno).rstrip("\n"),
                "occurrences": m[2] if m else 0,
                "mem_usage_mib": m[1] if m else None,
                "increment_mib": m[0] if m else None,
            })
        break
    with open(out, "w") as f:
        json.dump({"file": target, "function": qualname, "lines": rows}, f)
threading.settrace(tracer)
sys.settrace(tracer)
try:
    run_target(rest)
finally:
    write()

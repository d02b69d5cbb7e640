import os, sys, runpy, torch
from torch.profiler import profile, ProfilerActivity
rank = os.environ.get("RANK", "0")
p = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
p.__enter__()
try:
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    p.__exit__(None, None, None)
    p.export_chrome_trace("trace_rank%s.json" % rank)

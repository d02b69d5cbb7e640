import json, os, runpy, sys, time
started = time.perf_counter()
out_dir, schedule, shapes, memory, stack = sys.argv[1:6]
rest = sys.argv[6:]
rank = os.environ.get("RANK")
tag = "" if rank is None else "-rank%s" % rank
try:
    import torch
    from torch.profiler import ProfilerActivity, profile
except Exception as e:
    sys.stderr.write("torch cannot be imported: %s\n" % e)
    sys.exit(97)
acts = [ProfilerActivity.CPU]
cuda = torch.cuda.is_available()
if cuda:
    acts.append(ProfilerActivity.CUDA)
def env_int(name):
    v = os.environ.get(name)
    return int(v) if v is not None and v.isdigit() else None
import socket
state = {"steps": 0, "traces": [], "cuda": cuda, "rank": env_int("RANK"), "local_rank": env_int("LOCAL_RANK"),
         "node_rank": env_int("GROUP_RANK"), "host": socket.gethostname(), "step_by": None}
# Each step's wall: what a step costs unprofiled and while traced, measured in this one run.
# A step counts from the previous one's return from the profiler's step, so exporting a
# trace (inside that call) is no step's. The first step holds the start-up.
state["step_s"] = []
resumed = [0.0]
end_program = False
# Steps run after the window before the program is ended: with the profiler stopped they are
# the unprofiled steps the traced ones are compared with (those before it woke are often
# still warming up: word_language_model's were 1.5x its later ones).
STEPS_AFTER_WINDOW = 2
def ready(p):
    path = os.path.join(out_dir, "trace%s-%d.json.gz" % (tag, len(state["traces"])))
    p.export_chrome_trace(path)
    state["traces"].append(path)
kwargs = dict(activities=acts, record_shapes=shapes == "1", profile_memory=memory == "1", with_stack=stack == "1")
if schedule:
    w, wu, a, r, after = schedule.split(",")
    w, wu, a, r = int(w), int(wu), int(a), int(r)
    end_program = after == "end_program"
    state["window"] = {"wait": w, "warmup": wu, "active": a, "repeat": r, "after_trace": after}
    kwargs["schedule"] = torch.profiler.schedule(wait=w, warmup=wu, active=a, repeat=r)
    kwargs["on_trace_ready"] = ready
def write_state():
    with open(os.path.join(out_dir, "torch-profiler%s.json" % tag), "w") as f:
        json.dump(state, f)
prof = profile(**kwargs)
def stepped(kind):
    state["step_by"] = kind
    state["steps"] += 1
    state["step_s"].append(time.perf_counter() - started - resumed[0])
    if schedule:
        prof.step()
        if end_program and len(state["traces"]) >= r:
            state.setdefault("window_done_at_step", state["steps"])
            # The window is traced: end here rather than run the rest of the training. Not by
            # an exception, which the program's handlers could catch or a thread never see.
            if state["steps"] >= state["window_done_at_step"] + STEPS_AFTER_WINDOW:
                state["ended_after_step"] = state["steps"]
                write_state()
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)
    resumed[0] = time.perf_counter() - started
watch_steps(stepped)
code = 0
prof.__enter__()
try:
    run_target(rest)
except SystemExit as e:
    code = exit_status(e)
finally:
    prof.__exit__(None, None, None)
    if not schedule:
        path = os.path.join(out_dir, "trace%s.json.gz" % tag)
        prof.export_chrome_trace(path)
        state["traces"].append(path)
    write_state()
sys.exit(code)

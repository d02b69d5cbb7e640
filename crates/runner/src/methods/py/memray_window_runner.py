# memray over a window of a training's steps: the target runs as `__main__` untracked until
# `untraced` steps have ended, memray's Tracker records the next `active` steps, and then the
# program is ended (`end_program`) or runs on untracked. Each step's wall is timed, as the
# torch.profiler runner times them, so the record says what a tracked step cost against an
# untracked one. argv: the capture's path, the state file's path,
# `untraced,active,after_trace`, python allocators (1/0), native traces (1/0), then the
# target's argv after the interpreter.
import json as _sp_json, threading as _sp_threading, time as _sp_time
_sp_started = _sp_time.perf_counter()
_sp_capture, _sp_state_path, _sp_window = _sp_sys.argv[1:4]
_sp_python_allocators, _sp_native = _sp_sys.argv[4] == "1", _sp_sys.argv[5] == "1"
_sp_target = _sp_sys.argv[6:]
_sp_untraced, _sp_active, _sp_after = _sp_window.split(",")
_sp_untraced, _sp_active = int(_sp_untraced), int(_sp_active)
import memray as _sp_memray
_sp_state = {"steps": 0, "step_s": [], "step_by": None, "traces": []}
_sp_tracker = [None]
_sp_resumed = [0.0]


def _sp_write_state():
    with open(_sp_state_path, "w") as f:
        _sp_json.dump(_sp_state, f)


def _sp_track():
    # Entered from a thread of its own: memray hides the frames above the one that entered
    # its Tracker on the thread that entered it, and entered here, inside a hook deep in the
    # loop, that hid every frame of the loop's allocations (their stacks came back empty).
    # Every thread's stack is still recorded, the training thread's whole.
    def enter():
        _sp_tracker[0] = _sp_memray.Tracker(_sp_capture, native_traces=_sp_native,
                                            trace_python_allocators=_sp_python_allocators)
        _sp_tracker[0].__enter__()
    entering = _sp_threading.Thread(target=enter, name="sp-memray-window")
    entering.start()
    entering.join()


def _sp_untrack():
    tracker, _sp_tracker[0] = _sp_tracker[0], None
    if tracker is not None:
        tracker.__exit__(None, None, None)
        _sp_state["traces"].append(_sp_capture)


def _sp_stepped(kind):
    _sp_state["step_by"] = kind
    _sp_state["steps"] += 1
    _sp_state["step_s"].append(_sp_time.perf_counter() - _sp_started - _sp_resumed[0])
    n = _sp_state["steps"]
    if n == _sp_untraced:
        _sp_track()
    elif n == _sp_untraced + _sp_active and _sp_tracker[0] is not None:
        _sp_untrack()
        if _sp_after == "end_program":
            # Not by an exception, which the program's handlers could catch.
            _sp_state["ended_after_step"] = n
            _sp_write_state()
            _sp_sys.stdout.flush()
            _sp_sys.stderr.flush()
            _sp_os._exit(0)
    _sp_resumed[0] = _sp_time.perf_counter() - _sp_started


watch_steps(_sp_stepped)
if _sp_untraced == 0:
    _sp_track()
_sp_status = 0
try:
    run_target(_sp_target)
except SystemExit as _sp_e:
    _sp_status = exit_status(_sp_e)
finally:
    _sp_untrack()
    _sp_write_state()
_sp_sys.exit(_sp_status)

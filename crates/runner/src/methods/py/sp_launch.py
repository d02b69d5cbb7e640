"""The launcher every runner that starts the target shares: it runs `script args` or
`-m module args` as `__main__`, as `python` would, with its own `sys.argv` and the script's
folder first on `sys.path`. Prepended to each runner's code (`concat!` in the runner)."""
import os as _sp_os, runpy as _sp_runpy, sys as _sp_sys


def run_target(target):
    """Run the target as `__main__`; its globals, which the interpreter would keep until exit."""
    if target[:1] == ["-m"]:
        _sp_sys.argv = target[1:]
        return _sp_runpy.run_module(target[1], run_name="__main__", alter_sys=True)
    _sp_sys.argv = list(target)
    _sp_sys.path.insert(0, _sp_os.path.dirname(_sp_os.path.realpath(target[0])))
    return _sp_runpy.run_path(target[0], run_name="__main__")


def exit_status(e):
    """The status a `SystemExit` ends the interpreter with."""
    return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)


# The allocation sampler around the target: the extension built for this interpreter is
# imported from its folder, started, the target run as `__main__`, and stopped (its totals
# written) before the interpreter ends. argv: the extension's folder, the records' path, the
# mean bytes between samples, then the target's argv after the interpreter.
_sp_sys.path.insert(0, _sp_sys.argv[1])
import sp_allocsample as _sp_sampler

_sp_out, _sp_mean, _sp_target = _sp_sys.argv[2], float(_sp_sys.argv[3]), _sp_sys.argv[4:]
del _sp_sys.path[0]
_sp_status = 0
_sp_sampler.start(_sp_out, _sp_mean)
try:
    run_target(_sp_target)
except SystemExit as _sp_e:
    _sp_status = exit_status(_sp_e)
finally:
    _sp_sampler.stop()
_sp_sys.exit(_sp_status)

import cProfile, importlib.machinery, io, os, runpy, sys
out, rest = sys.argv[1], sys.argv[2:]
if rest[0] == "-m":
    code = "run_module(modname, run_name='__main__', alter_sys=True)"
    globs = {"run_module": runpy.run_module, "modname": rest[1]}
    sys.argv[:] = rest[1:]
else:
    sys.path.insert(0, os.path.dirname(rest[0]))
    with io.open_code(rest[0]) as fp:
        code = compile(fp.read(), rest[0], "exec")
    spec = importlib.machinery.ModuleSpec(name="__main__", loader=None, origin=rest[0])
    globs = {"__spec__": spec, "__file__": spec.origin, "__name__": spec.name,
             "__package__": None, "__cached__": None}
    sys.argv[:] = rest
prof = cProfile.Profile()
try:
    prof.runctx(code, globs, None)
finally:
    prof.dump_stats(out)

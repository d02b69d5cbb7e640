"""Run a script under Scalene (`scalene run`) with its torch.profiler integration off.

argv: outfile, mode ("cpu" or "memory"), the script, then its arguments.

Why not `python -m scalene run` itself: whenever torch is importable, Scalene wraps every
program, torch or not, in torch.profiler with stacks; on pyperformance's richards in memory
mode (2 CPUs, no GPU) it was still in `TorchProfiler.stop` 30 minutes after the program ended.
For memory mode Scalene re-executes itself with its allocator preloaded; this file does that
re-execution itself (the same variables Scalene sets), so the patch holds in the process that
profiles.
"""
import os
import sys

PRELOADED = "SP_SCALENE_PRELOADED"


def scalene_argv(outfile, mode, script, args):
    """`scalene run` arguments for the script and its own arguments (after `---`)."""
    argv = ["scalene", "run", "-o", outfile]
    if mode == "cpu":
        argv.append("--cpu-only")
    argv.append(script)
    if args:
        argv.append("---")
        argv.extend(args)
    return argv


def missing_env(wanted, environ):
    """The variables of `wanted` that `environ` does not hold with the same value."""
    return {k: v for k, v in wanted.items() if environ.get(k) != v}


def main():
    outfile, mode, script, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    mine = list(sys.argv)
    sys.argv[:] = scalene_argv(outfile, mode, script, args)
    from scalene.scalene_parseargs import ScaleneParseArgs
    from scalene.scalene_preload import ScalenePreload

    parsed, _ = ScaleneParseArgs.parse_args()
    missing = missing_env(ScalenePreload.get_preload_environ(parsed), os.environ)
    if missing and os.environ.get(PRELOADED) != "1":
        env = dict(os.environ, **missing)
        env[PRELOADED] = "1"
        os.execve(sys.executable, [sys.executable] + mine, env)
    import scalene.scalene_torch

    scalene.scalene_torch._torch_available = False
    from scalene.__main__ import main as scalene_main

    scalene_main()


if __name__ == "__main__":
    main()

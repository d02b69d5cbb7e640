#!/usr/bin/env bash
# Peer for the detect_tools benchmark: probe the same tools as detect_tools, one after another,
# the way a shell script would. Usage: detect_sequential.sh PYTHON [one-python]
#   one-python: check every Python module in a single interpreter (the cheapest sequential way).
set -u
py=${1:-python3}
mode=${2:-per-module}
for prog in py-spy /usr/bin/time valgrind hyperfine heaptrack nvidia-smi nvitop nsys ncu dcgmi; do
  command -v "$prog" >/dev/null 2>&1 && "$prog" --version >/dev/null 2>&1
done
command -v perf >/dev/null && perf version >/dev/null 2>&1
for prog in strace ltrace iostat vmstat pidstat mpstat; do
  command -v "$prog" >/dev/null 2>&1 && "$prog" -V >/dev/null 2>&1
done
command -v bpftrace >/dev/null && bpftrace --version >/dev/null 2>&1
# The real checks: counters, ptrace of a child.
perf stat -x, -e cycles,instructions true >/dev/null 2>&1
strace -f -o /dev/null true >/dev/null 2>&1
# Permissions, hardware, cgroups.
cat /proc/sys/kernel/perf_event_paranoid /proc/sys/kernel/kptr_restrict /proc/self/status \
    /proc/cpuinfo /proc/meminfo /proc/self/cgroup >/dev/null 2>&1
cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max /sys/fs/cgroup/pids.max >/dev/null 2>&1
ls /sys/devices/system/node >/dev/null 2>&1
nvidia-smi topo -m >/dev/null 2>&1
# Python: the interpreter, each module, torch.
"$py" -c 'import sys, json; print(json.dumps([sys.executable, sys.version]))' >/dev/null
mods="cProfile line_profiler pyinstrument scalene tracemalloc memory_profiler memray"
if [ "$mode" = one-python ]; then
  "$py" -c "
import importlib
for m in '$mods'.split():
    try: importlib.import_module(m)
    except Exception: pass" >/dev/null 2>&1
else
  for m in $mods; do "$py" -c "import $m" >/dev/null 2>&1; done
fi
"$py" -c 'import torch; print(torch.__version__, torch.cuda.is_available())' >/dev/null 2>&1
exit 0

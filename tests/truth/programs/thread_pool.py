"""A thread pool of two workers advancing pyperformance's n-body system (`run_benchmark.py` of
bm_nbody, unchanged, beside this file), as process_pool.py does with processes; POOL=process
runs the same map in a process pool (the truth's A/B)."""
import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import run_benchmark as nbody


def simulate(steps):
    nbody.advance(0.01, steps)
    return nbody.report_energy()


def main():
    pool = ProcessPoolExecutor if os.environ.get("POOL") == "process" else ThreadPoolExecutor
    with pool(2) as ex:
        print(sum(ex.map(simulate, [60000] * 8)))


if __name__ == "__main__":
    main()

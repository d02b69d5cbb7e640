"""A process pool of two workers, each advancing its own copy of pyperformance's n-body
system (`run_benchmark.py` of bm_nbody, unchanged, beside this file)."""
from multiprocessing import Pool

import run_benchmark as nbody


def simulate(steps):
    nbody.advance(0.01, steps)
    return nbody.report_energy()


def main():
    with Pool(2) as pool:
        print(sum(pool.map(simulate, [60000] * 8)))


if __name__ == "__main__":
    main()

"""A parent and four worker processes: most of the CPU time is in the workers' crunch().

The parent splits a range into chunks, a multiprocessing pool runs crunch() on each, and the
parent sums the results. A profiler that follows only the parent sees it waiting; the process
tree's CPU time is about four workers' worth.
"""
import multiprocessing
import sys


def crunch(bounds):
    lo, hi = bounds
    acc = 0
    for i in range(lo, hi):
        acc = (acc + i * i) % 1_000_003
    return acc


def main(n=4_000_000, workers=4):
    step = n // (workers * 4)
    chunks = [(i, min(i + step, n)) for i in range(0, n, step)]
    with multiprocessing.Pool(workers) as pool:
        total = sum(pool.map(crunch, chunks))
    print(total % 1000)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000_000)

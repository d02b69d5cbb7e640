"""Eight pool workers serialised on one lock: each task holds it around a 5 ms sleep (a
stand-in for a slow call made under a lock) and a little arithmetic. The pool finishes no
faster than one thread would: it waits on the lock."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

LOCK = threading.Lock()


def task(i):
    with LOCK:
        time.sleep(0.005)
        return sum(range(i % 100))


def main():
    with ThreadPoolExecutor(max_workers=8) as pool:
        total = sum(pool.map(task, range(600)))
    print(total)


if __name__ == "__main__":
    main()

"""Mostly waiting: sleeps between small unbuffered writes, as a polling service would.

Each round sleeps 25 ms and writes 1,500 single bytes with a system call each.
"""
import os
import tempfile
import time


def poll(rounds=80):
    fd, path = tempfile.mkstemp()
    try:
        for _ in range(rounds):
            time.sleep(0.025)
            for _ in range(1500):
                os.write(fd, b"x")
    finally:
        os.close(fd)
        os.unlink(path)


if __name__ == "__main__":
    poll()

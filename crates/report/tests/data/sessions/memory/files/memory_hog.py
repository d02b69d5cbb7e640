"""Memory-heavy on purpose: one site holds most of the heap, and a tensor is kept twice.

load_records() keeps 300,000 small byte strings alive (about 60 MiB at one line) while
summarise() walks them a few times; prepare() makes a float32 tensor and a clone of it (the
same data held twice).
"""
__import__("sys").path.append("/tmp/sp-capture-w7mwfuuq/profile_output/instrument"); import _sp_profile  # [PROFILE] c0002
import time

import torch


def load_records(n=300_000):
    return [bytes(160) + i.to_bytes(4, "little") for i in range(n)]


@_sp_profile.profile("c0003", "prepare", "duplicates", 1)  # [PROFILE] c0003
def prepare(rows=2048, cols=4096):
    weights = torch.randn(rows, cols)
    staged = weights.clone()  # kept "for the device": a second copy of the same data
    return weights, staged


def summarise(records, passes=30):
    total = 0
    for _ in range(passes):
        total += sum(len(r) for r in records)
        time.sleep(0.05)  # waiting on the next batch, as a pipeline would
    return total


@_sp_profile.profile("c0004", "main", "memory", 1)  # [PROFILE] c0004
def main():
    records = load_records()
    weights, staged = prepare()
    total = float(weights.sum()) + float(staged.sum()) + summarise(records)
    print(round(total) % 1000)


if __name__ == "__main__":
    main()

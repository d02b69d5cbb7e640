"""Memory-heavy on purpose, with a known biggest allocation site and a redundant copy.

load_records() keeps 300,000 small byte strings alive (about 60 MiB, all allocated at one
line: the biggest allocation site); prepare() makes a float32 tensor of 32 MiB and keeps a
clone of it beside it (the same data held twice: the redundant copy). Without torch, the
tensor is a bytearray and its copy a second bytearray.
"""
__import__("sys").path.append("/tmp/sp-capture-_83yoqcu/profile_output/instrument"); import _sp_profile  # [PROFILE] c0002
import time

try:
    import torch
except ImportError:  # the example still runs; only the duplication column needs torch
    torch = None


def load_records(n=300_000):
    return [bytes(160) + i.to_bytes(4, "little") for i in range(n)]


@_sp_profile.profile("c0003", "prepare", "duplicates", 1)  # [PROFILE] c0003
def prepare(rows=2048, cols=4096):
    if torch is None:
        weights = bytearray(rows * cols * 4)
        return weights, bytearray(weights)
    weights = torch.randn(rows, cols)
    staged = weights.clone()  # kept "for the device": a second copy of the same data
    return weights, staged


def summarise(records, passes=20):
    total = 0
    for _ in range(passes):
        total += sum(len(r) for r in records)
        time.sleep(0.02)  # waiting on the next batch, as a pipeline would
    return total


@_sp_profile.profile("c0004", "main", "memory", 1)  # [PROFILE] c0004
def main():
    records = load_records()
    weights, staged = prepare()
    total = len(weights) + len(staged) + summarise(records)
    print(total % 1000)


if __name__ == "__main__":
    main()

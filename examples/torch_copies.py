"""A small PyTorch program with the traffic a GPU job has: host-to-device and device-to-host
copies (pinned and pageable), a tensor kept on the CPU and on the device at once, a few GEMMs,
many tiny kernels, and an all_reduce across two processes.

On a machine with CUDA it uses the GPU (NCCL for the collective when every rank has a GPU of
its own, else gloo); without one it runs the same code on the CPU with gloo, so the copies are
no-ops but the program, the collective and the redundant copy are all there.

    python examples/torch_copies.py [steps]
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def load_batches(n, rows=256, cols=1024, pinned=False):
    batches = [torch.randn(rows, cols) for _ in range(n)]
    if pinned and DEVICE == "cuda":
        batches = [b.pin_memory() for b in batches]
    return batches


def keep_weights(rows=1024, cols=1024):
    host = torch.randn(rows, cols)
    device = host.to(DEVICE)
    # The host copy is kept "for checkpointing": the same data on the CPU and the device.
    staged = host.clone() if DEVICE == "cpu" else host
    return staged, device


def train_step(weights, batch):
    x = batch.to(DEVICE, non_blocking=True)
    y = x @ weights  # a GEMM
    for _ in range(20):  # many tiny kernels
        y = y * 0.999 + 0.001
    return y.sum().to("cpu")


def all_reduce_grads(grad):
    dist.all_reduce(grad)
    return grad


def worker(rank, world, steps):
    backend = "nccl" if DEVICE == "cuda" and torch.cuda.device_count() >= world else "gloo"
    dist.init_process_group(backend, rank=rank, world_size=world)
    if DEVICE == "cuda" and backend == "nccl":
        torch.cuda.set_device(rank)
    staged, weights = keep_weights()
    pageable = load_batches(steps)
    pinned = load_batches(steps, pinned=True)
    total = 0.0
    for i in range(steps):
        total += float(train_step(weights, pageable[i]))
        total += float(train_step(weights, pinned[i]))
        grad = torch.full((256, 1024), float(rank), device=DEVICE if backend == "nccl" else "cpu")
        all_reduce_grads(grad)
    if rank == 0:
        print(f"{DEVICE} {backend} {len(staged)} {total:.3f}")
    dist.destroy_process_group()


def main(steps=20, world=2):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    mp.spawn(worker, args=(world, steps), nprocs=world, join=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)

"""A small CUDA program for the GPU check of instrument_file (DEVELOPERS.md): copies in every
direction (pageable and pinned), matmul kernels, an NCCL all_reduce on one GPU, and a tensor
kept on the CPU and the GPU at once."""
import os
import socket

import torch
import torch.distributed as dist


def copies(x_cpu, x_pinned):
    a = x_cpu.cuda()
    b = x_pinned.to("cuda", non_blocking=True)
    c = a.cpu()
    d = torch.empty_like(a)
    d.copy_(b)
    return a, b, c, d


def kernels(a):
    for _ in range(10):
        a = a @ a.T / a.shape[0]
    return a


def reduce(t):
    dist.all_reduce(t)
    return t


def main():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=0, world_size=1)
    x = torch.randn(4096, 4096)
    xp = x.pin_memory()
    for _ in range(5):
        a, b, c, d = copies(x, xp)
        kernels(a)
        reduce(a)
    keep = x.cuda()
    torch.cuda.synchronize()
    dist.destroy_process_group()
    return keep


if __name__ == "__main__":
    main()

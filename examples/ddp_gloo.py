"""DistributedDataParallel over gloo on the CPU: a 64 -> 128 -> 8 MLP (9,352 float32
parameters: one DDP bucket, so one all-reduce of 37,408 bytes per step), STEPS SGD steps
(default 50). Rank 1 sleeps SLOW_RANK_S (default 0.01) after each step, and computes for
SLOW_RANK_BUSY_S more (default 0: more work than the others, as a rank with a larger share of
the data has), so the other ranks wait for it in every all-reduce: a straggler to find. Run it with
`torchrun --nproc_per_node 2 examples/ddp_gloo.py`.
"""
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
steps = int(os.environ.get("STEPS", "50"))
slow_s = float(os.environ.get("SLOW_RANK_S", "0.01"))
busy_s = float(os.environ.get("SLOW_RANK_BUSY_S", "0"))
started = time.perf_counter()
for step in range(steps):
    x = torch.randn(32, 64)
    y = torch.randn(32, 8)
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    if rank == 1:
        time.sleep(slow_s)
        until = time.perf_counter() + busy_s
        while time.perf_counter() < until:
            pass
per_step_ms = (time.perf_counter() - started) / steps * 1e3
print(f"rank {rank} done: {steps} steps, {per_step_ms:.2f} ms per step")
dist.destroy_process_group()

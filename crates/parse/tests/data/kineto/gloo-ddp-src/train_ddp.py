import os, time, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(int(os.environ.get("STEPS", "50"))):
    x = torch.randn(32, 64); y = torch.randn(32, 8)
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    if rank == 1:
        time.sleep(0.01)
print("rank", rank, "done")
dist.destroy_process_group()

"""Lightning's demo transformer (lightning.pytorch.demos.Transformer) sharded by PyTorch's FSDP2
(`fully_shard` on each encoder layer, then the root) and trained with SGD on two CPU processes
with gloo under torchrun, on random tokens. Rank 0 prints FSDP's own shard sizes (each
parameter group's bytes, sharded and whole, from the parameters FSDP made): the independent
truth for a step's collectives. Per step each rank all-gathers the root's group once and each
layer's twice (forward, and backward after the layer was resharded), and reduces each group's
gradients once. Each rank prints its own step times (one optimizer step's end to the next's). Run it with
`torchrun --standalone --nproc_per_node 2 examples/fsdp_cpu.py`."""
import json, os, sys, time
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from lightning.pytorch.demos import Transformer

dist.init_process_group("gloo")
torch.manual_seed(0)
model = Transformer(vocab_size=1000)
groups = [fully_shard(layer) for layer in model.transformer.encoder.layers] + [fully_shard(model)]
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(dist.get_rank())
# The program's own log of its step times: from one optimizer step's end to the next one's.
step_s, last = [], time.perf_counter()
for step in range(int(os.environ.get("STEPS", "8"))):
    x = torch.randint(0, 1000, (8, 35), generator=g)
    out = model(x, x).clone()
    torch.nn.functional.nll_loss(out, x.view(-1)).backward()
    opt.step()
    opt.zero_grad()
    now = time.perf_counter()
    step_s.append(round(now - last, 6))
    last = now
# One write per line: the ranks share the launcher's stdout.
sys.stdout.write("step times: %s\n" % json.dumps({"rank": dist.get_rank(), "step_s": step_s}))
sys.stdout.flush()
if dist.get_rank() == 0:
    # Each FSDP group's parameters as FSDP holds them: this rank's shard (what an all-gather
    # sends) and the whole (what a gradient reduction carries). The root's group is the model's
    # parameters less the encoder layers' (the decoder stays in it).
    def group(params):
        params = list(params)
        return {"shard_bytes": sum(p.to_local().numel() * p.element_size() for p in params),
                "full_bytes": sum(p.numel() * p.element_size() for p in params)}
    layers = [group(l.parameters()) for l in model.transformer.encoder.layers]
    root = group(p for n, p in model.named_parameters()
                 if not n.startswith("transformer.encoder.layers."))
    sys.stdout.write("fsdp groups: %s\n" % json.dumps({"layers": layers, "root": root,
                                                       "world": dist.get_world_size()}))
    sys.stdout.flush()
dist.destroy_process_group()

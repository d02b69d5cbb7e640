"""Record a torch.profiler trace of Lightning's demo transformer (lightning.pytorch.demos.
LightningTransformer, unchanged; vocabulary 13,578 like word_language_model's) trained for 4
steps by Lightning's Trainer on the CPU, on random tokens (the demo's WikiText2 needs a
download); and torch.profiler's own operator table (key_averages) as the truth.

    python record.py OUT_DIR
"""
import gzip, json, os, shutil, sys
import torch
import lightning as L
from lightning.pytorch.demos import LightningTransformer
from torch.profiler import profile, ProfilerActivity
from torch.utils.data import DataLoader, TensorDataset

out = sys.argv[1]
torch.manual_seed(0)
torch.set_num_threads(1)

class Demo(LightningTransformer):
    def prepare_data(self):
        pass
    def train_dataloader(self):
        g = torch.Generator().manual_seed(0)
        x = torch.randint(0, 13578, (80, 35), generator=g)
        return DataLoader(TensorDataset(x, torch.roll(x, -1, 1)), batch_size=20)

trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=4, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False)
model = Demo(vocab_size=13578)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    trainer.fit(model)
path = os.path.join(out, "trace.json")
prof.export_chrome_trace(path)
with open(path, "rb") as f, gzip.open(os.path.join(out, "lightning-transformer-cpu.json.gz"), "wb", 9) as g:
    shutil.copyfileobj(f, g)
os.remove(path)
rows = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
truth = [{"name": e.key, "calls": e.count, "self_us": e.self_cpu_time_total,
          "total_us": e.cpu_time_total} for e in rows[:10]]
with open(os.path.join(out, "lightning-transformer-cpu.truth.json"), "w") as f:
    json.dump({"torch": torch.__version__, "key_averages_top10_by_self_cpu": truth}, f, indent=1)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8))

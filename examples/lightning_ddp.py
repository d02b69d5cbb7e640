"""Lightning's demo transformer (lightning.pytorch.demos.LightningTransformer, 2 layers, vocabulary
1,000) trained by Lightning's Trainer with strategy="ddp" on two CPU processes under torchrun,
on random tokens (the demo's WikiText2 needs a download). Rank 1 sleeps SLOW_RANK_S (default 0.05)
after each batch. Rank 0 prints DDP's own bucket sizes (its reducer's logging data), the
independent truth for the all-reduces: one per bucket per step. Run it with
`torchrun --standalone --nproc_per_node 2 examples/lightning_ddp.py`."""
import json, os, time
import torch
import lightning as L
from lightning.pytorch.demos import LightningTransformer
from torch.utils.data import DataLoader, TensorDataset

class Demo(LightningTransformer):
    def prepare_data(self):
        pass
    def train_dataloader(self):
        g = torch.Generator().manual_seed(0)
        x = torch.randint(0, 1000, (64, 35), generator=g)
        return DataLoader(TensorDataset(x, torch.roll(x, -1, 1)), batch_size=8)
    def on_train_batch_end(self, outputs, batch, batch_idx):
        if self.global_rank == 1:
            time.sleep(float(os.environ.get("SLOW_RANK_S", "0.05")))

class Report(L.Callback):
    def on_train_end(self, trainer, module):
        if trainer.global_rank == 0:
            data = trainer.strategy.model._get_ddp_logging_data()
            print("ddp buckets:", json.dumps({"bucket_bytes": data.get("rebuilt_bucket_sizes"),
                  "params": sum(p.numel() for p in module.parameters())}))

torch.manual_seed(0)
trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_steps=int(os.environ.get("STEPS", "12")),
                    logger=False, enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False, callbacks=[Report()])
trainer.fit(Demo(vocab_size=1000))

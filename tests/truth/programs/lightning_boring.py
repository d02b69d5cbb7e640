"""PyTorch Lightning's own demo model (`lightning.pytorch.demos.boring_classes.BoringModel`,
from the PyPI package, unchanged) trained on the CPU for a fixed number of steps by its
Trainer."""
import lightning as L
from lightning.pytorch.demos.boring_classes import BoringModel


def main():
    trainer = L.Trainer(
        max_steps=600,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
    )
    trainer.fit(BoringModel())


if __name__ == "__main__":
    main()

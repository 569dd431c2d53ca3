"""Ready-made training recipes, for days whose lesson starts *after* training (evaluation, inspection, export).

The lesson of those days needs a model that was really trained on real data (so that accuracies, confusion
matrices and t-SNE plots mean something) but not the training code itself, which Days 05-12 teach.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import nn

from .data import DataSplits, load_dataset
from .models import build_model
from .training import History, fit


@dataclass
class TrainedClassifier:
    """A trained model (in eval mode, on ``device``), its data and how training went."""

    model: nn.Module
    splits: DataSplits
    history: History
    seconds: float          # wall-clock training time, seconds
    device: torch.device

    def loaders(self, batch_size: int = 256):
        """Unshuffled val and test loaders (dataset order is kept, so index i of a result is sample i)."""
        _, val, test = self.splits.loaders(batch_size)
        return val, test


def train_classifier(model_name: str = "small_cnn", *, dataset: str = "digits", image_size: int = 16,
                     epochs: int = 3, batch_size: int = 64, lr: float = 3e-3, device: torch.device | str = "cpu",
                     seed: int = 0, max_train_samples: int | None = None, verbose: bool = True) -> TrainedClassifier:
    """Train ``model_name`` (see :data:`utils.models.MODELS`) on ``dataset`` with AdamW and a cosine schedule.

    Seeds torch before building the model so the same arguments give the same weights on the same machine.
    Returns the model in eval mode. ``lr`` is per step; ``epochs`` full passes over the (subsampled) train split.
    """
    dev = torch.device(device)
    splits = load_dataset(dataset, image_size=image_size, seed=seed, max_train_samples=max_train_samples)
    torch.manual_seed(seed)
    model = build_model(model_name, num_classes=splits.num_classes, image_size=image_size).to(dev)
    train_loader, val_loader, _ = splits.loaders(batch_size, seed=seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * len(train_loader))
    start = time.perf_counter()
    history = fit(model, train_loader, val_loader, optimizer, dev, epochs, scheduler=scheduler,
                  scheduler_per_step=True, progress=False, verbose=verbose)
    seconds = time.perf_counter() - start
    model.eval()
    return TrainedClassifier(model, splits, history, seconds, dev)

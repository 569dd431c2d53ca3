"""utils.seeding: DataLoader workers draw reproducible, distinct random streams with seed_worker."""
from __future__ import annotations

import random

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from utils.seeding import make_generator, seed_worker


class _RandomAugment(Dataset):
    """Each item draws from NumPy, Python's random and torch, like a random augmentation would."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> torch.Tensor:
        info = torch.utils.data.get_worker_info()
        return torch.tensor([float(np.random.rand()), random.random(), float(torch.rand(())), info.id])


def _draws(seed: int) -> torch.Tensor:
    loader = DataLoader(_RandomAugment(), batch_size=2, num_workers=2, worker_init_fn=seed_worker,
                        generator=make_generator(seed))
    return torch.cat(list(loader))


def test_workers_repeat_their_randomness_across_runs_and_differ_from_each_other():
    first, again, other = _draws(0), _draws(0), _draws(1)
    assert torch.equal(first, again), "same seed, same augmentation randomness"
    assert not torch.equal(first[:, :3], other[:, :3]), "another seed, other randomness"
    by_worker = [first[first[:, 3] == w, :3] for w in (0, 1)]
    assert len(by_worker[0]) == len(by_worker[1]) == 4
    for column, source in enumerate(("NumPy", "random", "torch")):
        assert not torch.equal(by_worker[0][:, column], by_worker[1][:, column]), f"workers share a {source} stream"

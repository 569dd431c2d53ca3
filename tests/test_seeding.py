"""utils.seeding: DataLoader workers draw reproducible, distinct random streams with seed_worker."""
from __future__ import annotations

import random

import numpy as np
import pytest
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


class _PerSampleAugment(Dataset):
    """A random 'augmentation' drawn from the sample's own generator; ``epoch`` is set before each iterator."""

    def __init__(self):
        self.epoch = 0

    def __len__(self) -> int:
        return 12

    def __getitem__(self, i: int) -> torch.Tensor:
        from utils.seeding import sample_generator

        return torch.rand((), generator=sample_generator(7, self.epoch, i))


def _epoch_draws(dataset, epoch: int, workers: int, skip: int = 0) -> list[float]:
    dataset.epoch = epoch
    loader = DataLoader(torch.utils.data.Subset(dataset, range(skip, len(dataset))), batch_size=3,
                        num_workers=workers)
    return torch.cat(list(loader)).tolist()


def test_per_sample_generators_survive_worker_counts_resumes_and_epochs():
    ds = _PerSampleAugment()
    in_process = _epoch_draws(ds, 0, workers=0)
    assert _epoch_draws(ds, 0, workers=2) == in_process, "the same augmentation with or without workers"
    assert _epoch_draws(ds, 0, workers=2, skip=5) == in_process[5:], "a resumed epoch continues the same draws"
    assert _epoch_draws(ds, 1, workers=0) != in_process, "another epoch, other draws"


def test_a_fixed_loader_seed_replays_the_worker_stream_every_epoch():
    """The trap sample_generator avoids: workers seeded from one fixed generator draw the same numbers each epoch."""
    def epoch_draws():
        loader = DataLoader(_RandomAugment(), batch_size=2, num_workers=2, generator=make_generator(0))
        return torch.cat(list(loader))[:, 2]          # torch's stream in each worker

    assert torch.equal(epoch_draws(), epoch_draws())


@pytest.mark.slow    # a fresh interpreter imports torch
def test_seed_everything_turns_determinism_on_and_off_without_importing_the_compiler_when_off():
    import subprocess
    import sys

    from utils.seeding import seed_everything

    seed_everything(0, deterministic=True)
    assert torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.deterministic
    seed_everything(0)
    assert not torch.are_deterministic_algorithms_enabled() and not torch.backends.cudnn.deterministic
    # torch.use_deterministic_algorithms imports torch._inductor at every call (1-2 s of CPU): a notebook's default
    # seeding must not pay that when determinism is already off.
    probe = ("import sys, torch\nfrom utils.seeding import seed_everything\nseed_everything(0)\n"
             "print('torch._inductor' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


def test_seed_everything_takes_numpy_integers_and_refuses_bool():
    from utils.seeding import seed_everything
    seed_everything(np.int64(3))
    a = torch.rand(1)
    seed_everything(3)
    assert torch.equal(a, torch.rand(1))
    with pytest.raises(ValueError, match="non-negative int"):
        seed_everything(True)

"""Seeding and determinism: same seed, same numbers (on the same hardware and software)."""
from __future__ import annotations

import numbers
import os
import random

import numpy as np
import torch


def seed_everything(seed: int = 0, deterministic: bool = False) -> None:
    """Seed Python's ``random``, NumPy and torch (CPU and every CUDA device).

    With ``deterministic=True`` also ask for deterministic kernels: ``torch.use_deterministic_algorithms``
    (ops without a deterministic version then raise instead of silently varying), cuDNN's deterministic mode
    with autotuning off, and ``CUBLAS_WORKSPACE_CONFIG``, which older PyTorch releases needed for deterministic
    cuBLAS matmuls (current ones give each cuBLAS handle and stream its own workspace). That is slower on GPU;
    use it to debug and to test, not for speed runs. With ``deterministic=False`` (the default) it switches both
    back off (``use_deterministic_algorithms(False)``, ``cudnn.deterministic = False``), also when you set them
    yourself; ``cudnn.benchmark`` stays as it is.
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    else:
        # Only when it is on: every call imports torch._inductor (about 1.5 s of CPU, once per process).
        if torch.are_deterministic_algorithms_enabled():
            torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.deterministic = False


def seed_worker(worker_id: int) -> None:
    """``DataLoader(worker_init_fn=seed_worker)``: give each worker's NumPy and ``random`` the seed torch chose for
    it, so augmentations differ between workers but repeat between runs."""
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


def make_generator(seed: int) -> torch.Generator:
    """A CPU ``torch.Generator`` for a DataLoader's shuffling, independent of the global RNG."""
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def sample_generator(seed: int, epoch: int, index: int) -> torch.Generator:
    """A CPU generator for the random augmentation of one sample in one epoch, from ``(seed, epoch, index)`` only.

    DataLoader workers seed their global generators from ``base_seed`` and ``worker_id`` when an iterator starts
    (torch's and Python's with ``base_seed + worker_id``, NumPy's with a state derived from both), so what a worker
    draws depends on which worker got the sample and on how many samples it drew before. A checkpoint of
    the main process's RNG states does not cover it, a fixed loader seed every epoch replays the same stream, and a
    resumed epoch hands the batches to the workers in another order. Drawing each sample's augmentation from its own
    generator makes it independent of all of that: the same in every run, with any number of workers, after a
    resume, and different in every epoch.
    """
    g = torch.Generator()
    g.manual_seed(int(np.random.SeedSequence([seed, epoch, index]).generate_state(1, np.uint64)[0] >> 1))
    return g

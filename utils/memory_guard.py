"""Fit a training run into the device memory that is free, before it starts: a batch size from a measured estimate.

A full-size run with a fixed batch (ResNet50 at 224 px, fp32, batch 64: about 5.1 GiB of activations alone) fails
with ``torch.cuda.OutOfMemoryError`` on a 6 GB card, after minutes of data set-up. :func:`plan_batch_size` decides
first: it measures what one training sample saves for backward (a forward pass at batch 1 on the device itself,
:func:`utils.memory.saved_activation_bytes`), adds the weights, gradients and optimizer state, and returns the largest
batch, halving from the preferred one, whose prediction fits into the memory that is free now
(:func:`free_device_bytes`: ``torch.cuda.mem_get_info`` plus what PyTorch's own cache holds but does not use).
Off CUDA nothing is checked and the preferred batch is kept (Apple's MPS does have a limit, where its allocator
raises an out-of-memory error: ``PYTORCH_MPS_HIGH_WATERMARK_RATIO``, 1.7 by default, times
``torch.mps.recommended_max_memory()``; this plan does not read it).

All sizes are bytes.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from .memory import saved_activation_bytes

__all__ = ["MemoryPlan", "free_device_bytes", "training_bytes_per_sample", "plan_batch_size"]

#: Bytes of the activations saved for backward are not the peak: backward also holds the gradient of the activation
#: it is working on, cuDNN takes a workspace, and the allocator rounds blocks up. This factor covers them.
TRANSIENT_FACTOR = 1.3
#: The share of the free memory a plan may use (other processes and the CUDA context can grow).
USABLE_SHARE = 0.9


@dataclass(frozen=True)
class MemoryPlan:
    """A batch size for the free memory: ``batch_size`` is ``None`` when even ``minimum`` does not fit (it is always
    tried: :func:`plan_batch_size`)."""

    batch_size: int | None
    preferred: int
    free_bytes: int | None          # None off CUDA: nothing was checked
    fixed_bytes: int                # weights, gradients, optimizer state
    per_sample_bytes: int           # saved activations of one sample, times TRANSIENT_FACTOR

    def predicted_bytes(self, batch_size: int) -> int:
        return self.fixed_bytes + batch_size * self.per_sample_bytes

    def accumulation_split(self) -> tuple[int, int] | None:
        """``(micro_batch, steps)`` with ``micro_batch * steps == preferred`` and ``micro_batch`` the largest divisor
        of ``preferred`` not above the planned batch: gradient accumulation over ``steps`` micro-batches keeps the
        effective batch (and so the recipe) of the preferred one. ``None`` when not even the minimum fits."""
        if self.batch_size is None:
            return None
        micro = max(d for d in range(1, self.batch_size + 1) if self.preferred % d == 0)
        return micro, self.preferred // micro

    def explanation(self) -> str:
        gib = 2**30
        if self.free_bytes is None:
            return f"batch {self.preferred}: not on CUDA, so no device memory limit was checked"
        need = self.predicted_bytes(self.preferred) / gib
        head = (f"batch {self.preferred} needs about {need:.1f} GiB (weights, gradients and optimizer state "
                f"{self.fixed_bytes / gib:.2f} GiB + {self.per_sample_bytes / 2**20:.0f} MiB per sample), "
                f"{self.free_bytes / gib:.1f} GiB are free")
        if self.batch_size == self.preferred:
            return head + ": it fits"
        if self.batch_size is None:
            return head + ": not even the smallest batch fits, so the run is skipped"
        return (head + f": batch {self.batch_size} instead (about "
                f"{self.predicted_bytes(self.batch_size) / gib:.1f} GiB); images/s at another batch size are not "
                "comparable with a recording at the preferred one")


def free_device_bytes(device: torch.device | str) -> int | None:
    """Bytes a new allocation on ``device`` can use: the driver's free memory (``torch.cuda.mem_get_info``) plus what
    PyTorch's caching allocator has reserved but not allocated. ``None`` off CUDA."""
    dev = torch.device(device)
    if dev.type != "cuda":
        return None
    free, _total = torch.cuda.mem_get_info(dev)
    return int(free + torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev))


def training_bytes_per_sample(model: nn.Module, sample_shape: tuple[int, ...], device: torch.device | str) -> int:
    """Bytes one sample saves for backward in ``model`` (training mode), measured on ``device`` at batch 1."""
    x = torch.zeros((1, *sample_shape), device=device)
    return saved_activation_bytes(model, x)


def plan_batch_size(model: nn.Module, sample_shape: tuple[int, ...], *, preferred: int, device: torch.device | str,
                    optimizer_states: int = 1, minimum: int = 8, free_bytes: int | None = None) -> MemoryPlan:
    """The largest of ``preferred``, ``preferred // 2``, ... predicted to fit, or ``minimum`` itself where the halving
    steps past it (96, 48, 24, 12, then 8 for a minimum of 8); None when not even ``minimum`` fits.

    ``model`` must already be on ``device`` (it is measured there). ``optimizer_states``: tensors of the parameters'
    size the optimizer keeps (SGD with momentum 1, Adam 2). ``free_bytes`` overrides :func:`free_device_bytes`
    (tests). Off CUDA, with ``free_bytes`` not given, the preferred batch is returned unchecked.
    """
    if preferred < 1 or minimum < 1:
        raise ValueError(f"preferred and minimum must be >= 1, got {preferred} and {minimum}")
    minimum = min(minimum, preferred)        # a preferred batch of 4 is tried, not skipped for being below 8
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    fixed = params * (2 + optimizer_states)                       # weights, gradients, optimizer state
    per_sample = int(training_bytes_per_sample(model, sample_shape, device) * TRANSIENT_FACTOR)
    free = free_bytes if free_bytes is not None else free_device_bytes(device)
    if free is None:
        return MemoryPlan(preferred, preferred, None, fixed, per_sample)
    budget = free * USABLE_SHARE
    unplanned = MemoryPlan(None, preferred, free, fixed, per_sample)
    fits = lambda b: unplanned.predicted_bytes(b) <= budget     # noqa: E731
    batch = preferred
    while batch > minimum and not fits(batch):
        batch = max(batch // 2, minimum)                          # the halving never steps past the minimum
    return replace(unplanned, batch_size=batch if fits(batch) else None)

"""Find the largest batch size that fits: double until it does not, then binary-search the gap.

The search only asks a yes/no question, ``fits(batch_size) -> bool``, so the same algorithm runs everywhere:

- on CUDA, :func:`cuda_fits` runs real training steps and answers False on an out-of-memory error
  (``torch.OutOfMemoryError``, or cuDNN/cuBLAS failing to allocate), after freeing what the failed attempt held;
- on any device, :func:`budget_fits` answers from the memory model (:mod:`utils.memory`) and a stated budget in
  bytes, so CI and laptops run the identical search;
- tests pass a fake ``fits`` with a known answer.
"""
from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from .memory import MemoryBreakdown, make_optimizer, mode_and_buffers_kept
from .precision import make_grad_scaler
from .step import train_step


@dataclass
class BatchSearch:
    """Result of :func:`find_max_batch_size`: the largest batch size that fitted (0 if even the first did not),
    and every probe in the order it was tried, as (batch_size, fitted)."""

    max_batch_size: int
    trials: list[tuple[int, bool]] = field(default_factory=list)
    hit_limit: bool = False  # True when the search stopped at ``limit`` while still fitting

    @property
    def calls(self) -> int:
        return len(self.trials)


def find_max_batch_size(fits: Callable[[int], bool], start: int = 1, limit: int = 1 << 16) -> BatchSearch:
    """Largest ``b`` in ``[start, limit]`` with ``fits(b)`` True, assuming fitting is monotone (if ``b`` fits, every
    smaller batch fits). Doubles from ``start`` until a probe fails or ``limit`` is reached, then binary-searches
    between the last success and the first failure: about ``2 * log2(answer)`` calls of ``fits``."""
    if start < 1 or limit < start:
        raise ValueError(f"need 1 <= start <= limit, got start={start}, limit={limit}")
    trials: list[tuple[int, bool]] = []

    def probe(b: int) -> bool:
        ok = bool(fits(b))
        trials.append((b, ok))
        return ok

    if not probe(start):
        return BatchSearch(0, trials)
    good, bad = start, None
    while bad is None:
        if good >= limit:
            return BatchSearch(good, trials, hit_limit=True)
        nxt = min(good * 2, limit)
        if probe(nxt):
            good = nxt
        else:
            bad = nxt
    while bad - good > 1:          # invariant: good fits, bad does not
        mid = (good + bad) // 2
        if probe(mid):
            good = mid
        else:
            bad = mid
    return BatchSearch(good, trials)


def budget_fits(breakdown: MemoryBreakdown, budget_bytes: int, overhead_fraction: float = 0.0
                ) -> Callable[[int], bool]:
    """A ``fits`` that answers from the memory model: predicted peak at that batch size <= ``budget_bytes``."""
    def fits(batch_size: int) -> bool:
        return breakdown.at_batch(batch_size).peak_bytes(overhead_fraction) <= budget_bytes
    return fits


#: Messages of errors that mean "the device ran out of memory" without being a ``torch.OutOfMemoryError``: cuDNN
#: and cuBLAS report a failed workspace or handle allocation as a plain ``RuntimeError``. cuDNN 9 (current CUDA
#: builds of PyTorch) names it ``..._INTERNAL_ERROR_{DEVICE,HOST}_ALLOCATION_FAILED``; cuDNN 8 said ``ALLOC_FAILED``.
OOM_MARKERS = ("out of memory", "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED",
               "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED", "CUDNN_STATUS_ALLOC_FAILED",
               "CUBLAS_STATUS_ALLOC_FAILED")


def is_out_of_memory(error: BaseException) -> bool:
    """True for ``torch.OutOfMemoryError``, and for a ``RuntimeError`` that reports a failed allocation: cuDNN's and
    cuBLAS's allocation failures, and Apple's MPS, which raises its out-of-memory error that way."""
    if isinstance(error, torch.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and any(m in str(error) for m in OOM_MARKERS)


def free_device_memory(device: torch.device | str) -> None:
    """Drop Python references' garbage and return cached blocks to the driver (CUDA); harmless elsewhere.

    Call it *after* leaving the ``except`` block of an out-of-memory error: inside it, the exception's traceback
    still holds the frames of the failed attempt, and with them its tensors."""
    gc.collect()
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()


def cuda_fits(model: nn.Module, sample_shape: tuple[int, ...], num_classes: int, optimizer: str = "adam",
              steps: int = 2, autocast_dtype: torch.dtype | None = None) -> Callable[[int], bool]:
    """A ``fits`` that runs ``steps`` real training steps (:func:`utils.step.train_step`, the loop's own step) at
    the batch size on the model's device and reports whether they ran. An out-of-memory error
    (:func:`is_out_of_memory`) becomes False, and the memory the failed attempt held is freed before the next trial.
    Other errors propagate. Works on a device with a catchable out-of-memory error: CUDA raises
    ``torch.OutOfMemoryError``, Apple's MPS a ``RuntimeError`` ("MPS backend out of memory") at its allocator's limit;
    on a CPU the operating system may kill the process instead. The steps use a learning rate of 0, and each trial puts back the
    model's modes and buffers (BatchNorm's running statistics): the model is as it was, except that its gradients
    are cleared."""
    device = next(model.parameters()).device

    def attempt(batch_size: int) -> None:
        # Every tensor of the attempt is a local of this frame, so it dies with the frame (or its traceback).
        opt = make_optimizer(optimizer, model.parameters(), lr=0.0)
        scaler = make_grad_scaler(autocast_dtype, device)
        x = torch.randn(batch_size, *sample_shape, device=device)
        y = torch.randint(0, num_classes, (batch_size,), device=device)
        model.train()
        for _ in range(steps):
            train_step(model, x, y, opt, amp_dtype=autocast_dtype, scaler=scaler)

    def fits(batch_size: int) -> bool:
        with mode_and_buffers_kept(model):
            try:
                attempt(batch_size)
                ok = True
            except RuntimeError as error:  # torch.OutOfMemoryError is a RuntimeError too
                if not is_out_of_memory(error):
                    raise
                ok = False
            # Out of the except block: the traceback and the attempt's frame are gone, so their tensors can be freed.
            model.zero_grad(set_to_none=True)
        free_device_memory(device)
        return ok

    return fits


def formula_max_batch_size(total_bytes: int, parameter_bytes: int, per_sample_bytes: float) -> int:
    """The rule of thumb ``(total - parameters) / per_sample``, floored; 0 when nothing fits."""
    if per_sample_bytes <= 0:
        raise ValueError("per_sample_bytes must be > 0")
    return max(0, int((total_bytes - parameter_bytes) // per_sample_bytes))

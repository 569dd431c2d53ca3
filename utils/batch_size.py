"""Find the largest batch size that fits: double until it does not, then binary-search the gap.

The search only asks a yes/no question, ``fits(batch_size) -> bool``, so the same algorithm runs everywhere:

- on CUDA, :func:`cuda_fits` runs real training steps and answers False when ``torch.OutOfMemoryError`` is raised
  (after freeing the memory the failed attempt held);
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

from .memory import MemoryBreakdown, make_optimizer


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


def free_device_memory(device: torch.device | str) -> None:
    """Drop Python references' garbage and return cached blocks to the driver (CUDA); harmless elsewhere."""
    gc.collect()
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()


def cuda_fits(model: nn.Module, sample_shape: tuple[int, ...], num_classes: int, optimizer: str = "adam",
              steps: int = 2, autocast_dtype: torch.dtype | None = None) -> Callable[[int], bool]:
    """A ``fits`` that runs ``steps`` real training steps at the batch size on the model's device and reports
    whether they ran. Out-of-memory (``torch.OutOfMemoryError``) becomes False, after freeing what the failed
    attempt held, so the search can continue. Other errors propagate. Works on any device, but only CUDA raises
    a catchable out-of-memory error; on a CPU the operating system may kill the process instead."""
    device = next(model.parameters()).device

    def fits(batch_size: int) -> bool:
        opt = make_optimizer(optimizer, model.parameters(), lr=0.0)
        x = y = loss = None
        try:
            x = torch.randn(batch_size, *sample_shape, device=device)
            y = torch.randint(0, num_classes, (batch_size,), device=device)
            for _ in range(steps):
                opt.zero_grad(set_to_none=True)
                ctx = (torch.autocast(device.type, dtype=autocast_dtype) if autocast_dtype is not None
                       else torch.autocast(device.type, enabled=False))
                with ctx:
                    loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
            return True
        except torch.OutOfMemoryError:
            return False
        finally:
            # The exception's traceback holds references to the frames' tensors: drop them all before freeing.
            del x, y, loss, opt
            model.zero_grad(set_to_none=True)
            free_device_memory(device)

    return fits


def formula_max_batch_size(total_bytes: int, parameter_bytes: int, per_sample_bytes: float) -> int:
    """The rule of thumb ``(total - parameters) / per_sample``, floored; 0 when nothing fits."""
    if per_sample_bytes <= 0:
        raise ValueError("per_sample_bytes must be > 0")
    return max(0, int((total_bytes - parameter_bytes) // per_sample_bytes))

"""Learning-rate schedules as ``LambdaLR`` factors (Day 15 derives them; later days import them from here)."""
from __future__ import annotations

import math
from typing import Callable


def warmup_cosine(warmup: int, total: int, floor: float = 0.01, decay: bool = True) -> Callable[[int], float]:
    """The factor of linear warm-up then cosine decay, for ``torch.optim.lr_scheduler.LambdaLR`` stepped once per
    optimizer step: ``(t + 1) / warmup`` for the first ``warmup`` steps (so step ``warmup - 1`` is at the peak),
    then a half cosine from 1 down to ``floor`` at step ``total``, and ``floor`` after it. ``decay=False`` keeps 1
    after the warm-up (warm-up + constant). ``LambdaLR`` multiplies the factor by each group's base learning rate.
    """
    if warmup < 0 or total < 1:
        raise ValueError(f"need warmup >= 0 and total >= 1 steps, got warmup={warmup}, total={total}")
    if not 0.0 <= floor <= 1.0:
        raise ValueError(f"floor is a fraction of the peak learning rate in [0, 1], got {floor}")

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if not decay:
            return 1.0
        progress = min(step - warmup, total - warmup) / max(total - warmup, 1)
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

    return factor

"""Learning-rate schedules as ``LambdaLR`` factors (Day 15 derives them; later days import them from here).

Every function returns ``factor(step) -> float`` for ``torch.optim.lr_scheduler.LambdaLR``, stepped once per
optimizer step; ``LambdaLR`` multiplies it by each parameter group's own base rate. All share one linear warm-up,
``(t + 1) / warmup`` for the first ``warmup`` steps (step 0 trains at ``1 / warmup`` of the peak, step
``warmup - 1`` at the peak), then differ in how they decay to ``floor`` (a fraction of the peak) at step ``total``:

* :func:`warmup_cosine`: half a cosine over the whole run after the warm-up (SGDR without restarts);
* :func:`warmup_linear`: a straight line to ``floor`` (0 by default: "linear decay to zero");
* :func:`warmup_stable_decay` (WSD): the peak held for most of the run, then a short cool-down to ``floor`` over the
  last ``decay_steps``; the stable phase does not depend on the run's length, so one run can be branched into
  cool-downs at several lengths.

After ``total`` the factor stays at ``floor`` (never climbs back, unlike a ``CosineAnnealingLR`` stepped past
``T_max``).
"""
from __future__ import annotations

import math
from typing import Callable

__all__ = ["warmup_cosine", "warmup_linear", "warmup_stable_decay", "DECAY_SHAPES"]

# Cool-down shapes: the fraction of the way from the peak to the floor after a fraction p in [0, 1] of the decay.
DECAY_SHAPES: dict[str, Callable[[float], float]] = {
    "cosine": lambda p: 0.5 * (1 - math.cos(math.pi * p)),
    "linear": lambda p: p,
    "1-sqrt": lambda p: math.sqrt(p),          # Hägele et al. 2024: the factor is 1 - sqrt(p) (floor 0)
}


def _check(warmup: int, total: int, floor: float) -> None:
    if warmup < 0 or total < 1 or warmup > total:
        raise ValueError(f"need 0 <= warmup <= total and total >= 1 steps, got warmup={warmup}, total={total}: "
                         "shorten the warm-up or lengthen the run")
    if not 0.0 <= floor <= 1.0:
        raise ValueError(f"floor is a fraction of the peak learning rate in [0, 1], got {floor}")


def _warmup_then(warmup: int, decay_start: float, total: int, floor: float, shape: str) -> Callable[[int], float]:
    if shape not in DECAY_SHAPES:
        raise ValueError(f"shape must be one of {sorted(DECAY_SHAPES)}, got {shape!r}")
    down = DECAY_SHAPES[shape]

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if step < decay_start:
            return 1.0
        if step >= total:                       # also when the warm-up fills the whole run
            return floor
        return 1.0 - (1.0 - floor) * down((step - decay_start) / (total - decay_start))

    return factor


def warmup_cosine(warmup: int, total: int, floor: float = 0.01, decay: bool = True) -> Callable[[int], float]:
    """Linear warm-up over ``warmup`` steps, then a half cosine from 1 down to ``floor`` at step ``total``, and
    ``floor`` after it. ``decay=False`` keeps 1 after the warm-up (warm-up + constant)."""
    _check(warmup, total, floor)
    return _warmup_then(warmup, warmup if decay else math.inf, total, floor, "cosine")


def warmup_linear(warmup: int, total: int, floor: float = 0.0) -> Callable[[int], float]:
    """Linear warm-up over ``warmup`` steps, then a straight line from 1 down to ``floor`` at step ``total`` (0 by
    default: linear decay to zero), and ``floor`` after it."""
    _check(warmup, total, floor)
    return _warmup_then(warmup, warmup, total, floor, "linear")


def warmup_stable_decay(warmup: int, total: int, decay_steps: int, floor: float = 0.0,
                        shape: str = "linear") -> Callable[[int], float]:
    """Warm-up-stable-decay (WSD): linear warm-up over ``warmup`` steps, the peak until step ``total - decay_steps``,
    then a cool-down of ``decay_steps`` steps to ``floor`` at step ``total`` (``shape``: ``"linear"``, ``"cosine"``
    or ``"1-sqrt"``), and ``floor`` after it."""
    _check(warmup, total, floor)
    if not 1 <= decay_steps <= total - warmup:
        raise ValueError(f"decay_steps must be in [1, total - warmup] = [1, {total - warmup}], got {decay_steps}")
    return _warmup_then(warmup, total - decay_steps, total, floor, shape)

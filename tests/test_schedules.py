"""utils.schedules: the warm-up + cosine factor, inside a real LambdaLR."""
from __future__ import annotations

import pytest
import torch

from utils.schedules import warmup_cosine


def _lrs(factor, steps: int, base_lr: float = 0.5) -> list[float]:
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=base_lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return lrs


def test_warmup_then_cosine_to_the_floor():
    lrs = _lrs(warmup_cosine(4, 24, floor=0.1), 30)
    assert lrs[:4] == pytest.approx([0.125, 0.25, 0.375, 0.5]), "linear warm-up reaching the peak at step 3"
    assert lrs[4] == pytest.approx(0.5)
    assert lrs[14] == pytest.approx(0.5 * (0.1 + 0.9 * 0.5)), "half-way through the cosine: the mean of peak and floor"
    assert all(a >= b for a, b in zip(lrs[4:], lrs[5:])), "non-increasing after the warm-up"
    assert lrs[24:] == pytest.approx([0.05] * 6), "the floor from step `total` on"


def test_constant_after_warmup_and_no_warmup():
    assert _lrs(warmup_cosine(2, 10, decay=False), 6, base_lr=1.0) == pytest.approx([0.5, 1, 1, 1, 1, 1])
    assert warmup_cosine(0, 10)(0) == 1.0


@pytest.mark.parametrize("kwargs", [{"warmup": -1, "total": 10}, {"warmup": 0, "total": 0},
                                    {"warmup": 1, "total": 10, "floor": 1.5}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        warmup_cosine(**kwargs)

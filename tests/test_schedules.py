"""utils.schedules: the warm-up + cosine factor, inside a real LambdaLR."""
from __future__ import annotations

import pytest
import torch

from utils.schedules import warmup_cosine, warmup_linear, warmup_stable_decay


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
                                    {"warmup": 1, "total": 10, "floor": 1.5}, {"warmup": 10, "total": 5}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        warmup_cosine(**kwargs)


def test_a_warmup_as_long_as_the_run_ends_at_the_floor_and_a_longer_one_is_refused():
    # A warm-up counted in epochs meets a short run: before, warmup_linear(10, 5) trained at 6x the peak after step 9.
    assert _lrs(warmup_cosine(5, 5), 8, base_lr=1.0) == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0, 0.01, 0.01, 0.01])
    assert warmup_linear(5, 5)(7) == 0.0
    with pytest.raises(ValueError, match="shorten the warm-up"):
        warmup_linear(10, 5)


def test_constant_stays_at_the_peak_past_total():
    assert _lrs(warmup_cosine(2, 6, decay=False), 12, base_lr=1.0)[2:] == pytest.approx([1.0] * 10)


def test_linear_decay_to_zero():
    lrs = _lrs(warmup_linear(2, 10), 13, base_lr=1.0)
    assert lrs[:2] == pytest.approx([0.5, 1.0])
    assert lrs[2:11] == pytest.approx([1 - k / 8 for k in range(9)]), "a straight line from the peak to 0 at `total`"
    assert lrs[11:] == pytest.approx([0.0, 0.0])
    assert _lrs(warmup_linear(0, 4, floor=0.2), 5, base_lr=1.0) == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.2])


def test_warmup_stable_decay_holds_the_peak_then_cools_down():
    lrs = _lrs(warmup_stable_decay(2, 12, decay_steps=4), 14, base_lr=1.0)
    assert lrs[:2] == pytest.approx([0.5, 1.0])
    assert lrs[2:9] == pytest.approx([1.0] * 7), "stable until total - decay_steps"
    assert lrs[8:13] == pytest.approx([1.0, 0.75, 0.5, 0.25, 0.0]), "a linear cool-down over the last 4 steps"
    cos = _lrs(warmup_stable_decay(0, 4, decay_steps=4, floor=0.1, shape="cosine"), 5, base_lr=1.0)
    assert cos[2] == pytest.approx(0.55) and cos[4] == pytest.approx(0.1)
    sqrt = _lrs(warmup_stable_decay(0, 4, decay_steps=4, shape="1-sqrt"), 5, base_lr=1.0)
    assert sqrt[1] == pytest.approx(1 - 0.5) and sqrt[4] == pytest.approx(0.0)


@pytest.mark.parametrize("kwargs", [{"decay_steps": 0}, {"decay_steps": 9}, {"decay_steps": 2, "shape": "step"}])
def test_wsd_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        warmup_stable_decay(2, 10, **kwargs)


def test_the_cosine_factor_matches_pytorchs_sequential_lr():
    warm, total, peak = 3, 20, 0.4
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=peak)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [
        torch.optim.lr_scheduler.LinearLR(opt, start_factor=1 / warm, end_factor=1.0, total_iters=warm - 1),
        torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total - warm, eta_min=peak * 0.01)], milestones=[warm])
    got = []
    for _ in range(total):
        got.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert got == pytest.approx([peak * warmup_cosine(warm, total)(t) for t in range(total)], rel=1e-12, abs=1e-15)

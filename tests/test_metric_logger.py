"""utils.metric_logger: correct smoothed/global statistics, and host reads batched per print."""
from __future__ import annotations

import sys

import pytest
import torch

from utils import metric_logger as ML


def test_smoothed_value_statistics():
    v = ML.SmoothedValue(window=3)
    for x in [1.0, 2.0, 3.0, 10.0]:
        v.update(torch.tensor(x))
    assert v.median == 3.0  # window keeps 2, 3, 10
    assert v.global_avg == pytest.approx(4.0)
    assert v.value == 10.0


def test_weighted_global_average():
    v = ML.SmoothedValue()
    v.update(1.0, n=3)
    v.update(torch.tensor(3.0), n=1)
    assert v.global_avg == pytest.approx(1.5)


def test_updates_do_not_read_the_device_until_printed(monkeypatch):
    reads = {"n": 0}
    real_tolist, real_item = torch.Tensor.tolist, torch.Tensor.item

    def count(fn):
        def wrapped(self, *a, **k):
            if sys._getframe(1).f_code.co_filename == ML.__file__:
                reads["n"] += 1
            return fn(self, *a, **k)
        return wrapped

    monkeypatch.setattr(torch.Tensor, "tolist", count(real_tolist))
    monkeypatch.setattr(torch.Tensor, "item", count(real_item))
    logger = ML.MetricLogger(printer=lambda s: None)
    for _ in logger.log_every(range(20), print_freq=10, header="train"):
        logger.update(loss=torch.tensor(0.5))
    # 20 updates, two prints: one batched read per print
    assert reads["n"] == 2
    assert len(logger.lines) == 3 and "loss: 0.5000" in logger.lines[0]


def test_log_every_validates():
    with pytest.raises(ValueError):
        list(ML.MetricLogger().log_every([1], 0))


def test_update_refuses_a_vector_and_says_how_to_reduce_it():
    # accepted before, it failed only at print time with torch's "shape '[]' is invalid for input of size 3"
    with pytest.raises(ValueError, match=r"shape \(3,\).*loss.mean\(\)"):
        ML.MetricLogger(printer=lambda line: None).update(loss=torch.ones(3))

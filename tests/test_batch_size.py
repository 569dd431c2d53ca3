"""Unit tests of utils.batch_size: the search against fake ``fits`` functions and the memory model."""
from __future__ import annotations

import math

import pytest
import torch

from utils.batch_size import budget_fits, cuda_fits, find_max_batch_size, formula_max_batch_size
from utils.memory import MemoryBreakdown


@pytest.mark.parametrize("answer", [1, 2, 3, 7, 8, 9, 100, 1000, 4095, 4096])
def test_search_finds_exact_answer(answer):
    result = find_max_batch_size(lambda b: b <= answer)
    assert result.max_batch_size == answer
    assert result.calls <= 2 * math.ceil(math.log2(answer + 1)) + 2
    fitted = [b for b, ok in result.trials if ok]
    assert max(fitted) == answer


def test_search_nothing_fits_and_limit():
    assert find_max_batch_size(lambda b: False).max_batch_size == 0
    r = find_max_batch_size(lambda b: True, limit=50)
    assert r.max_batch_size == 50 and r.hit_limit
    assert find_max_batch_size(lambda b: b <= 37, start=5).max_batch_size == 37
    with pytest.raises(ValueError):
        find_max_batch_size(lambda b: True, start=0)


def test_search_against_memory_model_budget():
    b = MemoryBreakdown(parameters=1000, gradients=1000, optimizer_state=2000, activations=500, batch_size=5)
    fits = budget_fits(b, budget_bytes=4000 + 100 * 37 + 50)
    assert find_max_batch_size(fits).max_batch_size == 37


def test_formula():
    assert formula_max_batch_size(1000, 100, 9) == 100
    assert formula_max_batch_size(100, 200, 9) == 0


def test_cuda_fits_runs_on_cpu_and_catches_oom(monkeypatch):
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
    fits = cuda_fits(model, (3, 2, 2), num_classes=3, optimizer="sgd", steps=1)
    assert fits(4) is True
    real_forward = model.forward

    def oom_above_8(x):
        if x.shape[0] > 8:
            raise torch.OutOfMemoryError("fake OOM")
        return real_forward(x)

    monkeypatch.setattr(model, "forward", oom_above_8)
    assert fits(16) is False
    assert find_max_batch_size(fits).max_batch_size == 8

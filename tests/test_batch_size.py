"""Unit tests of utils.batch_size: the search against fake ``fits`` functions and the memory model."""
from __future__ import annotations

import math
import sys
import weakref

import pytest
import torch

from utils import batch_size as BS
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


@pytest.mark.slow
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


@pytest.mark.parametrize("error", [
    torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"),
    RuntimeError("cuDNN error: CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED"),
    RuntimeError("cuDNN error: CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED"),
    RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"),
])
def test_cuda_fits_treats_allocation_failures_as_oom_and_frees_outside_except(monkeypatch, error):
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
    real_forward = model.forward
    held = []

    def fail_above_8(x):
        if x.shape[0] > 8:
            held.append(weakref.ref(x))
            raise type(error)(*error.args)  # a fresh exception, referenced only by the search's except block
        return real_forward(x)

    frees = []

    def spy_free(device):
        # By now the except block is left and the failed attempt's batch is unreachable.
        frees.append((sys.exc_info()[0], all(r() is None for r in held)))

    monkeypatch.setattr(model, "forward", fail_above_8)
    monkeypatch.setattr(BS, "free_device_memory", spy_free)
    fits = cuda_fits(model, (3, 2, 2), num_classes=3, optimizer="sgd", steps=1)
    assert fits(16) is False
    assert frees == [(None, True)]
    assert find_max_batch_size(fits).max_batch_size == 8


def test_cuda_fits_lets_other_errors_through(monkeypatch):
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))

    def broken(x):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    monkeypatch.setattr(model, "forward", broken)
    with pytest.raises(RuntimeError, match="shapes"):
        cuda_fits(model, (3, 2, 2), num_classes=3, optimizer="sgd", steps=1)(4)


def test_cuda_fits_enters_no_autocast_context_without_amp(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("no autocast context (not even a disabled one) without AMP")

    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
    monkeypatch.setattr(torch, "autocast", forbidden)
    assert cuda_fits(model, (3, 2, 2), num_classes=3, optimizer="sgd", steps=1)(4) is True
    monkeypatch.undo()
    assert cuda_fits(model, (3, 2, 2), 3, "adam", steps=1, autocast_dtype=torch.bfloat16)(4) is True


def test_a_fits_trial_leaves_the_model_as_it_was():
    # Weights (learning rate 0), BatchNorm statistics and the train/eval mode: the trial only measures.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.BatchNorm2d(4), torch.nn.Flatten(),
                                torch.nn.Linear(16, 3)).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert cuda_fits(model, (3, 2, 2), num_classes=3, optimizer="adam", steps=2)(4) is True
    assert not model.training
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), f"{k} changed by a fits trial"

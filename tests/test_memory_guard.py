"""utils.memory_guard: a batch size planned from the free device memory (a small card simulated on the CPU)."""
from __future__ import annotations

import pytest
import torch

from utils import resnet50
from utils.memory_guard import MemoryPlan, free_device_bytes, plan_batch_size

GiB = 2**30


@pytest.fixture(scope="module")
def resnet50_plan_inputs():
    torch.manual_seed(0)
    return resnet50(num_classes=10)


@pytest.mark.slow          # a real ResNet50 forward at 224 px on the CPU: seconds
def test_resnet50_at_224px_batch_64_does_not_fit_a_6_gb_card_and_a_smaller_batch_does(resnet50_plan_inputs):
    # A 6 GB card with the CUDA context and a desktop on it: about 5.5 GiB free. Measured on the CPU: the saved
    # activations per image do not depend on the device.
    small = plan_batch_size(resnet50_plan_inputs, (3, 224, 224), preferred=64, device="cpu", free_bytes=int(5.5 * GiB))
    assert small.predicted_bytes(64) > 5.5 * GiB, "batch 64 in fp32 needs more than a 6 GB card has"
    assert small.batch_size == 32 and small.predicted_bytes(32) < 0.9 * 5.5 * GiB
    assert "batch 32 instead" in small.explanation()
    big = plan_batch_size(resnet50_plan_inputs, (3, 224, 224), preferred=64, device="cpu", free_bytes=75 * GiB)
    assert big.batch_size == 64 and big.explanation().endswith("it fits")
    tiny = plan_batch_size(resnet50_plan_inputs, (3, 224, 224), preferred=64, device="cpu", free_bytes=1 * GiB)
    assert tiny.batch_size is None and "skipped" in tiny.explanation()


def test_off_cuda_nothing_is_checked():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())
    plan = plan_batch_size(model, (3, 8, 8), preferred=64, device="cpu")
    assert plan == MemoryPlan(64, 64, None, plan.fixed_bytes, plan.per_sample_bytes)
    assert plan.fixed_bytes == 3 * sum(p.numel() * 4 for p in model.parameters())
    assert free_device_bytes("cpu") is None


def test_free_bytes_count_the_allocators_unused_cache(monkeypatch):
    # A simulated card: the driver reports 2 GiB free; PyTorch has 3 GiB reserved of which 1 GiB is in use.
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (2 * GiB, 6 * GiB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 3 * GiB)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 1 * GiB)
    assert free_device_bytes("cuda:0") == 4 * GiB


def test_halves_down_to_the_minimum():
    model = torch.nn.Linear(10, 10)
    plan = plan_batch_size(model, (10,), preferred=64, device="cpu", free_bytes=10**9, minimum=8)
    assert plan.batch_size == 64
    per = plan.per_sample_bytes
    budget = int((plan.fixed_bytes + 20 * per) / 0.9) + 1             # room for 20 samples: 16 is the answer
    assert plan_batch_size(model, (10,), preferred=64, device="cpu", free_bytes=budget).batch_size == 16
    with pytest.raises(ValueError):
        plan_batch_size(model, (10,), preferred=0, device="cpu")

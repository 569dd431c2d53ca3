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


@pytest.mark.parametrize("preferred,planned,expected", [
    (128, 128, (128, 1)),       # it fits: no accumulation
    (128, 32, (32, 4)),         # a power of two halves exactly
    (100, 12, (10, 10)),        # halving gives 12, which does not divide 100: 12 x 8 would train on 96 images
    (97, 48, (1, 97)),          # a prime preferred batch: only batch 1 keeps it exact
])
def test_accumulation_split_keeps_the_effective_batch(preferred, planned, expected):
    plan = MemoryPlan(planned, preferred, 8 * GiB, 0, 1)
    micro, steps = plan.accumulation_split()
    assert (micro, steps) == expected and micro * steps == preferred and micro <= planned


def test_accumulation_split_on_a_simulated_small_card():
    # What Day 32 does on CUDA, run on the CPU with the free memory given: ResNet-like conv net, a card with room
    # for about 20 samples at the preferred 64. The split must keep 64 images per optimizer step.
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(16 * 16 * 16, 10))
    probe = plan_batch_size(model, (3, 16, 16), preferred=64, device="cpu", free_bytes=10**12,
                           optimizer_states=2)
    budget = int((probe.fixed_bytes + 20 * probe.per_sample_bytes) / 0.9) + 1
    plan = plan_batch_size(model, (3, 16, 16), preferred=64, device="cpu", free_bytes=budget, optimizer_states=2)
    assert plan.batch_size == 16 and plan.accumulation_split() == (16, 4)
    assert MemoryPlan(None, 64, 1, 0, 1).accumulation_split() is None


def test_a_preferred_batch_below_the_minimum_is_tried_not_skipped():
    # A learner's batch of 4 with memory to spare: the plan is 4, not "not even the smallest batch fits".
    model = torch.nn.Linear(10, 10)
    assert plan_batch_size(model, (10,), preferred=4, device="cpu", free_bytes=10**9).batch_size == 4
    assert plan_batch_size(model, (10,), preferred=4, device="cpu", free_bytes=1).batch_size is None


def test_the_minimum_is_tried_when_the_halving_steps_past_it():
    # 96, 48, 24, 12, then 8 (not 6): room for 10 samples plans 8, and 8 divides 96 (12 accumulation steps).
    model = torch.nn.Linear(10, 10)
    probe = plan_batch_size(model, (10,), preferred=96, device="cpu", free_bytes=10**9, minimum=8)
    room = int((probe.fixed_bytes + 10 * probe.per_sample_bytes) / 0.9) + 1      # USABLE_SHARE of the free bytes
    plan = plan_batch_size(model, (10,), preferred=96, device="cpu", free_bytes=room, minimum=8)
    assert plan.batch_size == 8 and plan.accumulation_split() == (8, 12)
    tight = int((probe.fixed_bytes + 7 * probe.per_sample_bytes) / 0.9)
    assert plan_batch_size(model, (10,), preferred=96, device="cpu", free_bytes=tight, minimum=8).batch_size is None

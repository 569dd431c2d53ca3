"""Unit tests of utils.memory: byte counts that can be checked by hand, and the activation model's prediction."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from utils.memory import (OPTIMIZER_STATE_SLOTS, MemoryBreakdown, SavedTensorLog, fit_activations, format_bytes,
                          gradient_bytes, measure_breakdown, measured_optimizer_state_bytes, parameter_bytes,
                          predicted_optimizer_state_bytes, saved_activation_bytes, unique_storage_bytes)
from utils.models import small_cnn


def _mlp() -> nn.Module:
    # 10*20 + 20 + 20*5 + 5 = 325 parameters = 1300 bytes in fp32
    return nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))


def test_unique_storage_bytes_counts_views_once():
    t = torch.zeros(100)                      # 400 bytes
    assert unique_storage_bytes([t, t[10:20], t.view(10, 10)]) == 400
    assert unique_storage_bytes([t[:5]]) == 400, "a slice keeps the whole storage alive"
    assert unique_storage_bytes([t, torch.zeros(10, dtype=torch.float64)]) == 480


def test_parameter_and_gradient_bytes():
    m = _mlp()
    assert parameter_bytes(m) == 1300
    assert gradient_bytes(m) == 1300
    m[0].weight.requires_grad_(False)
    assert gradient_bytes(m) == 1300 - 800
    assert parameter_bytes(m, trainable_only=True) == 500


@pytest.mark.slow
def test_optimizer_state_measured_matches_slots():
    m = _mlp()
    for name, slots in OPTIMIZER_STATE_SLOTS.items():
        measured = measured_optimizer_state_bytes(m, name)
        assert predicted_optimizer_state_bytes(m, name) == slots * 1300
        # Adam keeps a 4-byte step counter per parameter tensor (4 tensors here) besides its two moments.
        assert slots * 1300 <= measured <= slots * 1300 + 4 * 8, (name, measured)
    before = [p.detach().clone() for p in m.parameters()]
    measured_optimizer_state_bytes(m, "adamw")
    assert all(torch.equal(a, b) for a, b in zip(before, m.parameters())), "measuring must not change the model"


def test_saved_tensors_deduplicated_and_parameters_excluded():
    m = _mlp()
    x = torch.randn(8, 10)
    with SavedTensorLog(exclude=m.parameters()) as log:
        out = m(x)
    # Saved: x (320 B) by Linear 1; ReLU output (640 B), saved by ReLU and by Linear 2 (one storage).
    assert log.bytes == 320 + 640
    assert log.raw_bytes > log.bytes, "the shared ReLU output was seen twice"
    out.sum().backward()                      # the hooks pass tensors through unchanged
    want = torch.autograd.grad(m(x).sum(), m[0].weight)[0]
    assert torch.equal(m[0].weight.grad, want)


def test_alive_bytes_finds_a_kept_graph():
    m = _mlp()
    x = torch.randn(8, 10)
    with SavedTensorLog(exclude=[*m.parameters(), x]) as log:
        kept = m(x).sum()                     # a loss kept with its graph: the ReLU output stays saved
        m(x).sum().item()                     # a value read and dropped: its graph and saved tensors go
    assert log.bytes == 2 * 640
    assert log.alive_bytes() == 640, "a forward without backward must not leak what it saved"
    del kept
    assert log.alive_bytes() == 0


def test_saved_activation_prediction_within_10_percent():
    torch.manual_seed(0)
    model = small_cnn()
    fit = fit_activations(model, (3, 32, 32), batch_sizes=(2, 4))
    measured = saved_activation_bytes(model, torch.randn(24, 3, 32, 32))
    assert abs(fit.predict(24) - measured) <= 0.10 * measured
    assert fit.per_sample > 0


def test_breakdown_scaling_and_peak():
    b = MemoryBreakdown(parameters=100, gradients=100, optimizer_state=200, activations=1000, batch_size=10,
                        activation_fixed=100)
    assert b.activation_per_sample == 90
    b20 = b.at_batch(20)
    assert b20.activations == 100 + 90 * 20 and b20.parameters == 100
    assert b20.peak_bytes() == 100 + 100 + 200 + 1900
    assert b20.peak_bytes(0.1) == round(2300 * 1.1)
    assert abs(sum(b.fractions().values()) - 1) < 1e-9


def test_measure_breakdown_small_cnn():
    model = small_cnn()
    b = measure_breakdown(model, (3, 16, 16), batch_size=8, optimizer="sgd_momentum")
    assert b.parameters == b.gradients == parameter_bytes(model)
    assert b.optimizer_state == b.parameters
    assert b.activations == saved_activation_bytes(model, torch.randn(8, 3, 16, 16)) or \
        abs(b.activations - saved_activation_bytes(model, torch.randn(8, 3, 16, 16))) < 0.1 * b.activations


def test_format_bytes():
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.50 KiB"
    assert format_bytes(3 * 2**30) == "3.00 GiB"


def test_measuring_saved_activations_leaves_the_models_batchnorm_statistics_and_mode_alone():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert saved_activation_bytes(model, torch.randn(8, 3, 10, 10) * 5 + 3) > 0
    assert not model.training
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), f"{k} changed: the measurement must not train the model's statistics"


def test_measuring_saved_activations_keeps_a_frozen_batchnorm_frozen():
    # Fine-tuning: a training model whose BatchNorm is frozen in eval mode must come back exactly so.
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).train()
    model[1].eval()
    assert saved_activation_bytes(model, torch.randn(4, 3, 10, 10)) > 0
    assert model.training and model[0].training and not model[1].training


@pytest.mark.parametrize("batch_size", [0, -4])
def test_measure_breakdown_refuses_a_batch_size_below_one(batch_size):
    # 0 divided by zero later, -4 returned negative activation bytes
    from utils.memory import measure_breakdown
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        measure_breakdown(small_cnn(10, width=8), (3, 8, 8), batch_size)

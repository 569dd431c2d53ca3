"""Tests of utils.stability: the non-finite loss guard."""
import math

import pytest
import torch
from torch import nn

from utils.stability import NonFiniteError, check_finite, nonfinite_buffers, nonfinite_parameters


def test_finite_loss_passes_and_returns_its_value():
    assert check_finite(torch.tensor(1.5), step=3) == pytest.approx(1.5)
    assert check_finite(0.25, step=0) == pytest.approx(0.25)
    assert check_finite(torch.tensor([1.0, 3.0]), step=1) == pytest.approx(2.0)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nonfinite_loss_raises_naming_the_step(bad):
    with pytest.raises(NonFiniteError, match="at step 17") as info:
        check_finite(torch.tensor(bad), step=17, context="train loss")
    assert isinstance(info.value, FloatingPointError)
    assert info.value.step == 17
    assert math.isnan(info.value.value) if math.isnan(bad) else info.value.value == bad
    assert "train loss" in str(info.value)


def test_a_float64_loss_keeps_its_range():
    # 1e39 is finite in float64; read in float32 it would be inf and stop a healthy run.
    assert check_finite(torch.tensor(1e39, dtype=torch.float64), step=0) == pytest.approx(1e39)
    with pytest.raises(NonFiniteError):
        check_finite(torch.tensor([1.0, float("inf")], dtype=torch.float64), step=0)


def test_one_bad_element_is_enough():
    with pytest.raises(NonFiniteError):
        check_finite(torch.tensor([1.0, float("nan"), 2.0]), step=0)


def test_every_skips_steps_without_reading_the_loss():
    assert check_finite(torch.tensor(float("nan")), step=5, every=10) is None
    with pytest.raises(NonFiniteError):
        check_finite(torch.tensor(float("nan")), step=10, every=10)
    with pytest.raises(ValueError):
        check_finite(1.0, step=0, every=0)


def test_the_message_names_parameters_with_nonfinite_gradients():
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1))
    model(torch.randn(4, 3)).sum().backward()
    assert nonfinite_parameters(model) == []
    model[2].weight.grad[0, 0] = float("inf")
    assert nonfinite_parameters(model) == ["2.weight (grad)"]
    with torch.no_grad():
        model[0].bias[1] = float("nan")
    assert nonfinite_parameters(model) == ["0.bias (value)", "2.weight (grad)"]
    assert nonfinite_parameters(model, grads=False) == ["0.bias (value)"]
    with pytest.raises(NonFiniteError, match=r"2\.weight \(grad\)") as info:
        check_finite(torch.tensor(float("nan"), requires_grad=True), step=2, model=model)
    assert info.value.bad_parameters == ["0.bias (value)", "2.weight (grad)"]


def test_parameters_without_gradients_are_skipped():
    model = nn.Linear(2, 2)
    assert model.weight.grad is None
    assert nonfinite_parameters(model) == []


def _bn_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 5 * 5, 2))


def test_a_nan_input_in_train_mode_poisons_batchnorm_buffers_and_the_guard_names_them():
    torch.manual_seed(0)
    model = _bn_model().train()
    x = torch.randn(3, 3, 5, 5)
    x[0, 0, 0, 0] = float("nan")
    loss = nn.functional.cross_entropy(model(x), torch.tensor([0, 1, 0]))
    assert nonfinite_parameters(model, grads=False) == [], "no optimizer step yet: the parameters are finite"
    assert nonfinite_buffers(model) == ["1.running_mean", "1.running_var"]
    with pytest.raises(NonFiniteError, match=r"non-finite buffers: 1\.running_mean, 1\.running_var") as info:
        check_finite(loss, step=4, model=model)
    assert info.value.bad_buffers == ["1.running_mean", "1.running_var"]
    assert "restore the last good checkpoint" in str(info.value)


def test_eval_mode_leaves_buffers_finite_and_integer_buffers_are_skipped():
    model = _bn_model().eval()
    x = torch.randn(2, 3, 5, 5)
    x[1, 2, 3, 4] = float("inf")
    model(x)
    assert nonfinite_buffers(model) == [], "eval mode reads the running statistics, it does not update them"
    model.train()
    model(torch.randn(2, 3, 5, 5))
    assert model[1].num_batches_tracked.item() == 1 and nonfinite_buffers(model) == []
    with torch.no_grad():
        model[1].running_var[2] = float("inf")
    assert nonfinite_buffers(model) == ["1.running_var"]


def test_check_finite_reads_a_tensor_back_once_and_a_float_never():
    from utils.host_syncs import count_host_syncs

    with count_host_syncs() as syncs:
        check_finite(torch.tensor([1.0, 3.0]), step=0)
    assert syncs["n"] == 1, syncs          # the flag and the value in one read, not one read each
    with count_host_syncs() as syncs:
        check_finite(2.0, step=0)
    assert syncs["n"] == 0, syncs

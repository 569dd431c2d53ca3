"""utils.step and utils.precision: the one training step (against a hand-written one), loss scaling with clipping,
and the precision choice on GPUs simulated with monkeypatch."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from utils import precision as P
from utils.step import optimizer_step, train_step


def _twins(seed: int = 0):
    torch.manual_seed(seed)
    first = nn.Linear(5, 3)
    second = nn.Linear(5, 3)
    second.load_state_dict(first.state_dict())
    return [(m, torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)) for m in (first, second)]


def _batch(n: int = 8, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 5, generator=g), torch.randint(0, 3, (n,), generator=g)


def test_train_step_is_the_textbook_step():
    (ref, opt_ref), (model, opt) = _twins()
    for p in list(ref.parameters()) + list(model.parameters()):
        p.grad = torch.full_like(p, 5.0)  # stale gradients that must not leak into the step
    x, y = _batch()
    for _ in range(2):
        opt_ref.zero_grad(set_to_none=True)
        want = nn.functional.cross_entropy(ref(x), y)
        want.backward()
        opt_ref.step()
        got = train_step(model, x, y, opt)
    assert got.stepped and got.grad_norm is None and not got.loss.requires_grad
    assert torch.allclose(got.loss, want.detach()) and got.outputs.shape == (8, 3)
    for a, b in zip(ref.parameters(), model.parameters()):
        assert torch.equal(a, b)


def test_no_autocast_context_without_amp(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("a disabled autocast context costs time on the CPU: do not enter one without AMP")

    monkeypatch.setattr(torch, "autocast", forbidden)
    (model, opt), _ = _twins()
    x, y = _batch()
    assert train_step(model, x, y, opt).outputs.dtype == torch.float32
    monkeypatch.undo()
    assert train_step(model, x, y, opt, amp_dtype=torch.bfloat16).outputs.dtype == torch.bfloat16


def test_zero_grad_placement_and_accumulation_flags():
    (model, opt), _ = _twins()
    x, y = _batch()
    seen = []
    model.register_forward_pre_hook(lambda m, inp: seen.append(m.weight.grad is not None))
    train_step(model, x, y, opt, step=False)
    first = model.weight.grad.clone()
    train_step(model, x, y, opt, zero_grad=False, step=False)
    assert torch.allclose(model.weight.grad, 2 * first), "zero_grad=False accumulates into .grad"
    train_step(model, x, y, opt, loss_divisor=4, step=False)
    assert torch.allclose(model.weight.grad, first / 4), "zero_grad=True clears .grad; loss_divisor divides the loss"
    # Gradients are freed before the forward pass (zero_grad=True), and kept inside an accumulation group.
    assert seen == [False, True, False]
    with pytest.raises(ValueError, match="loss_divisor"):
        train_step(model, x, y, opt, loss_divisor=0)


def test_old_gradients_are_freed_before_the_forward_lowers_the_peak():
    """The placement's point, measured: with the old gradients freed before the forward, the step's peak of live
    tensor bytes is lower than with zero_grad between forward and backward (the placement train_step used to have)."""
    from utils.memory_timeline import LiveTensorBytes

    torch.manual_seed(0)
    # Most parameters late (as in ResNet50's last stage) would hide part of the saving; a wide first layer shows it.
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 3))
    x, y = torch.randn(64, 256), torch.randint(0, 3, (64,))

    def peak(step_fn) -> int:
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        step_fn(opt)                                       # step 1 leaves gradients behind, as in a loop
        with LiveTensorBytes() as live:
            live.track(model.parameters())
            live.track(p.grad for p in model.parameters())
            live.track([x, y])
            step_fn(opt)
        return live.peak.live_bytes

    def zero_between(opt):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    grad_bytes = sum(p.numel() * 4 for p in model.parameters())
    ours, between = peak(lambda opt: train_step(model, x, y, opt)), peak(zero_between)
    assert between - ours >= 0.9 * min(grad_bytes, 64 * 512 * 4), (ours, between, grad_bytes)


def test_scaler_unscales_before_clipping():
    (ref, opt_ref), (model, opt) = _twins()
    x, y = _batch()
    nn.functional.cross_entropy(ref(x), y).backward()
    want_norm = torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.05)
    opt_ref.step()
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    got = train_step(model, x, y, opt, scaler=scaler, max_grad_norm=0.05)
    assert float(got.grad_norm) == pytest.approx(float(want_norm), rel=1e-6), "the norm of the unscaled gradients"
    for a, b in zip(ref.parameters(), model.parameters()):
        assert torch.allclose(a, b, atol=1e-7)
    assert scaler.get_scale() == 1024.0


def test_an_inf_gradient_skips_the_step_and_halves_the_scale():
    (model, opt), _ = _twins()
    before = [p.detach().clone() for p in model.parameters()]
    model.weight.register_hook(lambda g: torch.full_like(g, math.inf))  # an fp16-style overflow
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, backoff_factor=0.5)
    x, y = _batch()
    got = train_step(model, x, y, opt, scaler=scaler, max_grad_norm=1.0)
    assert not math.isfinite(float(got.grad_norm))
    assert all(torch.equal(b, p) for b, p in zip(before, model.parameters())), "the step must be skipped"
    assert scaler.get_scale() == 512.0


def test_optimizer_step_rescales_gradients():
    (ref, opt_ref), (model, opt) = _twins()
    x, y = _batch()
    nn.functional.cross_entropy(ref(x), y).backward()
    opt_ref.step()
    (nn.functional.cross_entropy(model(x), y) / 4).backward()
    optimizer_step(model, opt, grad_multiplier=4.0)
    for a, b in zip(ref.parameters(), model.parameters()):
        assert torch.allclose(a, b, atol=1e-7)


def _fake_gpu(monkeypatch, capability):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)  # emulation says yes
    monkeypatch.setattr(torch.version, "hip", None)


def test_t4_gets_fp16_with_a_scaler(monkeypatch):
    _fake_gpu(monkeypatch, (7, 5))
    dtype = P.resolve_amp("auto", "cuda")
    assert dtype == torch.float16 and not P.has_native_bf16("cuda")
    assert isinstance(P.make_grad_scaler(dtype, "cuda"), torch.amp.GradScaler)


@pytest.mark.parametrize("capability", [(8, 0), (9, 0)])
def test_ampere_and_newer_get_bf16_without_a_scaler(monkeypatch, capability):
    _fake_gpu(monkeypatch, capability)
    dtype = P.resolve_amp(True, "cuda:0")
    assert dtype == torch.bfloat16 and P.make_grad_scaler(dtype, "cuda") is None


def test_precision_choices_off_the_gpu():
    assert P.resolve_amp("auto", "cpu") == torch.bfloat16
    assert P.resolve_amp("auto", "mps") == torch.float16
    assert P.resolve_amp("off", "cuda") is None
    with pytest.raises(ValueError, match="bf16"):
        P.resolve_amp("fp16", "cpu")

"""Numerical stability guards: stop training at the first non-finite loss, with a message that names the step.

Without a ``GradScaler`` a ``nan`` or ``inf`` loss never recovers (with one, a step whose gradients are
non-finite is skipped): one non-finite gradient makes every weight it touches non-finite after
``optimizer.step()``, and a loop that keeps going only burns compute. :func:`check_finite` turns the first one into
a :class:`NonFiniteError` (a ``FloatingPointError``) that says at which step it happened, what the value was, and,
when given the model, which parameters already hold non-finite gradients or values and which buffers hold
non-finite values.

Buffers matter because the forward pass writes them: in training mode a ``nan`` input reaches BatchNorm's
``running_mean`` and ``running_var`` before any loss exists, so when the loss guard fires the parameters can still
be finite while the running statistics are already ``nan`` (and an eval-mode model built from them predicts ``nan``
for every input). A model in that state must not be saved as a checkpoint: restore the last good one.

Cost: given a tensor, the check reads it on the host once (the finiteness flag and the value together): one device
synchronisation per call on a GPU. Given a float the caller has already read, it reads nothing. Call it every step
while debugging, or every ``N`` steps (see ``every``) in production.
"""
from __future__ import annotations

import math
from typing import Iterable

import torch
from torch import nn

__all__ = ["NonFiniteError", "nonfinite_parameters", "nonfinite_buffers", "check_finite"]


class NonFiniteError(FloatingPointError):
    """Raised by :func:`check_finite`. ``step`` is the training step (as counted by the caller), ``value`` the
    offending loss as a float, ``bad_parameters`` the names of parameters with non-finite gradients or values,
    ``bad_buffers`` the names of floating-point buffers (e.g. BatchNorm running statistics) with non-finite values."""

    def __init__(self, message: str, *, step: int, value: float, bad_parameters: Iterable[str] = (),
                 bad_buffers: Iterable[str] = ()):
        super().__init__(message)
        self.step = step
        self.value = value
        self.bad_parameters = list(bad_parameters)
        self.bad_buffers = list(bad_buffers)


def nonfinite_parameters(model: nn.Module, *, grads: bool = True, values: bool = True) -> list[str]:
    """Names of ``model``'s parameters whose gradient (``grads``) or value (``values``) contains nan or inf.

    Parameters without a gradient are skipped for the gradient check. Returns ``[]`` when everything is finite.
    """
    bad: list[str] = []
    with torch.no_grad():
        for name, param in model.named_parameters():
            if values and not bool(torch.isfinite(param).all()):
                bad.append(f"{name} (value)")
            elif grads and param.grad is not None and not bool(torch.isfinite(param.grad).all()):
                bad.append(f"{name} (grad)")
    return bad


def nonfinite_buffers(model: nn.Module) -> list[str]:
    """Names of ``model``'s floating-point buffers (BatchNorm's ``running_mean``/``running_var``, ...) that contain
    nan or inf. Integer buffers such as ``num_batches_tracked`` cannot hold either and are skipped. Returns ``[]``
    when everything is finite."""
    with torch.no_grad():
        return [name for name, buf in model.named_buffers()
                if buf.is_floating_point() and not bool(torch.isfinite(buf).all())]


def check_finite(loss: torch.Tensor | float, step: int, model: nn.Module | None = None, *, every: int = 1,
                 context: str = "loss") -> float | None:
    """Raise :class:`NonFiniteError` if ``loss`` (a tensor of any shape, or a float) has a nan or inf element.

    Args:
        loss: the loss of this step (before or after ``backward()``).
        step: the step counter to name in the message (0-based or 1-based: say which in ``context`` if it matters).
        model: optional; when given, the message lists the parameters with non-finite gradients or values and the
            buffers with non-finite values (the error's ``bad_parameters`` and ``bad_buffers``).
        every: only check when ``step % every == 0`` (each check costs a host synchronisation on a GPU).
        context: what ``loss`` is, for the message (e.g. ``"train loss"``).

    Returns:
        the loss as a float (its mean if it has several elements) when checked and finite; ``None`` when
        skipped because of ``every``.
    """
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    if step % every != 0:
        return None
    if isinstance(loss, torch.Tensor):
        t = loss.detach()
        t = t if t.dtype == torch.float64 else t.float()    # float64 keeps its range (1e39 is finite there)
        # Both numbers in one host read (one synchronisation on a GPU), not two.
        all_finite, value = torch.stack((torch.isfinite(t).all().float(), t.mean())).tolist()
        finite = bool(all_finite)
    else:
        value = float(loss)
        finite = math.isfinite(value)
    if finite:
        return value
    bad = nonfinite_parameters(model) if model is not None else []
    bad_buffers = nonfinite_buffers(model) if model is not None else []
    where = f"; non-finite parameters: {_first(bad)}" if bad else ""
    if bad_buffers:
        where += (f"; non-finite buffers: {_first(bad_buffers)} (written by the forward pass: do not save this "
                  "model, restore the last good checkpoint)")
    raise NonFiniteError(
        f"{context} is {value} at step {step}{where}. Training stopped: lower the learning rate (or add warm-up), "
        "check the inputs of this step for nan/inf, and clip gradients for large-but-finite spikes.",
        step=step, value=value, bad_parameters=bad, bad_buffers=bad_buffers)


def _first(names: list[str], limit: int = 8) -> str:
    return ", ".join(names[:limit]) + (" ..." if len(names) > limit else "")

"""One training step, the one the course's loop, batch-size search, memory measurement and GPU benchmark all run.

``train_step`` = ``zero_grad(set_to_none=True)`` -> forward (under autocast only when AMP is on) -> loss ->
(scaled) backward -> :func:`optimizer_step` (optional unscale + clip, then ``scaler.step``/``update`` or
``optimizer.step``). Gradient accumulation is the same function called with ``step=False`` on all but the last
micro-batch of a group, ``zero_grad=False`` on all but the first, and ``loss_divisor`` = the group's size.

Why ``zero_grad`` comes first, before the forward pass: with ``set_to_none=True`` it frees the previous step's
gradients, so they are gone before the forward pass fills memory with saved activations. Zeroing between forward
and backward gives the same gradients but keeps the old ones alive through the forward pass, which raises the step's
peak by up to the gradient bytes (one more copy of the parameters; :class:`utils.memory_timeline.LiveTensorBytes`
measured 4-7 % of the peak for ResNet50 + Adam at 64 px, Day 08 draws both timelines). On CUDA the caching allocator
reuses the freed blocks either way, so the placement costs no time there. On a CPU with glibc's allocator, freeing
large gradient tensors before the forward makes the allocator hand pages back to the operating system and fault
fresh ones in: measured for a ResNet50 step at 32 px, batch 32, one thread, 6x the minor page faults and 8 % more
CPU time (system time). GPU memory is what this course optimises, so the placement is the same on every device.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from .precision import autocast_context

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class StepResult:
    """What one call of :func:`train_step` produced; every tensor is detached and stays on the device (reading one
    with ``.item()`` is a host sync)."""

    loss: torch.Tensor                  # the batch's loss as ``loss_fn`` returned it: not divided, not scaled
    outputs: torch.Tensor               # the model's outputs (logits), e.g. for accuracy
    grad_norm: torch.Tensor | None      # total gradient norm before clipping; None without clipping or step
    stepped: bool                       # True when the optimizer (or the scaler) was asked to step


def optimizer_step(model: nn.Module, optimizer: torch.optim.Optimizer, *,
                   scaler: torch.amp.GradScaler | None = None, max_grad_norm: float | None = None,
                   grad_multiplier: float = 1.0) -> torch.Tensor | None:
    """Update the parameters from the gradients accumulated in ``.grad``. Returns the total gradient norm before
    clipping (a device tensor), or ``None`` when ``max_grad_norm`` is ``None``.

    ``grad_multiplier`` rescales every gradient first (e.g. ``planned / actual`` micro-batches for a group that
    ended early). With a ``scaler`` the gradients are unscaled before clipping, so the clip sees true gradients;
    a step whose gradients hold inf/NaN is skipped by ``scaler.step`` and the scale is reduced by ``update``.
    """
    if grad_multiplier != 1.0:
        for p in model.parameters():
            if p.grad is not None:
                p.grad.mul_(grad_multiplier)
    grad_norm = None
    if max_grad_norm is not None:
        if scaler is not None:
            scaler.unscale_(optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return grad_norm


def _device_type(model: nn.Module, inputs: Any) -> str:
    if isinstance(inputs, torch.Tensor):
        return inputs.device.type
    param = next(model.parameters(), None)
    return param.device.type if param is not None else "cpu"


def train_step(model: nn.Module, inputs: Any, targets: torch.Tensor, optimizer: torch.optim.Optimizer, *,
               loss_fn: LossFn | None = None, amp_dtype: torch.dtype | None = None,
               scaler: torch.amp.GradScaler | None = None, max_grad_norm: float | None = None,
               loss_divisor: int = 1, zero_grad: bool = True, step: bool = True) -> StepResult:
    """Forward, loss, backward and (with ``step=True``) one optimizer step. The model must already be in train mode
    and ``inputs``/``targets`` on its device.

    Args:
        loss_fn: ``loss_fn(outputs, targets)``; cross-entropy by default.
        amp_dtype: ``torch.bfloat16``/``torch.float16`` runs forward and loss under ``torch.autocast``; ``None``
            runs them with no autocast context at all (see :func:`utils.precision.resolve_amp`).
        scaler: a ``GradScaler`` for fp16: the backward runs on the scaled loss.
        max_grad_norm: clip the total gradient norm (after unscaling) when stepping.
        loss_divisor: divide the loss by this before backward (the number of micro-batches in an accumulation
            group), so the accumulated gradient is the mean over the group.
        zero_grad: ``optimizer.zero_grad(set_to_none=True)`` before this step's forward pass (False on all but the
            first micro-batch of an accumulation group).
        step: call :func:`optimizer_step` after the backward (False before a group's last micro-batch).
    """
    if loss_divisor < 1:
        raise ValueError(f"loss_divisor must be >= 1 (micro-batches in the group), got {loss_divisor}")
    loss_fn = loss_fn or nn.functional.cross_entropy
    if zero_grad:                      # before the forward: the old gradients are freed before activations pile up
        optimizer.zero_grad(set_to_none=True)
    with autocast_context(_device_type(model, inputs), amp_dtype):
        outputs = model(inputs)
        loss = loss_fn(outputs, targets)
    scaled = loss / loss_divisor if loss_divisor != 1 else loss
    (scaler.scale(scaled) if scaler is not None else scaled).backward()
    grad_norm = None
    if step:
        grad_norm = optimizer_step(model, optimizer, scaler=scaler, max_grad_norm=max_grad_norm)
    return StepResult(loss.detach(), outputs.detach(), grad_norm, step)

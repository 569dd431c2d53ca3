"""A plain training loop: ``train_one_epoch``, ``evaluate`` and ``fit``, in the spirit of torchvision's references.

Design points, each a lesson of the course:
- no host sync on every step: running loss and correct counts stay on the device and are read (one ``.item()``)
  only every ``log_every`` steps for the progress bar and at the end of the epoch (with fp16 and a non-fused
  optimizer, ``GradScaler.step`` itself still reads one inf/NaN flag per optimizer step to decide whether to skip
  it; a fused SGD/Adam/AdamW takes the flag on the device and skips the step itself, with no read);
- accuracy is averaged over *samples*, not over batches (the last batch may be smaller);
- gradient accumulation divides the loss by the number of micro-batches in the group, so the gradient is the mean
  of the micro-batches' gradients: the one of a single large batch when the micro-batches are equal in size and
  the model has no BatchNorm (which normalises each micro-batch by its own statistics);
- mixed precision through ``torch.autocast`` on any device, with a ``GradScaler`` for fp16;
- gradient clipping after unscaling, with the total norm returned for logging.

The step itself (forward, loss, backward, clip, optimizer) is :func:`utils.step.train_step`; precision choices live in
:mod:`utils.precision`.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

import torch
from torch import nn

from .device import synchronize
from .modes import modes_kept
from .precision import autocast_context, make_grad_scaler, resolve_amp
from .step import LossFn, optimizer_step, train_step

__all__ = ["EpochStats", "History", "evaluate", "fit", "train_one_epoch"]


def _to(batch: Any, device: torch.device, non_blocking: bool) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to(b, device, non_blocking) for b in batch)
    if isinstance(batch, dict):
        return {k: _to(v, device, non_blocking) for k, v in batch.items()}
    return batch


def _progress(iterable: Iterable, enabled: bool, total: int | None, desc: str):
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, leave=False)


# --------------------------------------------------------------------------------------------------- loops
@dataclass
class EpochStats:
    """What one pass over a loader measured. Loss is the mean per sample; accuracy a fraction in [0, 1]."""

    loss: float
    accuracy: float
    samples: int
    seconds: float
    steps: int = 0                        # optimizer steps (train) or batches (eval)
    grad_norm: float | None = None        # total gradient norm before clipping, at the last optimizer step

    @property
    def samples_per_s(self) -> float:
        """Throughput in samples/s (images/s), including data loading."""
        return self.samples / self.seconds if self.seconds > 0 else float("nan")


def _planned_group_size(batch_index: int, accumulation_steps: int, total: int | None) -> int:
    """Micro-batches in the group that starts at ``batch_index``: ``accumulation_steps``, or fewer for the last
    group when the number of batches is known."""
    remaining = None if total is None else total - batch_index
    if remaining is None or remaining <= 0:  # unknown length (or a loader longer than its len())
        return accumulation_steps
    return min(accumulation_steps, remaining)


def train_one_epoch(model: nn.Module, loader: Iterable, optimizer: torch.optim.Optimizer,
                    device: torch.device | str, *, loss_fn: LossFn | None = None, amp: bool | str = False,
                    scaler: torch.amp.GradScaler | None = None, accumulation_steps: int = 1,
                    max_grad_norm: float | None = None, scheduler: Any = None, log_every: int = 50,
                    max_steps: int | None = None, progress: bool = True, desc: str = "train",
                    non_blocking: bool = True) -> EpochStats:
    """One epoch of training, each batch through :func:`utils.step.train_step`. Returns an :class:`EpochStats`.

    Args:
        amp: see :func:`utils.precision.resolve_amp`. With fp16 a ``GradScaler`` is created unless ``scaler`` is
            given.
        accumulation_steps: micro-batches per optimizer step. Each micro-batch's loss is divided by the number of
            micro-batches in its group, so the step uses the group's mean gradient. The last group may be shorter:
            with a known length (``len(loader)`` or ``max_steps``) it is divided by its own size from the start;
            when the loader ends earlier than known (an iterable of unknown length), the gradients of that group
            are rescaled by planned/actual size before its step, which is then clipped and scheduled like any other.
        max_grad_norm: clip the total gradient norm to this value (after unscaling); ``None`` leaves gradients.
        scheduler: stepped after every optimizer step (a per-step schedule); epoch schedules belong in ``fit``.
        log_every: with ``progress``, read the running loss from the device every this many batches for the
            progress bar (one host sync each); without a progress bar the loop reads nothing until the epoch
            ends (with fp16 and a non-fused optimizer, ``GradScaler.step`` still reads its inf/NaN flag once per
            optimizer step; a fused one reads nothing).
        max_steps: stop after this many batches (for quick runs).
    """
    if accumulation_steps < 1:
        raise ValueError(f"accumulation_steps must be >= 1, got {accumulation_steps}")
    if log_every < 1:
        raise ValueError(f"log_every must be >= 1, got {log_every}")
    dev = torch.device(device)
    amp_dtype = resolve_amp(amp, dev)
    if scaler is None:
        scaler = make_grad_scaler(amp_dtype, dev)
    try:
        total = len(loader)  # type: ignore[arg-type]
    except TypeError:
        total = None
    if max_steps is not None:
        total = min(total, max_steps) if total is not None else max_steps

    model.train()
    loss_sum = torch.zeros((), device=dev)
    correct = torch.zeros((), device=dev, dtype=torch.long)
    samples = 0
    steps = 0
    grad_norm: torch.Tensor | None = None
    pending = 0                                # micro-batches backpropagated since the last optimizer step
    planned = accumulation_steps               # the size the current group's losses were divided by
    bar = _progress(loader, progress, total, desc)
    start = time.perf_counter()
    for i, (images, targets) in enumerate(bar):
        if max_steps is not None and i >= max_steps:
            break
        images, targets = _to(images, dev, non_blocking), _to(targets, dev, non_blocking)
        if pending == 0:
            planned = _planned_group_size(i, accumulation_steps, total)
        pending += 1
        result = train_step(model, images, targets, optimizer, loss_fn=loss_fn, amp_dtype=amp_dtype, scaler=scaler,
                            max_grad_norm=max_grad_norm, loss_divisor=planned, zero_grad=pending == 1,
                            step=pending == planned)
        if result.stepped:
            pending = 0
            steps += 1
            grad_norm = result.grad_norm if result.grad_norm is not None else grad_norm
            if scheduler is not None:
                scheduler.step()
        n = targets.shape[0]
        samples += n
        loss_sum += result.loss.float() * n
        correct += (result.outputs.argmax(dim=1) == targets).sum()
        if progress and (i + 1) % log_every == 0 and hasattr(bar, "set_postfix"):
            bar.set_postfix(loss=f"{(loss_sum / samples).item():.4f}")  # the one host sync per logging interval
    if pending:
        # The loader ended inside a group (unknown length, or shorter than its len()): its losses were divided by
        # `planned`, so scale the gradients to the mean over the `pending` micro-batches that really came.
        norm = optimizer_step(model, optimizer, scaler=scaler, max_grad_norm=max_grad_norm,
                              grad_multiplier=planned / pending)
        grad_norm = norm if norm is not None else grad_norm
        steps += 1
        if scheduler is not None:
            scheduler.step()
    synchronize(dev)
    seconds = time.perf_counter() - start
    if samples == 0:
        raise ValueError("the loader yielded no batches: check the dataset size, batch_size and drop_last")
    return EpochStats(loss=(loss_sum / samples).item(), accuracy=correct.item() / samples, samples=samples,
                      seconds=seconds, steps=steps, grad_norm=None if grad_norm is None else float(grad_norm))


def evaluate(model: nn.Module, loader: Iterable, device: torch.device | str, *, loss_fn: LossFn | None = None,
             amp: bool | str = False, max_steps: int | None = None, progress: bool = False,
             desc: str = "eval", non_blocking: bool = True) -> EpochStats:
    """Mean loss and accuracy over every sample of ``loader``, in eval mode (BatchNorm uses its running
    statistics, dropout is off) and under ``torch.inference_mode`` (no autograd graph is kept). The mode of the
    model and of each submodule is restored afterwards (``utils.modes.modes_kept``, as Day 06 teaches): a model
    that came in training mode leaves in it, and a BatchNorm frozen in eval mode stays frozen."""
    dev = torch.device(device)
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    amp_dtype = resolve_amp(amp, dev)
    loss_sum = torch.zeros((), device=dev)
    correct = torch.zeros((), device=dev, dtype=torch.long)
    samples = 0
    batches = 0
    start = time.perf_counter()
    with modes_kept(model), torch.inference_mode():
        model.eval()
        for i, (images, targets) in enumerate(_progress(loader, progress, None, desc)):
            if max_steps is not None and i >= max_steps:
                break
            images, targets = _to(images, dev, non_blocking), _to(targets, dev, non_blocking)
            with autocast_context(dev.type, amp_dtype):
                outputs = model(images)
                loss = loss_fn(outputs, targets)
            n = targets.shape[0]
            samples += n
            batches += 1
            loss_sum += loss.float() * n
            correct += (outputs.argmax(dim=1) == targets).sum()
    synchronize(dev)
    if samples == 0:
        raise ValueError("the evaluation loader yielded no batches")
    return EpochStats(loss=(loss_sum / samples).item(), accuracy=correct.item() / samples, samples=samples,
                      seconds=time.perf_counter() - start, steps=batches)


@dataclass
class History:
    """Per-epoch metrics from :func:`fit`: ``history["val_accuracy"]`` gives the list over epochs."""

    records: list[dict[str, float]] = field(default_factory=list)

    def append(self, record: dict[str, float]) -> None:
        self.records.append(record)

    def __getitem__(self, key: str) -> list[float]:
        return [r[key] for r in self.records]

    def __len__(self) -> int:
        return len(self.records)

    @property
    def last(self) -> dict[str, float]:
        return self.records[-1]

    def best(self, key: str = "val_accuracy", mode: str = "max") -> dict[str, float]:
        pick = max if mode == "max" else min
        return pick(self.records, key=lambda r: r[key])


def fit(model: nn.Module, train_loader: Iterable, val_loader: Iterable | None, optimizer: torch.optim.Optimizer,
        device: torch.device | str, epochs: int, *, scheduler: Any = None, scheduler_per_step: bool = False,
        loss_fn: LossFn | None = None, amp: bool | str = False, accumulation_steps: int = 1,
        max_grad_norm: float | None = None, log_every: int = 50, max_steps_per_epoch: int | None = None,
        progress: bool = True, verbose: bool = True) -> History:
    """Train for ``epochs`` epochs, evaluating on ``val_loader`` after each. Returns a :class:`History` with
    ``epoch, lr, train_loss, train_accuracy, val_loss, val_accuracy, seconds, images_per_s`` per epoch.

    ``scheduler`` is stepped once per epoch, or after every optimizer step with ``scheduler_per_step=True``.
    """
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    dev = torch.device(device)
    scaler = make_grad_scaler(resolve_amp(amp, dev), dev)
    history = History()
    for epoch in range(1, epochs + 1):
        lr = optimizer.param_groups[0]["lr"]
        tr = train_one_epoch(model, train_loader, optimizer, dev, loss_fn=loss_fn, amp=amp, scaler=scaler,
                             accumulation_steps=accumulation_steps, max_grad_norm=max_grad_norm,
                             scheduler=scheduler if scheduler_per_step else None, log_every=log_every,
                             max_steps=max_steps_per_epoch, progress=progress, desc=f"epoch {epoch}/{epochs}")
        if scheduler is not None and not scheduler_per_step:
            scheduler.step()
        record: dict[str, float] = {"epoch": epoch, "lr": lr, "train_loss": tr.loss, "train_accuracy": tr.accuracy,
                                    "seconds": tr.seconds, "images_per_s": tr.samples_per_s}
        if tr.grad_norm is not None:
            record["grad_norm"] = tr.grad_norm
        if val_loader is not None:
            va = evaluate(model, val_loader, dev, loss_fn=loss_fn, amp=amp)
            record.update(val_loss=va.loss, val_accuracy=va.accuracy)
        if not math.isfinite(tr.loss):
            raise FloatingPointError(f"training loss became {tr.loss} in epoch {epoch}: lower the learning rate, "
                                     "check the inputs for NaN/inf, or clip gradients (max_grad_norm).")
        history.append(record)
        if verbose:
            val = (f" | val loss {record['val_loss']:.4f} acc {record['val_accuracy']:.2%}"
                   if val_loader is not None else "")
            print(f"epoch {epoch:>3}/{epochs} | lr {lr:.3g} | train loss {tr.loss:.4f} acc {tr.accuracy:.2%}{val} | "
                  f"{tr.samples_per_s:,.0f} img/s")
    return history

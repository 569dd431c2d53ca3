"""A plain training loop: ``train_one_epoch``, ``evaluate`` and ``fit``, in the spirit of torchvision's references.

Design points, each a lesson of the course:
- no host sync on every step: running loss and correct counts stay on the device and are read (one ``.item()``)
  only every ``log_every`` steps and at the end of the epoch;
- accuracy is averaged over *samples*, not over batches (the last batch may be smaller);
- gradient accumulation divides the loss by the number of micro-batches in the group, so the gradient equals the
  one of a single large batch;
- mixed precision through ``torch.autocast`` on any device, with a ``GradScaler`` for fp16;
- gradient clipping after unscaling, with the total norm returned for logging.
"""
from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch
from torch import nn

from .environment import synchronize

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


# --------------------------------------------------------------------------------------------------- precision
def resolve_amp(amp: bool | str | torch.dtype | None, device: torch.device | str) -> torch.dtype | None:
    """The autocast dtype for ``amp`` on ``device``, or ``None`` for full fp32.

    ``amp`` may be ``False``/``None`` (off), ``True`` or ``"auto"`` (bf16 where the device supports it, else fp16),
    ``"bf16"``/``"fp16"`` or a torch dtype.
    """
    dev = torch.device(device)
    if amp is None or amp is False or amp == "off":
        return None
    if amp is True or amp == "auto":
        if dev.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.bfloat16 if dev.type == "cpu" else torch.float16
    table = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
             torch.bfloat16: torch.bfloat16, torch.float16: torch.float16}
    if amp not in table:
        raise ValueError(f"amp must be False, True, 'auto', 'bf16' or 'fp16', got {amp!r}")
    dtype = table[amp]
    if dtype == torch.float16 and dev.type == "cpu":
        raise ValueError("fp16 autocast on the CPU is slow and poorly supported: use amp='bf16' on the CPU.")
    return dtype


def make_grad_scaler(amp_dtype: torch.dtype | None, device: torch.device | str) -> torch.amp.GradScaler | None:
    """A ``GradScaler`` when training in fp16 (whose small range needs loss scaling); ``None`` otherwise."""
    dev = torch.device(device)
    if amp_dtype == torch.float16:
        return torch.amp.GradScaler(dev.type)
    return None


def _autocast(device: torch.device, amp_dtype: torch.dtype | None):
    # Without AMP, no autocast context at all: even a disabled one measurably slows CPU training steps
    # (about 5 % for ResNet50 at 32 px on this course's CI machine, benchmarks/loop_overhead.py).
    if amp_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=amp_dtype)


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
    logged: list[tuple[int, float]] = field(default_factory=list)  # (batch index, running loss) every log_every

    @property
    def samples_per_s(self) -> float:
        """Throughput in samples/s (images/s), including data loading."""
        return self.samples / self.seconds if self.seconds > 0 else float("nan")


def train_one_epoch(model: nn.Module, loader: Iterable, optimizer: torch.optim.Optimizer,
                    device: torch.device | str, *, loss_fn: LossFn | None = None, amp: bool | str = False,
                    scaler: torch.amp.GradScaler | None = None, accumulation_steps: int = 1,
                    max_grad_norm: float | None = None, scheduler: Any = None, log_every: int = 50,
                    max_steps: int | None = None, progress: bool = True, desc: str = "train",
                    non_blocking: bool = True) -> EpochStats:
    """One epoch of training. Returns an :class:`EpochStats`.

    Args:
        amp: see :func:`resolve_amp`. With fp16 a ``GradScaler`` is created unless ``scaler`` is given.
        accumulation_steps: micro-batches per optimizer step (each micro-batch's loss is divided by the number of
            micro-batches in its group, the last group may be shorter).
        max_grad_norm: clip the total gradient norm to this value (after unscaling); ``None`` leaves gradients.
        scheduler: stepped after every optimizer step (a per-step schedule); epoch schedules belong in ``fit``.
        log_every: read the running loss from the device every this many batches (one host sync each).
        max_steps: stop after this many batches (for quick runs).
    """
    if accumulation_steps < 1:
        raise ValueError(f"accumulation_steps must be >= 1, got {accumulation_steps}")
    if log_every < 1:
        raise ValueError(f"log_every must be >= 1, got {log_every}")
    dev = torch.device(device)
    loss_fn = loss_fn or nn.CrossEntropyLoss()
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
    logged: list[tuple[int, float]] = []
    bar = _progress(loader, progress, total, desc)
    start = time.perf_counter()
    i = -1
    for i, (images, targets) in enumerate(bar):
        if max_steps is not None and i >= max_steps:
            i -= 1
            break
        images, targets = _to(images, dev, non_blocking), _to(targets, dev, non_blocking)
        group_start = (i // accumulation_steps) * accumulation_steps
        group_size = accumulation_steps if total is None else min(accumulation_steps, total - group_start)
        with _autocast(dev, amp_dtype):
            outputs = model(images)
            loss = loss_fn(outputs, targets)
        scaled = loss / group_size
        if i == group_start:
            # Zero right before the first backward of a group, not right after the step: on the CPU, gradients
            # freed before the forward are returned to the OS and re-faulted by backward (about 10 % of a ResNet50
            # step at 32 px, benchmarks/loop_overhead.py); freed here, backward reuses their memory.
            optimizer.zero_grad(set_to_none=True)
        (scaler.scale(scaled) if scaler is not None else scaled).backward()
        last_of_group = (i + 1 - group_start) == group_size
        if last_of_group:
            if max_grad_norm is not None:
                if scaler is not None:
                    scaler.unscale_(optimizer)
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            if scheduler is not None:
                scheduler.step()
            steps += 1
        n = targets.shape[0]
        samples += n
        loss_sum += loss.detach().float() * n
        correct += (outputs.detach().argmax(dim=1) == targets).sum()
        if (i + 1) % log_every == 0:
            running = (loss_sum / samples).item()  # the one host sync per logging interval
            logged.append((i + 1, running))
            if progress and hasattr(bar, "set_postfix"):
                bar.set_postfix(loss=f"{running:.4f}")
    if i >= 0 and total is None and (i + 1) % accumulation_steps != 0:
        # Unknown length: the last group was shorter than planned; step on what was accumulated.
        (scaler.step(optimizer) if scaler is not None else optimizer.step())
        if scaler is not None:
            scaler.update()
        steps += 1
    synchronize(dev)
    seconds = time.perf_counter() - start
    if samples == 0:
        raise ValueError("the loader yielded no batches: check the dataset size, batch_size and drop_last")
    return EpochStats(loss=(loss_sum / samples).item(), accuracy=correct.item() / samples, samples=samples,
                      seconds=seconds, steps=steps,
                      grad_norm=None if grad_norm is None else float(grad_norm), logged=logged)


def evaluate(model: nn.Module, loader: Iterable, device: torch.device | str, *, loss_fn: LossFn | None = None,
             amp: bool | str = False, max_steps: int | None = None, progress: bool = False,
             desc: str = "eval", non_blocking: bool = True) -> EpochStats:
    """Mean loss and accuracy over every sample of ``loader``, in eval mode (BatchNorm uses its running
    statistics, dropout is off) and under ``torch.inference_mode`` (no autograd graph is kept)."""
    dev = torch.device(device)
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    amp_dtype = resolve_amp(amp, dev)
    model.eval()
    loss_sum = torch.zeros((), device=dev)
    correct = torch.zeros((), device=dev, dtype=torch.long)
    samples = 0
    batches = 0
    start = time.perf_counter()
    with torch.inference_mode():
        for i, (images, targets) in enumerate(_progress(loader, progress, None, desc)):
            if max_steps is not None and i >= max_steps:
                break
            images, targets = _to(images, dev, non_blocking), _to(targets, dev, non_blocking)
            with _autocast(dev, amp_dtype):
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

"""Where training memory goes: parameters, gradients, optimizer state and activations, measured and predicted.

All sizes are in **bytes**. The activation part is measured as the bytes autograd *saves for backward*, seen
through :func:`torch.autograd.graph.saved_tensors_hooks`; this works on any device (CPU included), so the same
numbers can be produced in CI and on a GPU. Tensors that share one storage (a ReLU output that is also the next
convolution's input, views, in-place results) are counted once, and parameters (which autograd also saves) are
left out because they are already counted as parameters.

Caveat: a saved *view* counts as its whole storage. Feed a slice of a larger batch (``xb[:b]``) and the first
layer's saved input is counted at the full batch's size, which is also what the allocator really keeps alive.
Clone micro-batches (``xb[:b].clone()``) when measuring what a batch of ``b`` alone would cost.

On CUDA, :func:`cuda_peak_training_bytes` reads ``torch.cuda.max_memory_allocated`` over ``steps`` (default two)
real training steps, to compare with the prediction of :meth:`MemoryBreakdown.peak_bytes`.
"""
from __future__ import annotations

import copy
import gc
import weakref
from dataclasses import asdict, dataclass
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, Sequence

import torch
from torch import nn

from .modes import modes_kept
from .precision import autocast_context
from .step import train_step

#: Optimizer-state tensors kept per parameter tensor, each the size of the parameter.
OPTIMIZER_STATE_SLOTS: dict[str, int] = {"sgd": 0, "sgd_momentum": 1, "adam": 2, "adamw": 2}


def _storage_key(t: torch.Tensor) -> tuple[int, int] | None:
    """(data pointer, bytes) of the storage behind ``t``; ``None`` for tensors without an ordinary storage."""
    try:
        s = t.untyped_storage()
        return s.data_ptr(), s.nbytes()
    except (RuntimeError, NotImplementedError):
        return None


def unique_storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes held by ``tensors``, counting each underlying storage once (views and aliases share one)."""
    seen: dict[int, int] = {}
    for t in tensors:
        key = _storage_key(t)
        if key is None:
            continue
        ptr, nbytes = key
        seen[ptr] = max(seen.get(ptr, 0), nbytes)
    return sum(seen.values())


def parameter_bytes(model: nn.Module, trainable_only: bool = False) -> int:
    """Bytes of the model's parameters (``trainable_only``: only those with ``requires_grad``)."""
    return unique_storage_bytes(p for p in model.parameters() if p.requires_grad or not trainable_only)


def gradient_bytes(model: nn.Module) -> int:
    """Bytes the gradients take once ``backward`` has run: one tensor per trainable parameter, same dtype."""
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


def make_optimizer(name: str, params: Iterable[torch.nn.Parameter], lr: float = 0.01) -> torch.optim.Optimizer:
    """``"sgd"``, ``"sgd_momentum"`` (momentum 0.9), ``"adam"`` or ``"adamw"``."""
    key = name.strip().lower()
    if key == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if key == "sgd_momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    if key == "adam":
        return torch.optim.Adam(params, lr=lr)
    if key == "adamw":
        return torch.optim.AdamW(params, lr=lr)
    raise ValueError(f"unknown optimizer {name!r}: use one of {', '.join(OPTIMIZER_STATE_SLOTS)}")


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of the tensors in ``optimizer.state`` now (empty until the first ``step``)."""
    tensors = [v for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]
    return unique_storage_bytes(tensors)


def predicted_optimizer_state_bytes(model: nn.Module, optimizer: str) -> int:
    """Optimizer state from the rule "slots x trainable parameter bytes" (ignores Adam's per-tensor step scalar)."""
    key = optimizer.strip().lower()
    if key not in OPTIMIZER_STATE_SLOTS:
        raise ValueError(f"unknown optimizer {optimizer!r}: use one of {', '.join(OPTIMIZER_STATE_SLOTS)}")
    return OPTIMIZER_STATE_SLOTS[key] * gradient_bytes(model)


def measured_optimizer_state_bytes(model: nn.Module, optimizer: str) -> int:
    """Create the optimizer on a copy of ``model``, take one step with zero gradients (lr=0, so nothing moves)
    and return the bytes of the state it allocated. No forward or backward pass is needed."""
    clone = copy.deepcopy(model)
    for p in clone.parameters():
        if p.requires_grad:
            p.grad = torch.zeros_like(p)
    opt = make_optimizer(optimizer, clone.parameters(), lr=0.0)
    opt.step()
    nbytes = optimizer_state_bytes(opt)
    del opt, clone
    gc.collect()
    return nbytes


class SavedTensorLog:
    """Context manager that records every tensor autograd saves for backward while it is active.

    ``with SavedTensorLog(exclude=model.parameters()) as log: loss = model(x).sum()`` then ``log.bytes`` (unique
    storages, bytes), ``log.raw_bytes`` (without de-duplication) and ``log.count``. The tensors themselves are
    passed on unchanged (as detached aliases of the same storage), so ``backward`` still works afterwards, and a
    forward without backward frees what it saved as soon as its output is dropped. The log keeps only weak
    references: :meth:`alive_bytes` adds up the saved tensors the graph still holds, which finds leaks (a loss kept
    with its graph keeps every tensor its forward saved).
    """

    def __init__(self, exclude: Iterable[torch.Tensor] = ()):
        self._exclude = {k[0] for k in (_storage_key(t) for t in exclude) if k is not None}
        self._storages: dict[int, int] = {}
        self._refs: list[weakref.ref] = []
        self.raw_bytes = 0
        self.count = 0
        self._hooks = None

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        # Hand autograd a detached alias (same storage, no copy), never ``t`` itself: a saved *output* would then
        # hold its own grad_fn, a reference cycle the garbage collector cannot see, and a forward without backward
        # would leak everything it saved (the warning in ``torch.autograd.graph.saved_tensors_hooks``).
        saved = t.detach()
        key = _storage_key(t)
        if key is not None and key[0] not in self._exclude:
            ptr, nbytes = key
            self.count += 1
            self.raw_bytes += t.numel() * t.element_size()
            self._storages[ptr] = max(self._storages.get(ptr, 0), nbytes)
            self._refs.append(weakref.ref(saved))
        return saved

    @property
    def bytes(self) -> int:
        return sum(self._storages.values())

    def alive_bytes(self, collect: bool = False) -> int:
        """Bytes (unique storages) of the saved tensors some autograd graph still holds now; ``collect`` runs the
        garbage collector first, so that graphs only kept by unreachable objects are not counted."""
        if collect:
            gc.collect()
        return unique_storage_bytes(t for t in (r() for r in self._refs) if t is not None)

    def __enter__(self) -> "SavedTensorLog":
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda saved: saved)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(*exc)


@contextmanager
def mode_and_buffers_kept(model: nn.Module) -> Iterator[None]:
    """Put back the train/eval mode of ``model`` and of each submodule (a BatchNorm frozen in eval inside a training
    model stays frozen) and its buffers (BatchNorm's running statistics: about 0.2 MB in ResNet50) when the block
    ends, even by an error: for measurements that run training steps on a model they were lent."""
    saved = [b.detach().clone() for b in model.buffers()]
    try:
        with modes_kept(model):
            yield
    finally:
        with torch.no_grad():
            for buffer, value in zip(model.buffers(), saved):
                buffer.copy_(value)


def saved_activation_bytes(model: nn.Module, inputs: torch.Tensor, *, autocast_dtype: torch.dtype | None = None,
                           loss_fn: Callable[[torch.Tensor], torch.Tensor] | None = None) -> int:
    """Bytes saved for backward by one training-mode forward pass (plus ``loss_fn`` on the output, if given).

    Parameters are excluded; the input batch is included when the first layer saves it (convolutions do).
    ``autocast_dtype`` (e.g. ``torch.bfloat16``) runs the forward under autocast on the input's device. The model's
    mode and buffers (BatchNorm's running statistics) are as they were afterwards.
    """
    ctx = autocast_context(inputs.device.type, autocast_dtype)
    with mode_and_buffers_kept(model):                # a training forward moves BatchNorm's statistics
        model.train()
        with SavedTensorLog(exclude=model.parameters()) as log, ctx:
            out = model(inputs)
            if loss_fn is not None:
                out = loss_fn(out)
        nbytes = log.bytes
    del out
    return nbytes


@dataclass
class ActivationFit:
    """Saved-activation bytes as ``fixed + per_sample * batch_size``, fitted from two measured batch sizes."""

    per_sample: float   # bytes per sample
    fixed: float        # bytes that do not grow with the batch (e.g. autocast's low-precision weight copies)
    measured: dict[int, int]  # batch size -> measured bytes

    def predict(self, batch_size: int) -> int:
        return int(round(self.fixed + self.per_sample * batch_size))


def fit_activations(model: nn.Module, sample_shape: Sequence[int], batch_sizes: Sequence[int] = (2, 4), *,
                    device: torch.device | str = "cpu", autocast_dtype: torch.dtype | None = None) -> ActivationFit:
    """Measure saved-activation bytes at two batch sizes (random inputs of ``sample_shape``, e.g. (3, 32, 32))
    and fit a straight line through them."""
    if len(batch_sizes) != 2 or batch_sizes[0] == batch_sizes[1]:
        raise ValueError("give two different batch sizes")
    measured = {}
    for b in batch_sizes:
        x = torch.randn(b, *sample_shape, device=device)
        measured[int(b)] = saved_activation_bytes(model, x, autocast_dtype=autocast_dtype)
    (b1, m1), (b2, m2) = measured.items()
    per_sample = (m2 - m1) / (b2 - b1)
    return ActivationFit(per_sample=per_sample, fixed=m1 - per_sample * b1, measured=measured)


@dataclass
class MemoryBreakdown:
    """The parts of training memory at one batch size, in bytes."""

    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    batch_size: int
    activation_fixed: int = 0  # the batch-independent part of ``activations``
    optimizer: str = "adam"

    @property
    def activation_per_sample(self) -> float:
        """Bytes of saved activations added by one more sample."""
        return (self.activations - self.activation_fixed) / self.batch_size

    def at_batch(self, batch_size: int) -> "MemoryBreakdown":
        """The same model and optimizer at another batch size: only the activations change."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        acts = int(round(self.activation_fixed + self.activation_per_sample * batch_size))
        return MemoryBreakdown(self.parameters, self.gradients, self.optimizer_state, acts, batch_size,
                               self.activation_fixed, self.optimizer)

    def peak_bytes(self, overhead_fraction: float = 0.0) -> int:
        """Predicted peak of one training step: everything alive at once at the start of backward, plus an
        ``overhead_fraction`` for workspace and allocator rounding (0.1 = 10 %). An upper-bound style estimate:
        with ``zero_grad(set_to_none=True)`` gradients and activations overlap only partly."""
        base = self.parameters + self.gradients + self.optimizer_state + self.activations
        return int(round(base * (1.0 + overhead_fraction)))

    def parts(self) -> dict[str, int]:
        return {"parameters": self.parameters, "gradients": self.gradients,
                "optimizer state": self.optimizer_state, "activations": self.activations}

    def fractions(self) -> dict[str, float]:
        """Each part as a fraction of their sum."""
        total = sum(self.parts().values())
        return {k: v / total for k, v in self.parts().items()}

    def as_dict(self) -> dict:
        return asdict(self)


def measure_breakdown(model: nn.Module, sample_shape: Sequence[int], batch_size: int, optimizer: str = "adam", *,
                      device: torch.device | str = "cpu", autocast_dtype: torch.dtype | None = None,
                      probe_batches: Sequence[int] = (2, 4)) -> MemoryBreakdown:
    """Measure parameters, gradients and optimizer state, fit the activations at ``probe_batches`` and return the
    breakdown predicted for ``batch_size``. Keep the probes small: that is the point of the model."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer (samples per step), got {batch_size!r}")
    fit = fit_activations(model, sample_shape, probe_batches, device=device, autocast_dtype=autocast_dtype)
    return MemoryBreakdown(
        parameters=parameter_bytes(model),
        gradients=gradient_bytes(model),
        optimizer_state=measured_optimizer_state_bytes(model, optimizer),
        activations=fit.predict(batch_size),
        batch_size=batch_size,
        activation_fixed=int(round(fit.fixed)),
        optimizer=optimizer,
    )


def cuda_peak_training_bytes(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, optimizer: str = "adam",
                             steps: int = 2, autocast_dtype: torch.dtype | None = None) -> int | None:
    """``torch.cuda.max_memory_allocated`` over ``steps`` real training steps (bytes) of :func:`utils.step.train_step`
    (the loop's step, so the peak is the loop's peak): the absolute peak, so it includes the parameters and anything
    else already on the device. ``None`` when ``inputs`` are not on CUDA. The steps are real: they change the model's
    weights and BatchNorm statistics, so pass a model you can throw away (a fresh one, or a copy)."""
    device = inputs.device
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    opt = make_optimizer(optimizer, model.parameters())
    model.train()
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    for _ in range(steps):
        train_step(model, inputs, targets, opt, amp_dtype=autocast_dtype)
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device)
    del opt
    return int(peak)


def format_bytes(n: float) -> str:
    """``1536`` -> ``"1.50 KiB"``; binary units."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"

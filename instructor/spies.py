"""Spies for the hidden tests: they watch *how* an answer works where its result cannot tell.

A CPU grader cannot see a forgotten device move (the tensors are on the CPU already) nor a loss computed outside
autocast (its value differs in the third digit). The hidden tests of several days watch the calls instead:

    from instructor.spies import recording_moves, was_moved
    with recording_moves() as moves:
        answer(model, batches)
    assert all(was_moved(moves, x, device) for x, _ in batches), "move each batch to the model's device"

    from instructor.spies import recording_op_dtypes
    with recording_op_dtypes({"_log_softmax"}) as ops:
        amp_train_step(...)
    assert ops == [("_log_softmax", torch.float32)], "compute the loss inside the autocast block"

Instructor tooling, like the rest of ``instructor``: hidden tests run only when an instructor autogrades, where this
package is installed (``pyproject.toml``); the learner release leaves it out.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator
from unittest import mock

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["recording_moves", "same_device", "was_moved", "recording_op_dtypes"]

Move = tuple[Any, torch.device]


def _target_device(args: tuple, kwargs: dict) -> torch.device | None:
    """The device a ``.to(...)`` call names (positionally or as ``device=``), or None for ``.to(dtype)``/``.to(t)``."""
    target = kwargs.get("device", args[0] if args else None)
    if isinstance(target, (str, torch.device)):
        return torch.device(target)
    if isinstance(target, int) and not isinstance(target, bool):   # x.to(0): an accelerator index
        return torch.device(target)
    return None


@contextmanager
def recording_moves(*, cpu_calls: bool = False, modules: bool = False) -> Iterator[list[Move]]:
    """Record every ``Tensor.to(<device>)`` call while active, as ``(tensor, device)`` pairs, in call order.

    cpu_calls: also record ``Tensor.cpu()`` as a move to ``cpu`` (where the exercise returns results on the CPU;
        leave it off where ``.cpu()`` would be the wrong answer on a GPU).
    modules: also record ``nn.Module.to(<device>)`` as ``(module, device)``.
    The calls themselves run unchanged. Works in a worker process too (patch inside the worker).
    """
    moves: list[Move] = []
    original_to, original_cpu, original_module_to = torch.Tensor.to, torch.Tensor.cpu, nn.Module.to

    def tensor_to(t: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        device = _target_device(args, kwargs)
        if device is not None:
            moves.append((t, device))
        return original_to(t, *args, **kwargs)

    def tensor_cpu(t: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        moves.append((t, torch.device("cpu")))
        return original_cpu(t, *args, **kwargs)

    def module_to(module: nn.Module, *args: Any, **kwargs: Any) -> nn.Module:
        device = _target_device(args, kwargs)
        if device is not None:
            moves.append((module, device))
        return original_module_to(module, *args, **kwargs)

    patches = [mock.patch.object(torch.Tensor, "to", tensor_to)]
    if cpu_calls:
        patches.append(mock.patch.object(torch.Tensor, "cpu", tensor_cpu))
    if modules:
        patches.append(mock.patch.object(nn.Module, "to", module_to))
    for patch in patches:
        patch.start()
    try:
        yield moves
    finally:
        for patch in reversed(patches):
            patch.stop()


def same_device(a: torch.device | str, b: torch.device | str) -> bool:
    """True when two devices are the same place: ``cuda`` and ``cuda:0`` match (no index means the current one)."""
    a, b = torch.device(a), torch.device(b)
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


def was_moved(moves: list[Move], obj: Any, device: torch.device | str) -> bool:
    """True when ``obj`` itself (by identity, not equality) was sent to ``device`` in the recorded ``moves``."""
    return any(o is obj and same_device(d, device) for o, d in moves)


class _OpDtypes(TorchDispatchMode):
    def __init__(self, names: set[str], seen: list[tuple[str, torch.dtype]]) -> None:
        super().__init__()
        self.names, self.seen = names, seen

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in self.names:
            first = next((a for a in args if isinstance(a, torch.Tensor)), None)
            self.seen.append((name, first.dtype if first is not None else None))
        return func(*args, **(kwargs or {}))


@contextmanager
def recording_op_dtypes(names: set[str] | list[str] | tuple[str, ...]) -> Iterator[list[tuple[str, torch.dtype]]]:
    """Record each call of the named ATen ops (e.g. ``"_log_softmax"``) with its first tensor input's dtype.

    The ops are seen below autocast, so the dtype is the one the op ran in, whatever Python spelling reached it
    (``F.cross_entropy``, ``nn.CrossEntropyLoss``, a function imported by name). Names are ATen overload packets,
    without ``aten.`` or an overload suffix.
    """
    if isinstance(names, str):
        raise TypeError(f"names must be a collection of op names, not the string {names!r}: write {{{names!r}}}")
    seen: list[tuple[str, torch.dtype]] = []
    with _OpDtypes(set(names), seen):
        yield seen

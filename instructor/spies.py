"""Spies for the hidden tests: they watch *how* an answer works where its result cannot tell.

A CPU grader cannot see a forgotten device move (the tensors are on the CPU already) nor a loss computed outside
autocast (its value differs in the third digit). The hidden tests of several days watch the calls instead:

    from instructor.spies import recording_moves, was_moved
    with recording_moves() as moves:
        answer(model, batches)
    assert all(was_moved(moves, x, device) for x, _ in batches), "move each batch to the model's device"

    from instructor.spies import recording_op_dtypes
    with recording_op_dtypes({"nll_loss_forward"}) as ops:
        amp_train_step(...)
    assert ops == [("nll_loss_forward", torch.float32)], "compute the loss inside the autocast block"

A test that watches a library function by replacing it must also reach an answer that imported it by name
(``from os import fsync``): :func:`replacing` does both.

Instructor tooling, like the rest of ``instructor``: hidden tests run only when an instructor autogrades, where this
package is installed (``pyproject.toml``); the learner release leaves it out.
"""
from __future__ import annotations

import inspect
import types
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator
from unittest import mock

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from .simulated_cuda import _device_named, on_simulated_cuda, simulating_cuda

__all__ = ["recording_moves", "Moves", "same_device", "was_moved", "recording_op_dtypes", "replacing",
           "as_if_on_cuda", "CudaLikeRun", "grad_enabled_after"]

Move = tuple[Any, torch.device]


class Moves(list):
    """The ``(object, device)`` pairs :func:`recording_moves` saw, in call order; ``non_blocking[i]`` says whether
    move ``i`` asked for an asynchronous copy (``non_blocking=True``)."""

    def __init__(self) -> None:
        super().__init__()
        self.non_blocking: list[bool] = []

    def record(self, obj: Any, device: torch.device, non_blocking: bool) -> None:
        self.append((obj, device))
        self.non_blocking.append(bool(non_blocking))


def _non_blocking(args: tuple, kwargs: dict) -> bool:
    """The ``non_blocking`` flag of a ``.to(device, dtype, non_blocking, ...)`` call, by keyword or position."""
    return bool(kwargs.get("non_blocking", len(args) > 2 and args[2]))


@contextmanager
def recording_moves(*, cpu_calls: bool = False, modules: bool = False) -> Iterator[Moves]:
    """Record every ``Tensor.to(<device>)`` call while active, as ``(tensor, device)`` pairs, in call order, and
    whether each asked for ``non_blocking=True`` (``moves.non_blocking``).

    cpu_calls: also record ``Tensor.cpu()`` as a move to ``cpu`` (where the exercise returns results on the CPU;
        leave it off where ``.cpu()`` would be the wrong answer on a GPU).
    modules: also record ``nn.Module.to(<device>)`` as ``(module, device)``.
    The calls themselves run unchanged. Works in a worker process too (patch inside the worker).
    """
    moves = Moves()
    original_to, original_cpu, original_module_to = torch.Tensor.to, torch.Tensor.cpu, nn.Module.to

    def tensor_to(t: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        device = _device_named(args, kwargs, follow_tensors=False)
        if device is not None:
            moves.record(t, device, _non_blocking(args, kwargs))
        return original_to(t, *args, **kwargs)

    def tensor_cpu(t: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        moves.record(t, torch.device("cpu"), False)
        return original_cpu(t, *args, **kwargs)

    def module_to(module: nn.Module, *args: Any, **kwargs: Any) -> nn.Module:
        device = _device_named(args, kwargs, follow_tensors=False)
        if device is not None:
            moves.record(module, device, _non_blocking(args, kwargs))
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
    """True when two devices are the same place: a device without an index (``cuda``) matches every index of its type
    (``cuda:0``, ``cuda:1``), since a grader's answers use one device per type."""
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


def grad_enabled_after(run: Callable[[], Any]) -> bool:
    """Whether autograd is still on after ``run()``, called with it on. An answer that switches it off with a plain
    ``torch.set_grad_enabled(False)`` leaves every later training step without a graph. Autograd is switched back on
    afterwards either way (also when ``run`` raises), so a failing answer cannot cost the cells below it."""
    torch.set_grad_enabled(True)
    try:
        run()
        return torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)


@contextmanager
def recording_op_dtypes(names: set[str] | list[str] | tuple[str, ...]) -> Iterator[list[tuple[str, torch.dtype]]]:
    """Record each call of the named ATen ops (e.g. ``"nll_loss_forward"``) with its first tensor input's dtype.

    The ops are seen below autocast, so the dtype is the one the op ran in, whatever Python spelling reached it
    (``F.cross_entropy``, ``nn.CrossEntropyLoss``, ``F.nll_loss(F.log_softmax(...))``, a function imported by name).
    Names are ATen overload packets, without ``aten.`` or an overload suffix. Pick an op every correct spelling
    reaches: on the CPU ``log_softmax`` alone is not on autocast's fp32 list, ``nll_loss`` is. Only this process's
    ops are seen (not a worker's).
    """
    if isinstance(names, str):
        raise TypeError(f"names must be a collection of op names, not the string {names!r}: write {{{names!r}}}")
    seen: list[tuple[str, torch.dtype]] = []
    with _OpDtypes(set(names), seen):
        yield seen


def _global_names_read(answer: types.FunctionType) -> set[str]:
    """Global names the answer's code reads: its own, its nested functions', and those of the functions it calls
    that live in the same namespace (a helper the learner wrote beside it)."""
    namespace, names, seen, codes = answer.__globals__, set(), {answer}, [answer.__code__]
    while codes:
        code = codes.pop()
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        for name in code.co_names:
            names.add(name)
            obj = namespace.get(name)
            if isinstance(obj, types.FunctionType) and obj.__globals__ is namespace and obj not in seen:
                seen.add(obj)
                codes.append(obj.__code__)
    return names


@contextmanager
def replacing(answer: Callable, *patches: tuple[Any, str, Any]) -> Iterator[None]:
    """While active, replace ``module.name`` by ``fake`` for each ``(module, name, fake)``, and every global name the
    answer's code reads that is bound to the same object (``from os import fsync``, ``from torch import save as s``).

    Only names the answer reads are swapped, so a test's own reference to the real function (``_real_save =
    torch.save``, called inside the fake) stays real. Everything is restored on exit, also when the answer raises.
    """
    answer = inspect.unwrap(answer)              # a decorated answer (@torch.no_grad()): the learner's own function
    if not isinstance(answer, types.FunctionType):
        raise TypeError("answer must be the learner's function (its globals are searched), "
                        f"not {type(answer).__name__}")
    namespace, read = answer.__globals__, _global_names_read(answer)
    swapped: dict[str, Any] = {}
    with ExitStack() as stack:
        try:
            for module, name, fake in patches:
                real = getattr(module, name)
                stack.enter_context(mock.patch.object(module, name, fake))
                for key in read:
                    if key in namespace and namespace[key] is real:
                        swapped.setdefault(key, real)
                        namespace[key] = fake
            yield
        finally:
            namespace.update(swapped)


class _StopAtAutocast(Exception):
    """Raised by the fake autocast: the answer's run ends where its device choice is made."""


class CudaLikeRun:
    """What :func:`as_if_on_cuda` saw: the ``device_type`` each autocast entry asked for and the device type of each
    ``Tensor.to(...)`` call that names a device or another tensor's, in order (``"cuda"``, ``"cpu"``, ...)."""

    def __init__(self) -> None:
        self.autocast_device_types: list[str] = []
        self.move_targets: list[str] = []

    @staticmethod
    def tensor(t: torch.Tensor) -> torch.Tensor:
        """``t`` on the simulated GPU (:mod:`instructor.simulated_cuda`): a batch already on cuda."""
        return on_simulated_cuda(t)


class _RecordingMoves(simulating_cuda):
    """:class:`simulating_cuda` that also records the device type each ``Tensor.to(...)`` names."""

    def __init__(self, run: CudaLikeRun) -> None:
        super().__init__()
        self.run = run

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") == "to" and args and isinstance(args[0], torch.Tensor):
            device = _device_named(args[1:], kwargs or {})
            if device is not None:
                self.run.move_targets.append(device.type)
        return super().__torch_function__(func, types, args, kwargs)


@contextmanager
def as_if_on_cuda(answer: Callable, model: nn.Module) -> Iterator[CudaLikeRun]:
    """Run an answer as if ``model`` lived on a CUDA device, on a CPU-only grader, and stop it at its first autocast.

    On a CPU the device an answer reads and the device it hard-codes are both "cpu", so a choice made from the wrong
    one passes unseen. While active, the run is on :mod:`instructor.simulated_cuda`'s simulated GPU: ``model``'s
    parameters (swapped in place and put back on exit: build optimizers inside the block), every tensor moved
    ``.to("cuda")`` and every tensor made with ``device="cuda"`` keep their CPU values and report ``cuda:0``; the
    tensors (not the parameters, which only report it) follow CUDA's device rules, so give the answer batches made
    with ``CudaLikeRun.tensor(t)``: a forward pass on a batch left on the CPU is not refused. The answer's
    ``torch.autocast``/``torch.amp.autocast`` (also imported by name, see :func:`replacing`) records its
    ``device_type`` and ends the run, so the block exits normally there::

        with as_if_on_cuda(amp_train_step, model) as run:
            amp_train_step(model, run.tensor(x), run.tensor(y), torch.optim.SGD(model.parameters()), ...)
        assert run.autocast_device_types == ["cuda"]
    """
    run = CudaLikeRun()
    originals = [(module, name, param) for module in model.modules()
                 for name, param in module._parameters.items() if param is not None]
    for module, name, param in originals:
        module._parameters[name] = on_simulated_cuda(param)

    def fake_autocast(*args: Any, **kwargs: Any) -> None:
        run.autocast_device_types.append(str(kwargs.get("device_type", args[0] if args else None)))
        raise _StopAtAutocast

    try:
        with replacing(answer, (torch, "autocast", fake_autocast), (torch.amp, "autocast", fake_autocast)), \
                _RecordingMoves(run):
            yield run
    except _StopAtAutocast:
        pass
    finally:
        for module, name, param in originals:         # the model's own parameters again (their values untouched)
            module._parameters[name] = param

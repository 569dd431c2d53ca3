"""A simulated CUDA device for CPU graders: tensors that stay on the CPU but follow CUDA's device rules.

On a CPU-only grader an answer that mixes devices (labels left on the CPU beside predictions on the GPU, a mask made
on the GPU indexing a CPU tensor) runs fine, and fails on the learner's first GPU. Tensors made with
:func:`on_simulated_cuda` report ``device`` ``cuda:0``, keep their CPU values, and raise what CUDA raises when an op
mixes them with CPU tensors (a 0-d CPU tensor, like a Python number, may join them as an input of an element-wise
op, as on CUDA, but not of ``torch.cat``/``torch.stack``, and never receives their result in place:
``cpu_total += gpu_loss`` fails), and ``.numpy()``/``np.asarray`` refuse them as CUDA does::

    from instructor.simulated_cuda import on_simulated_cuda, simulating_cuda
    logits = on_simulated_cuda(torch.randn(4, 3))
    with simulating_cuda():
        (logits.argmax(1) == labels)                  # RuntimeError: labels are on the CPU
        (logits.argmax(1) == labels.to(logits.device)).cpu()   # fine: a plain CPU tensor again

``.cpu()``/``.to("cpu")`` gives a plain tensor. Not simulated: CUDA's limit of one CPU scalar per element-wise op (the
simulation accepts several), and CUDA's refusal of a 0-d CPU tensor in ops that are not element-wise other than
``cat``/``stack`` (``index_select``, ``embedding``: accepted here). A parameter made with :func:`on_simulated_cuda`
only reports ``cuda:0``: ops on it alone give plain CPU tensors; the rules apply where a simulated tensor (a batch) is
an input too. Inside ``with simulating_cuda():`` a CPU tensor sent to CUDA (``.to("cuda")``, ``.cuda()``) and a tensor
made there (``torch.zeros(..., device="cuda")``) become simulated ones instead of failing on a machine without a GPU.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

__all__ = ["on_simulated_cuda", "is_on_simulated_cuda", "simulating_cuda", "SIMULATED"]

SIMULATED = torch.device("cuda", 0)
_INDEXING = {"__getitem__", "__setitem__", "index"}   # not index_select/masked_select: they check devices
_IN_PLACE = {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
             "__imatmul__", "__iand__", "__ior__", "__ixor__"}


def _device_named(args: tuple, kwargs: dict, *, follow_tensors: bool = True) -> torch.device | None:
    """The device a ``.to(...)`` call names (positionally or as ``device=``; an int is an accelerator index), the
    other tensor's device for ``.to(other)`` when ``follow_tensors``, else None (``.to(dtype)``)."""
    target = kwargs.get("device", args[0] if args else None)
    if isinstance(target, (str, torch.device)) or (isinstance(target, int) and not isinstance(target, bool)):
        return torch.device(target)
    if follow_tensors and isinstance(target, torch.Tensor):   # x.to(other): other's device
        return target.device
    return None


def _plain(t: Any) -> Any:
    if isinstance(t, _SimulatedCuda):
        with torch._C.DisableTorchFunctionSubclass():
            return t.as_subclass(torch.Tensor)
    return t


def _simulated(t: Any) -> Any:
    return t.as_subclass(_SimulatedCuda) if isinstance(t, torch.Tensor) and not isinstance(t, torch.nn.Parameter) \
        else t


_MOVES = {"to", "cuda", "cpu"}
_NO_CPU_SCALARS = {"cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack"}   # not element-wise
_TO_NUMPY = {"numpy", "__array__"}


def _move(name: str, args: tuple, kwargs: dict) -> torch.Tensor:
    """``args[0].to(...)``/``.cuda()``/``.cpu()`` with a CUDA target simulated: the values stay on the CPU."""
    self, rest = args[0], args[1:]
    target = torch.device("cpu") if name == "cpu" else SIMULATED if name == "cuda" else _device_named(rest, kwargs)
    if name == "to":
        if "device" in kwargs:
            kwargs = {k: v for k, v in kwargs.items() if k != "device"}
        elif target is not None:
            if isinstance(rest[0], torch.Tensor):          # x.to(other): other's dtype too
                kwargs = {**kwargs, "dtype": rest[0].dtype}
            rest = rest[1:]
    else:
        rest, kwargs = (), {k: v for k, v in kwargs.items() if k == "memory_format"}
    plain = _plain(self)
    with torch._C.DisableTorchFunctionSubclass():
        moved = plain.to(*rest, **kwargs) if (rest or kwargs) else plain
    on_cuda = target.type == "cuda" if target is not None else isinstance(self, _SimulatedCuda)
    return _simulated(moved) if on_cuda else moved


class _ReportsSimulatedCuda:
    """What a tensor and a parameter on the simulated GPU both report: ``device`` ``cuda:0`` and ``is_cuda``."""

    @property
    def device(self) -> torch.device:
        return SIMULATED

    @property
    def is_cuda(self) -> bool:
        return True


class _SimulatedCuda(_ReportsSimulatedCuda, torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in _MOVES:
            return _move(name, args, kwargs)
        if name in _TO_NUMPY:
            raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to "
                            "host memory first.")
        if name == "copy_":                  # a copy between devices is legal; the result is where self is
            with torch._C.DisableTorchFunctionSubclass():
                _plain(args[0]).copy_(_plain(args[1]), *args[2:], **kwargs)
            return args[0]
        leaves = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        on_cpu = [t for t in leaves if not is_on_simulated_cuda(t)]
        if name == "__setitem__" or (name in _INDEXING and args and is_on_simulated_cuda(args[0])):
            on_cpu = []                  # CUDA accepts CPU indices into a CUDA tensor; a slice assignment copies
        in_place = name in _IN_PLACE or (name.endswith("_") and not name.startswith("_"))
        written = args[0] if in_place and args else kwargs.get("out")
        if isinstance(written, torch.Tensor) and not is_on_simulated_cuda(written) and len(on_cpu) < len(leaves):
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"cuda:0 and cpu! (in {name}: a GPU value written into a CPU tensor, which CUDA "
                               "refuses even for a 0-d one)")
        if any(t.dim() > 0 or name in _NO_CPU_SCALARS for t in on_cpu):
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"cuda:0 and cpu! (in {name or func}: a tensor on the simulated GPU met a CPU tensor)")
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*tree_map(_plain, args), **tree_map(_plain, kwargs))
        return tree_map(_simulated, out)


class _SimulatedCudaParameter(_ReportsSimulatedCuda, torch.nn.Parameter):
    """A parameter that reports ``cuda:0`` (ops on it run as plain CPU ops: its model decides what it returns)."""


def on_simulated_cuda(t: torch.Tensor) -> torch.Tensor:
    """``t`` (a CPU tensor) as if it lived on ``cuda:0``: same values, CUDA's device rules; a parameter stays one
    and only reports ``cuda:0`` (ops on it alone give plain CPU tensors)."""
    if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
        raise TypeError(f"on_simulated_cuda takes a CPU tensor, got {type(t).__name__} on "
                        f"{getattr(t, 'device', None)}")
    if isinstance(t, torch.nn.Parameter):
        return _SimulatedCudaParameter(t.detach(), requires_grad=t.requires_grad)
    return t.as_subclass(_SimulatedCuda)


def is_on_simulated_cuda(t: Any) -> bool:
    """True for a tensor made by :func:`on_simulated_cuda` (or computed from one that is not a parameter)."""
    return isinstance(t, (_SimulatedCuda, _SimulatedCudaParameter))


class simulating_cuda(TorchFunctionMode):
    """While active, CPU tensors sent to CUDA (``.to("cuda")``, ``.to(logits.device)``, ``.cuda()``) and tensors made
    on it (``torch.zeros(..., device="cuda")``) become simulated ones, on a machine without a GPU."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in _MOVES and args and isinstance(args[0], torch.Tensor):
            target = SIMULATED if name == "cuda" else torch.device("cpu") if name == "cpu" \
                else _device_named(args[1:], kwargs)
            if is_on_simulated_cuda(args[0]) or (target is not None and target.type == "cuda"):
                return _move(name, args, kwargs)
            return func(*args, **kwargs)
        device = kwargs.get("device")
        if device is not None and torch.device(device).type == "cuda":
            return _simulated(func(*args, **{**kwargs, "device": "cpu"}))
        return func(*args, **kwargs)

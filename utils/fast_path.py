"""Fast-path knobs: the global backend flags and per-object options that make training faster on a GPU.

:func:`plan_fast_path` decides, from a description of the device and the workload, which knobs to turn on and why
(a pure function: it reads and changes no global state). :func:`apply_fast_path` applies that plan to the torch
backends of *this* process and returns what it set, what it skipped, and why. :func:`fast_path_flags` and
:func:`restore_fast_path_flags` snapshot and restore the global flags, so a notebook can try a knob and undo it.

The knobs:

- ``cudnn_benchmark``: ``torch.backends.cudnn.benchmark``. cuDNN times several convolution algorithms for each new
  input shape and keeps the fastest. CUDA only; wasteful when input shapes vary (it re-tunes for every new shape).
- ``tf32``: ``torch.backends.cuda.matmul.fp32_precision`` and ``torch.backends.cudnn.conv.fp32_precision``
  (``"tf32"`` or ``"ieee"``; the legacy ``allow_tf32`` flags and ``torch.set_float32_matmul_precision`` are kept in
  agreement by :mod:`utils.tf32`): fp32 matmuls and convolutions on TF32 tensor cores (10-bit mantissa). Needs
  compute capability >= 8.0 (Ampere); on older GPUs and on CPUs the switches change nothing.
- ``channels_last``: NHWC memory format for 4-D activations and conv weights; tensor cores (compute capability
  >= 7.0) read NHWC natively, so NCHW costs transposes. Only for convolutional models.
- ``optimizer_impl``: ``"fused"`` (one kernel for the whole update; CUDA, and CPU since PyTorch 2.4), ``"foreach"`` (multi-tensor ops, fewer
  launches) or ``"for-loop"`` (one small op per parameter and per step of the formula).
- ``pin_memory``: page-locked host buffers in the DataLoader, which make ``.to(device, non_blocking=True)`` a real
  asynchronous copy. Needs CUDA; without an accelerator torch ignores it with a warning.
- ``set_to_none``: ``optimizer.zero_grad(set_to_none=True)``; the default since PyTorch 2.0 on every device.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .tf32 import restore_tf32_flags, set_tf32, tf32_flags

__all__ = ["FastPathDecision", "plan_fast_path", "apply_fast_path", "fast_path_flags", "restore_fast_path_flags",
           "multi_tensor_apply_launches"]

TF32_MIN_CAPABILITY = (8, 0)
TENSOR_CORE_MIN_CAPABILITY = (7, 0)


@dataclass(frozen=True)
class FastPathDecision:
    """One knob: the value chosen and the reason, in words."""

    value: Any
    why: str


def plan_fast_path(device_type: str, compute_capability: tuple[int, int] | None = None, *,
                   variable_input_shapes: bool = False, conv_model: bool = True) -> dict[str, FastPathDecision]:
    """Choose the fast-path knobs for a described device and workload, without touching any global state.

    Args:
        device_type: ``"cpu"``, ``"cuda"`` or ``"mps"``.
        compute_capability: ``(major, minor)`` of the CUDA device (e.g. ``(8, 0)`` for an A100); ignored off CUDA.
            ``None`` on CUDA is treated as "unknown": no TF32 and no channels_last.
        variable_input_shapes: the input shape changes from step to step (variable image sizes or sequence
            lengths). One smaller last batch per epoch costs one extra tuning run and does not count.
        conv_model: the model is mostly 2-D convolutions (channels_last only helps those).

    Returns:
        ``{knob: FastPathDecision}`` for the knobs listed in the module docstring.
    """
    if device_type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device_type must be 'cpu', 'cuda' or 'mps', got {device_type!r}")
    cuda = device_type == "cuda"
    cc = tuple(compute_capability) if (cuda and compute_capability is not None) else None
    plan: dict[str, FastPathDecision] = {}

    if not cuda:
        plan["cudnn_benchmark"] = FastPathDecision(False, f"cuDNN is a CUDA library; no effect on {device_type}")
    elif variable_input_shapes:
        plan["cudnn_benchmark"] = FastPathDecision(False, "input shapes vary: cuDNN would re-tune for every new shape")
    elif not conv_model:
        plan["cudnn_benchmark"] = FastPathDecision(False, "no convolutions: nothing for cuDNN to tune")
    else:
        plan["cudnn_benchmark"] = FastPathDecision(True, "fixed shapes: tune each convolution once, reuse the fastest")

    if not cuda:
        plan["tf32"] = FastPathDecision(False, f"TF32 is an NVIDIA tensor-core format; no effect on {device_type}")
    elif cc is None or cc < TF32_MIN_CAPABILITY:
        plan["tf32"] = FastPathDecision(False, f"compute capability {cc} < 8.0: no TF32 tensor cores")
    else:
        plan["tf32"] = FastPathDecision(True, f"compute capability {cc} >= 8.0: fp32 matmul/conv on TF32 tensor cores")

    if not conv_model:
        plan["channels_last"] = FastPathDecision(False, "no 2-D convolutions: memory format does not matter")
    elif not cuda:
        plan["channels_last"] = FastPathDecision(False, f"no tensor cores on {device_type}: measure before using it")
    elif cc is None or cc < TENSOR_CORE_MIN_CAPABILITY:
        plan["channels_last"] = FastPathDecision(False, f"compute capability {cc} < 7.0: no tensor cores")
    else:
        plan["channels_last"] = FastPathDecision(True, "tensor cores read NHWC natively: no transposes per conv")

    if cuda:
        plan["optimizer_impl"] = FastPathDecision("fused", "CUDA: one fused kernel for the whole update")
    elif device_type == "cpu":
        plan["optimizer_impl"] = FastPathDecision("fused", "CPU: fused Adam/AdamW/SGD kernels exist since PyTorch "
                                                           "2.4 (one vectorised loop per tensor)")
    else:
        plan["optimizer_impl"] = FastPathDecision("foreach", f"{device_type}: multi-tensor ops (fused kernels are "
                                                            "not available for every optimizer here)")

    plan["pin_memory"] = FastPathDecision(cuda, "page-locked buffers make non_blocking copies asynchronous" if cuda
                                          else f"no CUDA host-to-device copy on {device_type}")
    plan["set_to_none"] = FastPathDecision(True, "free gradients instead of writing zeros (default since 2.0)")
    return plan


#: ``ATen/native/cuda/MultiTensorApply.cuh``: elements per block ("chunk"), and per launch the most tensors (by the
#: number of lists an op reads and writes, its "depth", 1 to 5) and blocks; CUDA 13 builds allow larger launches.
MTA_CHUNK_ELEMENTS = 65_536
MTA_MAX_TENSORS = {12: (110, 64, 48, 36, 30), 13: (770, 448, 336, 252, 210)}
MTA_MAX_BLOCKS = {12: 320, 13: 2240}


def multi_tensor_apply_launches(numels: list[int], depth: int, cuda_major: int | None = None) -> int:
    """Kernel launches of one CUDA ``_foreach_*`` (or fused optimizer) call over tensors of ``numels`` elements.

    Replays ``multi_tensor_apply``'s loop: tensors are packed into a launch chunk by chunk (``MTA_CHUNK_ELEMENTS``
    each) until the launch holds its most tensors (a tensor counts once all its chunks are in) or its most blocks;
    the rest goes into the next launch. ``depth`` is the number of tensor lists the op touches (``_foreach_mul_(xs,
    s)``: 1; ``_foreach_add_(xs, ys)``: 2). ``cuda_major`` picks the limits (default: this build's CUDA, else 12).
    """
    if not 1 <= depth <= 5:
        raise ValueError(f"depth is 1 to 5 tensor lists, got {depth}")
    if cuda_major is None:
        cuda_major = int(torch.version.cuda.split(".")[0]) if torch.version.cuda else 12
    limits = 13 if cuda_major >= 13 else 12
    max_tensors, max_blocks = MTA_MAX_TENSORS[limits][depth - 1], MTA_MAX_BLOCKS[limits]
    launches = tensors = blocks = 0
    for numel in numels:
        if numel == 0:
            continue
        tensors += 1
        chunks = -(-numel // MTA_CHUNK_ELEMENTS)
        for chunk in range(chunks):
            blocks += 1
            last_chunk = chunk == chunks - 1
            if (tensors == max_tensors and last_chunk) or blocks == max_blocks:
                launches += 1
                blocks = 0
                tensors = 0 if last_chunk else 1
    return launches + (1 if blocks else 0)


def fast_path_flags() -> dict[str, Any]:
    """Snapshot of the global backend flags that :func:`apply_fast_path` may change: ``cudnn.benchmark`` and every
    TF32 switch (:func:`utils.tf32.tf32_flags`)."""
    return {"cudnn.benchmark": torch.backends.cudnn.benchmark, **tf32_flags()}


def restore_fast_path_flags(flags: dict[str, Any]) -> None:
    """Restore a snapshot taken with :func:`fast_path_flags`."""
    if "cudnn.benchmark" not in flags:
        raise KeyError("not a fast_path_flags() snapshot: no 'cudnn.benchmark' key")
    torch.backends.cudnn.benchmark = flags["cudnn.benchmark"]
    restore_tf32_flags(flags)


def apply_fast_path(device: torch.device | str, *, variable_input_shapes: bool = False, conv_model: bool = True,
                    tf32: bool = True) -> dict[str, dict[str, Any]]:
    """Apply :func:`plan_fast_path` for ``device`` to this process's torch backends.

    Sets ``cudnn.benchmark`` and the TF32 flags (only where they apply: on a CPU both are left as they are).
    ``tf32=False`` keeps full fp32 even on Ampere+ (for numerics checks). The per-object knobs
    (``channels_last``, ``optimizer_impl``, ``pin_memory``, ``set_to_none``) cannot be set globally: they are
    returned for the caller to use.

    Returns:
        ``{knob: {"value": ..., "applied": bool, "why": str}}``; ``applied`` is True only for global flags that
        this call actually set.
    """
    device = torch.device(device)
    cc = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    plan = plan_fast_path(device.type, cc, variable_input_shapes=variable_input_shapes, conv_model=conv_model)
    report: dict[str, dict[str, Any]] = {}
    for knob, decision in plan.items():
        report[knob] = {"value": decision.value, "applied": False, "why": decision.why}

    if device.type == "cuda":
        torch.backends.cudnn.benchmark = bool(plan["cudnn_benchmark"].value)
        report["cudnn_benchmark"]["applied"] = True
        use_tf32 = bool(plan["tf32"].value) and tf32
        set_tf32(use_tf32)
        report["tf32"].update(value=use_tf32, applied=True)
        if plan["tf32"].value and not tf32:
            report["tf32"]["why"] = "TF32 available but turned off by the caller (tf32=False)"
    return report


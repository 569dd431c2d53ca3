"""Mixed precision: which 16-bit type to use on a device, the loss scaler it needs, and the autocast context.

- bf16 is chosen on CUDA only where the GPU has bf16 tensor cores (compute capability 8.0, Ampere, or newer).
  ``torch.cuda.is_bf16_supported()`` also answers yes on older GPUs that *emulate* bf16 (a T4, sm_75): there bf16
  runs without tensor cores, slower than fp32, and fp16 with a ``GradScaler`` is the fast choice.
- No AMP means no autocast context at all: even a disabled one measurably slows CPU training steps (about 5 % for
  ResNet50 at 32 px on the course's CI machine, ``benchmarks/loop_overhead.py``).
"""
from __future__ import annotations

import contextlib
from typing import ContextManager

import torch

#: The first compute capability with bf16 tensor cores (NVIDIA Ampere).
BF16_MIN_CAPABILITY = (8, 0)

_BY_NAME = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
            torch.bfloat16: torch.bfloat16, torch.float16: torch.float16}


def has_native_bf16(device: torch.device | str) -> bool:
    """True when ``device`` computes bf16 in hardware: any CPU (autocast supports it; it is fast with AVX512-BF16 or
    AMX), a CUDA GPU of compute capability >= 8.0, an AMD GPU under ROCm. False for MPS and for older CUDA GPUs."""
    dev = torch.device(device)
    if dev.type == "cpu":
        return True
    if dev.type != "cuda" or not torch.cuda.is_available():
        return False
    if torch.version.hip:
        return True
    return tuple(torch.cuda.get_device_capability(dev)) >= BF16_MIN_CAPABILITY


def resolve_amp(amp: bool | str | torch.dtype | None, device: torch.device | str) -> torch.dtype | None:
    """The autocast dtype for ``amp`` on ``device``, or ``None`` for full fp32.

    ``amp`` may be ``False``/``None``/``"off"`` (fp32), ``True`` or ``"auto"`` (bf16 where :func:`has_native_bf16`,
    else fp16), ``"bf16"``/``"fp16"`` or a torch dtype.
    """
    dev = torch.device(device)
    if amp is None or amp is False or amp == "off":
        return None
    if amp is True or amp == "auto":
        return torch.bfloat16 if has_native_bf16(dev) else torch.float16
    if amp not in _BY_NAME:
        raise ValueError(f"amp must be False, True, 'auto', 'bf16' or 'fp16', got {amp!r}")
    dtype = _BY_NAME[amp]
    if dtype == torch.float16 and dev.type == "cpu":
        raise ValueError("fp16 autocast on the CPU is slow and poorly supported: use amp='bf16' on the CPU.")
    return dtype


def make_grad_scaler(amp_dtype: torch.dtype | None, device: torch.device | str) -> torch.amp.GradScaler | None:
    """A ``GradScaler`` when training in fp16 (whose small range needs loss scaling); ``None`` otherwise."""
    if amp_dtype == torch.float16:
        return torch.amp.GradScaler(torch.device(device).type)
    return None


def autocast_context(device_type: str, amp_dtype: torch.dtype | None) -> ContextManager:
    """``torch.autocast(device_type, dtype=amp_dtype)``, or a no-op context when ``amp_dtype`` is ``None``."""
    if amp_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=amp_dtype)

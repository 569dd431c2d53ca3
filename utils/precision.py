"""Mixed precision: which 16-bit type to use on a device, the loss scaler it needs, and the autocast context.

- bf16 is chosen on CUDA only where the GPU has bf16 tensor cores (compute capability 8.0, Ampere, or newer).
  ``torch.cuda.is_bf16_supported()`` also answers yes on older GPUs that *emulate* bf16 (a T4, sm_75): there bf16
  runs without tensor cores, slower than fp32, and fp16 with a ``GradScaler`` is the fast choice.
- No AMP means no autocast context at all (``contextlib.nullcontext``), so an fp32 step runs exactly the code of a loop
  written without AMP. (A disabled ``torch.autocast`` would cost little: it only sets thread-local flags, a few
  microseconds per step, and every operation inside runs the same kernel.)
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
    """True when bf16 is the 16-bit type to train with on ``device``: a CUDA GPU of compute capability >= 8.0 (bf16
    tensor cores), an AMD GPU under ROCm, and any CPU, because CPU autocast supports bf16 well and fp16 poorly. It
    says nothing about a CPU's arithmetic units: bf16 is *fast* only on CPUs with AVX512-BF16 or AMX
    (:func:`cpu_bf16_units`), and slower than fp32 on x86 CPUs without them (ARM64 CPUs with the BF16 extension, such
    as Graviton3, have bf16 matrix instructions of their own: not measured here). False for MPS and for older CUDA
    GPUs (a T4 emulates bf16: ``torch.cuda.is_bf16_supported()`` says yes there,
    ``is_bf16_supported(including_emulation=False)`` no)."""
    dev = torch.device(device)
    if dev.type == "cpu":
        return True
    if dev.type != "cuda" or not torch.cuda.is_available():
        return False
    if torch.version.hip:
        return True
    return tuple(torch.cuda.get_device_capability(dev)) >= BF16_MIN_CAPABILITY


def cpu_bf16_units() -> dict[str, bool]:
    """Which bf16 instructions this CPU has, as PyTorch detects them: ``"avx512_bf16"`` (bf16 dot products, Intel
    Cooper Lake and Sapphire Rapids, AMD Zen 4 and newer) and ``"amx_bf16"`` (AMX tile matrix units, Intel Sapphire
    Rapids and newer). Both ``False`` where this PyTorch cannot tell (a build without the probes) and on a non-x86
    CPU: an ARM64 CPU's bf16 instructions show as ``get_capabilities()["bf16"]`` / ``["sve_bf16"]``, which this
    function does not read."""
    get_capabilities = getattr(torch.cpu, "get_capabilities", None)   # recent PyTorch only (2.11 and 2.14 have it)
    try:
        caps = get_capabilities() if get_capabilities is not None else {}
    except RuntimeError:
        caps = {}
    return {"avx512_bf16": bool(caps.get("avx512_bf16", False)), "amx_bf16": bool(caps.get("amx_bf16", False))}


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

"""TF32 switches: read them, set them, and switch TF32 off for fp32 references, consistently across both APIs.

On NVIDIA GPUs of compute capability 8.0 and newer (Ampere, Hopper, ...) fp32 matmuls and convolutions can run on
tensor cores in TF32 (fp32's 8-bit exponent, a 10-bit mantissa). PyTorch has two ways to ask for it:

===============================================  ===========================================================
new API (PyTorch >= 2.9, documented)             legacy API (still works)
===============================================  ===========================================================
``torch.backends.cuda.matmul.fp32_precision``    ``torch.backends.cuda.matmul.allow_tf32`` and
  ``"tf32"`` or ``"ieee"`` (cuBLAS matmuls)        ``torch.set_float32_matmul_precision("high"/"highest")``
``torch.backends.cudnn.conv.fp32_precision``     ``torch.backends.cudnn.allow_tf32`` (convolutions *and* RNNs)
``torch.backends.cudnn.rnn.fp32_precision``
===============================================  ===========================================================

Defaults: matmuls in full fp32, cuDNN convolutions and RNNs in TF32. So on an Ampere-or-newer GPU an "fp32"
convolution is a TF32 convolution unless you switch it off.

The two APIs share state but are checked against each other: after ``torch.backends.cuda.matmul.fp32_precision =
"tf32"`` alone, reading ``torch.backends.cuda.matmul.allow_tf32`` or ``torch.get_float32_matmul_precision()``
raises ``RuntimeError`` ("you have used mix of the legacy and new APIs"), and parts of ``torch.compile`` read the
legacy getters. The functions here therefore write both APIs so that every getter stays readable and agrees.
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Any, Iterator

import torch

__all__ = ["has_fp32_precision_api", "tf32_flags", "tf32_in_use", "set_tf32", "restore_tf32_flags", "tf32_disabled"]

# New-API switches this module reads and writes, as (name, backend module, attribute holder).
_NEW_API = {
    "cuda.matmul.fp32_precision": lambda: torch.backends.cuda.matmul,
    "mkldnn.matmul.fp32_precision": lambda: torch.backends.mkldnn.matmul,   # set_float32_matmul_precision sets it
    "cudnn.conv.fp32_precision": lambda: torch.backends.cudnn.conv,
    "cudnn.rnn.fp32_precision": lambda: torch.backends.cudnn.rnn,
}
_LEGACY = {
    "float32_matmul_precision": torch.get_float32_matmul_precision,
    "cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
    "cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
}


def has_fp32_precision_api() -> bool:
    """True when this PyTorch has the ``fp32_precision`` switches (2.9 and newer)."""
    try:
        return all(isinstance(getattr(holder(), "fp32_precision"), str) for holder in _NEW_API.values())
    except AttributeError:
        return False


def _read_legacy(name: str) -> Any:
    try:
        return _LEGACY[name]()
    except RuntimeError:  # the two APIs disagree: torch refuses to answer with the legacy getter
        return None


def tf32_flags() -> dict[str, Any]:
    """Snapshot of every TF32 switch, for :func:`restore_tf32_flags`. A legacy value that torch refuses to read
    (the APIs were mixed inconsistently before this call) is ``None``."""
    flags = {name: _read_legacy(name) for name in _LEGACY}
    if has_fp32_precision_api():
        flags.update({name: holder().fp32_precision for name, holder in _NEW_API.items()})
    return flags


def tf32_in_use() -> dict[str, bool]:
    """Whether fp32 ``"matmul"`` (cuBLAS) and ``"conv"`` (cuDNN) may use TF32 on a GPU that has it, read from the
    new API where it exists (it never raises), else from the legacy flags."""
    if has_fp32_precision_api():
        return {"matmul": torch.backends.cuda.matmul.fp32_precision == "tf32",
                "conv": torch.backends.cudnn.conv.fp32_precision == "tf32"}
    return {"matmul": bool(torch.backends.cuda.matmul.allow_tf32), "conv": bool(torch.backends.cudnn.allow_tf32)}


@contextmanager
def _quiet_legacy_warning() -> Iterator[None]:
    # Some PyTorch builds warn once when a legacy setter is used (2.11 and 2.14 do not); here the use is deliberate
    # (it keeps the getters in sync), so such a warning would only be noise.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*new API settings to control TF32.*")
        yield


def set_tf32(enabled: bool) -> None:
    """Allow (``True``) or forbid (``False``) TF32 for fp32 matmuls, convolutions and RNNs on CUDA.

    Writes the new API (``"tf32"``/``"ieee"``) and the legacy flags to the same answer, so that neither family of
    getters raises afterwards. ``torch.set_float32_matmul_precision`` is used for the legacy side ("high" allows
    TF32, "highest" forbids it); note that it also sets the oneDNN (CPU) matmul precision the same way. Changes no
    numerics on a CPU without TF32 units or on a GPU older than compute capability 8.0.
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be True or False, got {enabled!r}")
    with _quiet_legacy_warning():
        torch.set_float32_matmul_precision("high" if enabled else "highest")
        torch.backends.cudnn.allow_tf32 = enabled
    if has_fp32_precision_api():
        precision = "tf32" if enabled else "ieee"
        torch.backends.cuda.matmul.fp32_precision = precision
        torch.backends.cudnn.conv.fp32_precision = precision
        torch.backends.cudnn.rnn.fp32_precision = precision


def restore_tf32_flags(flags: dict[str, Any]) -> None:
    """Restore a snapshot taken with :func:`tf32_flags`: legacy values first (their setters also write the new
    API), then the new-API values, so every getter reads what it read when the snapshot was taken."""
    missing = [k for k in _LEGACY if k not in flags]
    if missing:
        raise KeyError(f"not a tf32_flags() snapshot: missing {missing}")
    with _quiet_legacy_warning():
        if flags["float32_matmul_precision"] is not None:
            torch.set_float32_matmul_precision(flags["float32_matmul_precision"])
        elif flags["cuda.matmul.allow_tf32"] is not None:
            torch.backends.cuda.matmul.allow_tf32 = flags["cuda.matmul.allow_tf32"]
        if flags["cudnn.allow_tf32"] is not None:
            torch.backends.cudnn.allow_tf32 = flags["cudnn.allow_tf32"]
    if has_fp32_precision_api():
        for name, holder in _NEW_API.items():
            if name in flags:
                holder().fp32_precision = flags[name]


@contextmanager
def tf32_disabled() -> Iterator[None]:
    """``with tf32_disabled(): reference = model(x)``: full IEEE fp32 matmuls, convolutions and RNNs inside the
    block, every switch restored afterwards (also after an exception).

    Use it to compute fp32 *references* on a GPU: with cuDNN's default TF32 convolutions, a CUDA model's logits
    can differ from a CPU fp32 run (ONNX Runtime, a CPU copy of the model) by more than a 1e-4 parity tolerance on
    an Ampere-or-newer GPU (TF32 keeps 10 significand bits: a relative rounding of up to about 5e-4 per input).
    """
    saved = tf32_flags()
    try:
        set_tf32(False)
        yield
    finally:
        restore_tf32_flags(saved)

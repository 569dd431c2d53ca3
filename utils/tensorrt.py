"""The optional TensorRT route of Day 30: detect Torch-TensorRT, compile a model for a range of batch sizes, and
compare every variant like with like.

TensorRT is not part of the course's default environment (``make setup TENSORRT=1`` installs the ``tensorrt`` extra
on a Linux machine with an NVIDIA GPU). :func:`tensorrt_status` says whether this run can use it and, if not, why.
:func:`compile_tensorrt` builds an engine through ``torch_tensorrt.compile(..., ir="dynamo")`` with explicit typing:
the engine computes in the dtype the PyTorch model has (a ``.half()`` copy gives an fp16 engine), so an fp16
engine is compared with eager fp16, an fp32 engine with eager fp32. :func:`compare_variants` times each variant end
to end (input already on the device, output synchronised) at one batch size and checks its outputs on real data
against one fp32 reference.

TF32 hides in both "fp32" sides on Ampere-or-newer GPUs: cuDNN runs PyTorch's fp32 convolutions in TF32 by default
(``torch.backends.cudnn.conv.fp32_precision == "tf32"``), and TensorRT may pick TF32 tactics for fp32 layers unless
the engine is built with ``disable_tf32=True`` (Torch-TensorRT's default is ``False``). So
:func:`compile_tensorrt` takes ``tf32`` explicitly, and :func:`compare_variants` sets PyTorch's TF32 switches per
variant while it runs and times that variant, restoring them afterwards.
"""
from __future__ import annotations

import copy
import importlib
from typing import Any, Callable, Mapping

import torch
from torch import nn

from .tf32 import restore_tf32_flags, set_tf32, tf32_flags
from .timing import time_fn

__all__ = ["tensorrt_status", "compile_tensorrt", "compare_variants"]


def tensorrt_status(device: torch.device | str) -> dict[str, Any]:
    """``{"usable": bool, "version": str | None, "reason": str}``: whether ``torch_tensorrt`` imports and
    ``device`` is a CUDA device. ``reason`` says what is missing (or ``"ready"``)."""
    dev = torch.device(device)
    try:
        trt = importlib.import_module("torch_tensorrt")
        version = str(getattr(trt, "__version__", "unknown"))
    except ModuleNotFoundError:
        return {"usable": False, "version": None,
                "reason": "torch_tensorrt is not installed (optional: make setup TENSORRT=1 on an NVIDIA GPU machine)"}
    except Exception as err:  # installed but broken: wrong CUDA or TensorRT libraries for this torch
        return {"usable": False, "version": None,
                "reason": f"torch_tensorrt is installed but does not import: {type(err).__name__}: {err}"}
    if dev.type != "cuda":
        return {"usable": False, "version": version, "reason": f"TensorRT needs an NVIDIA GPU; this run is on {dev}"}
    return {"usable": True, "version": version, "reason": "ready"}


def compile_tensorrt(model: nn.Module, *, sample_shape: tuple[int, ...], dtype: torch.dtype,
                     min_batch: int, opt_batch: int, max_batch: int, device: torch.device | str,
                     tf32: bool = False) -> nn.Module:
    """A TensorRT-compiled copy of ``model`` for inputs ``(batch, *sample_shape)`` of ``dtype``, with
    ``min_batch <= batch <= max_batch`` (tuned for ``opt_batch``). ``model`` itself is not modified.

    ``tf32``: allow TF32 tactics for fp32 layers (Torch-TensorRT's own default, ``disable_tf32=False``). The
    default here is ``False``, a true fp32 engine, the like of eager PyTorch under ``utils.tf32.tf32_disabled()``."""
    if not 1 <= min_batch <= opt_batch <= max_batch:
        raise ValueError(f"need 1 <= min_batch <= opt_batch <= max_batch, got {min_batch}, {opt_batch}, {max_batch}")
    import torch_tensorrt

    copy_in_dtype = copy.deepcopy(model).eval().to(device=torch.device(device), dtype=dtype)
    spec = torch_tensorrt.Input(min_shape=(min_batch, *sample_shape), opt_shape=(opt_batch, *sample_shape),
                                max_shape=(max_batch, *sample_shape), dtype=dtype)
    # Explicit typing: the engine keeps the model's dtypes instead of choosing its own per layer.
    return torch_tensorrt.compile(copy_in_dtype, ir="dynamo", inputs=[spec], use_explicit_typing=True,
                                  disable_tf32=not tf32)


#: One variant of :func:`compare_variants`: ``(fn, input dtype)`` or ``(fn, input dtype, tf32)``.
Variant = tuple  # tuple[Callable[[Tensor], Tensor], torch.dtype] | tuple[..., torch.dtype, bool | None]


def compare_variants(variants: Mapping[str, Variant], images: torch.Tensor, labels: torch.Tensor,
                     reference: torch.Tensor, *, device: torch.device | str, batch: int, repeats: int = 20,
                     max_batch: int | None = None) -> list[dict[str, Any]]:
    """Run every ``name -> (fn, input dtype[, tf32])`` on the same data and measure it the same way.

    ``tf32`` (optional): ``False`` runs and times the variant with TF32 off for PyTorch's fp32 matmuls and
    convolutions (:func:`utils.tf32.set_tf32`), ``True`` with TF32 on, ``None`` (or absent) leaves the switches as
    they are; they are restored after each variant. (A compiled engine's own precision is fixed when it is built.)

    - accuracy: ``fn`` over all ``images`` (in chunks of at most ``max_batch``), outputs compared with the fp32
      ``reference`` logits (``max_abs_diff``, ``argmax_agreement``) and with ``labels`` (``accuracy``);
    - speed: ``fn`` on the first ``batch`` images, already on the device in the input dtype, timed end to end with
      a synchronisation (``utils.time_fn``): ``median_ms`` and ``images_per_s``.

    Returns one dict per variant, in the given order.
    """
    dev = torch.device(device)
    if reference.shape[0] != images.shape[0] or labels.shape[0] != images.shape[0]:
        raise ValueError(f"images ({images.shape[0]}), labels ({labels.shape[0]}) and reference "
                         f"({reference.shape[0]}) must have the same length")
    if not 1 <= batch <= images.shape[0]:
        raise ValueError(f"batch must be between 1 and {images.shape[0]}, got {batch}")
    chunk = max_batch or images.shape[0]
    reference = reference.detach().float().cpu()
    rows = []
    for name, variant in variants.items():
        if len(variant) not in (2, 3):
            raise ValueError(f"variant {name!r}: expected (fn, dtype) or (fn, dtype, tf32), got {len(variant)} items")
        fn, dtype = variant[0], variant[1]
        tf32 = variant[2] if len(variant) == 3 else None
        saved = tf32_flags()
        try:
            if tf32 is not None:
                set_tf32(bool(tf32))
            with torch.inference_mode():
                outputs = torch.cat([fn(images[i:i + chunk].to(dev, dtype)).float().cpu()
                                     for i in range(0, images.shape[0], chunk)])
                x = images[:batch].to(dev, dtype)
                timing = time_fn(lambda: fn(x), device=dev, warmup=3, repeats=repeats)
        finally:
            restore_tf32_flags(saved)
        rows.append({"variant": name, "dtype": str(dtype).replace("torch.", ""), "tf32": tf32, "batch": batch,
                     "median_ms": timing.median_s * 1e3, "images_per_s": batch / timing.median_s,
                     "max_abs_diff": float((outputs - reference).abs().max()),
                     "argmax_agreement": float((outputs.argmax(1) == reference.argmax(1)).float().mean()),
                     "accuracy": float((outputs.argmax(1) == labels.cpu()).float().mean())})
    return rows

"""The optional TensorRT route of Day 30: detect Torch-TensorRT, compile a model for a range of batch sizes, and
compare every variant like with like.

TensorRT is not part of the course's default environment (``make setup TENSORRT=1`` installs the ``tensorrt`` extra
on a Linux machine with an NVIDIA GPU). :func:`tensorrt_status` says whether this run can use it and, if not, why.
:func:`compile_tensorrt` builds an engine through ``torch_tensorrt.compile(..., ir="dynamo")`` with explicit typing:
the engine computes in the dtype the PyTorch model has (a ``.half()`` copy gives an fp16 engine), so an fp16
engine is compared with eager fp16, an fp32 engine with eager fp32. :func:`compare_variants` times each variant end
to end (input already on the device, output synchronised) at one batch size and checks its outputs on real data
against one fp32 reference.
"""
from __future__ import annotations

import copy
import importlib
from typing import Any, Callable, Mapping

import torch
from torch import nn

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
                     min_batch: int, opt_batch: int, max_batch: int, device: torch.device | str) -> nn.Module:
    """A TensorRT-compiled copy of ``model`` for inputs ``(batch, *sample_shape)`` of ``dtype``, with
    ``min_batch <= batch <= max_batch`` (tuned for ``opt_batch``). ``model`` itself is not modified."""
    if not 1 <= min_batch <= opt_batch <= max_batch:
        raise ValueError(f"need 1 <= min_batch <= opt_batch <= max_batch, got {min_batch}, {opt_batch}, {max_batch}")
    import torch_tensorrt

    copy_in_dtype = copy.deepcopy(model).eval().to(device=torch.device(device), dtype=dtype)
    spec = torch_tensorrt.Input(min_shape=(min_batch, *sample_shape), opt_shape=(opt_batch, *sample_shape),
                                max_shape=(max_batch, *sample_shape), dtype=dtype)
    # Explicit typing: the engine keeps the model's dtypes instead of choosing its own per layer.
    return torch_tensorrt.compile(copy_in_dtype, ir="dynamo", inputs=[spec], use_explicit_typing=True)


def compare_variants(variants: Mapping[str, tuple[Callable[[torch.Tensor], torch.Tensor], torch.dtype]],
                     images: torch.Tensor, labels: torch.Tensor, reference: torch.Tensor, *,
                     device: torch.device | str, batch: int, repeats: int = 20,
                     max_batch: int | None = None) -> list[dict[str, Any]]:
    """Run every ``name -> (fn, input dtype)`` on the same data and measure it the same way.

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
    for name, (fn, dtype) in variants.items():
        with torch.inference_mode():
            outputs = torch.cat([fn(images[i:i + chunk].to(dev, dtype)).float().cpu()
                                 for i in range(0, images.shape[0], chunk)])
            x = images[:batch].to(dev, dtype)
            timing = time_fn(lambda: fn(x), device=dev, warmup=3, repeats=repeats)
        rows.append({"variant": name, "dtype": str(dtype).replace("torch.", ""), "batch": batch,
                     "median_ms": timing.median_s * 1e3, "images_per_s": batch / timing.median_s,
                     "max_abs_diff": float((outputs - reference).abs().max()),
                     "argmax_agreement": float((outputs.argmax(1) == reference.argmax(1)).float().mean()),
                     "accuracy": float((outputs.argmax(1) == labels.cpu()).float().mean())})
    return rows

"""The techniques a full-size run can switch on (:data:`TECHNIQUES`), as :class:`RunSettings`, and the checks that
keep a technique from silently doing the wrong thing on a given device (:func:`resolve_settings`).

Each technique is one lesson of the course: mixed precision (Day 11), pinned memory (Day 03), the fast-path knobs
(Day 25), gradient accumulation (Day 12), activation checkpointing (Day 13), ``torch.compile`` (Day 24).
:func:`utils.full_scale.full_scale_run` applies them.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from .precision import has_native_bf16, resolve_amp


@dataclass(frozen=True)
class RunSettings:
    """The knobs of a run. ``None`` leaves the current setting (PyTorch's default unless something changed it)."""

    amp: str | None = None                   # "bf16", "fp16" (with a GradScaler) or "auto"; None: fp32 autocast-free
    tf32: bool | None = None                 # TF32 for fp32 matmuls and convolutions (utils.tf32.set_tf32)
    channels_last: bool = False              # NHWC model weights and input batches
    cudnn_benchmark: bool | None = None      # torch.backends.cudnn.benchmark
    optimizer_impl: str | None = None        # "fused", "foreach" or "for-loop" SGD
    accumulation_steps: int = 1              # micro-batches per optimizer step (same logical batch)
    checkpoint_stages: tuple[str, ...] = ()  # ResNet stages whose activations are recomputed in backward
    compile: str | None = None               # a torch.compile mode: "default", "reduce-overhead", "max-autotune"
    pin_memory: bool = False                 # page-locked host batches + non_blocking copies (CUDA only)


_FAST = dict(amp="auto", tf32=True, channels_last=True, cudnn_benchmark=True, optimizer_impl="fused", pin_memory=True)
#: name -> (the settings it changes, one line saying what it does)
TECHNIQUES: dict[str, tuple[dict[str, Any], str]] = {
    "baseline": ({}, "fp32 weights with PyTorch's default flags, NCHW, pageable host memory"),
    "pinned": ({"pin_memory": True}, "page-locked host batches (the DataLoader's or the cache's) and non_blocking "
                                     "host-to-device copies"),
    "tf32": ({"tf32": True}, "TF32 tensor cores for fp32 matmuls and convolutions"),
    "bf16": ({"amp": "bf16"}, "bf16 autocast"),
    "fp16": ({"amp": "fp16"}, "fp16 autocast with a GradScaler"),
    "channels_last": ({"channels_last": True}, "channels_last (NHWC) weights and inputs"),
    "cudnn_benchmark": ({"cudnn_benchmark": True}, "cuDNN autotuning of every convolution (cudnn.benchmark)"),
    "fused_optimizer": ({"optimizer_impl": "fused"}, "fused SGD: the update's arithmetic in one kernel per launch"),
    "accumulation": ({"accumulation_steps": 4}, "gradient accumulation: 4 micro-batches per optimizer step"),
    "checkpointing": ({"checkpoint_stages": ("layer3",)}, "activation checkpointing of layer3 (conv4_x)"),
    "compile": ({"compile": "default"}, "torch.compile (default mode)"),
    "fast": (_FAST, "every fast-path knob: mixed precision, TF32, channels_last, cudnn.benchmark, fused SGD, "
                    "pinned memory"),
    "fast_compile": ({**_FAST, "compile": "default"}, "every fast-path knob plus torch.compile"),
}
RESNET_STAGES = ("layer1", "layer2", "layer3", "layer4")


def resolve_settings(technique: str, device: torch.device | str, **overrides: Any) -> RunSettings:
    """The :class:`RunSettings` of ``technique`` with ``overrides`` applied, checked for ``device``: ``amp="auto"``
    becomes bf16 where the device has native bf16 and fp16 elsewhere; bf16 on a GPU that only emulates it raises;
    ``pin_memory`` is dropped off CUDA."""
    if technique not in TECHNIQUES:
        raise ValueError(f"Unknown technique {technique!r}: choose one of {', '.join(TECHNIQUES)}")
    unknown = set(overrides) - set(RunSettings.__dataclass_fields__)
    if unknown:
        raise ValueError(f"Unknown setting(s) {', '.join(sorted(unknown))}: the knobs are "
                         f"{', '.join(RunSettings.__dataclass_fields__)}")
    s = RunSettings(**{**TECHNIQUES[technique][0], **overrides})
    dev = torch.device(device)
    amp = s.amp
    if amp == "auto":
        amp = "bf16" if has_native_bf16(dev) else "fp16"
    if amp is not None:
        resolve_amp(amp, dev)  # raises on names it does not know and on fp16 on the CPU
        if amp == "bf16" and dev.type == "cuda" and not has_native_bf16(dev):
            raise ValueError(f"bf16 on {torch.cuda.get_device_name(dev)} (compute capability "
                             f"{torch.cuda.get_device_capability(dev)}) is emulated and slower than fp32: use "
                             "technique='fp16' (or amp='auto', which picks fp16 there)")
    if s.accumulation_steps < 1:
        raise ValueError(f"accumulation_steps must be >= 1, got {s.accumulation_steps}")
    bad = [st for st in s.checkpoint_stages if st not in RESNET_STAGES]
    if bad:
        raise ValueError(f"checkpoint_stages must name ResNet stages {', '.join(RESNET_STAGES)}, got {bad}")
    if s.optimizer_impl not in (None, "fused", "foreach", "for-loop"):
        raise ValueError(f"optimizer_impl must be 'fused', 'foreach', 'for-loop' or None, got {s.optimizer_impl!r}")
    return replace(s, amp=amp, pin_memory=s.pin_memory and dev.type == "cuda")


class CheckpointedStage(nn.Module):
    """Runs ``inner`` under non-reentrant activation checkpointing: only its input is saved for backward, and its
    activations are recomputed there."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch.utils.checkpoint import checkpoint

        return checkpoint(self.inner, x, use_reentrant=False)


def checkpoint_stages(model: nn.Module, stages: tuple[str, ...]) -> nn.Module:
    """Wrap each named child of ``model`` (e.g. a ResNet's ``"layer3"``) in a :class:`CheckpointedStage`, in place."""
    for name in stages:
        if not isinstance(getattr(model, name, None), nn.Module):
            raise ValueError(f"{type(model).__name__} has no stage {name!r} to checkpoint: use a ResNet "
                             f"(stages {', '.join(RESNET_STAGES)})")
        setattr(model, name, CheckpointedStage(getattr(model, name)))
    return model

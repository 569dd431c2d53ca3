"""Expected training time on a GPU class, estimated from FLOPs until a recording replaces it.

time = images x FLOPs per image of one training step / an *assumed* sustained FLOP rate of the GPU class.

The FLOPs are counted, not assumed: :class:`torch.utils.flop_counter.FlopCounterMode` over one forward, loss and
backward on the meta device (shapes only, nothing is computed; a multiply-add counts as 2 FLOPs). The sustained
rates are the assumption, stated in :data:`GPU_CLASSES`: a fraction of the datasheet peak that ResNet50-class
training reaches with a good input pipeline. Everything here is an estimate of compute time only; a data loader
slower than the GPU, a first-step compilation or a host sync in the loop makes the real run longer.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

from .models import build_model

PRECISIONS = ("fp32", "amp")


@dataclass(frozen=True)
class GPUClass:
    """A class of GPU and the sustained training rates assumed for it, in TFLOP/s (10**12 FLOP/s)."""

    name: str
    example: str
    sustained_tflops: dict[str, float]   # "fp32": fp32 weights, PyTorch's default flags; "amp": bf16/fp16 autocast
    basis: str


GPU_CLASSES: dict[str, GPUClass] = {
    "T4-class": GPUClass(
        "T4-class", "NVIDIA T4 (Turing, 16 GB; datasheet 8.1 fp32 / 65 fp16 tensor-core TFLOP/s)",
        {"fp32": 3.0, "amp": 8.0},
        "assumed: about 35 % of the fp32 peak and 12 % of the fp16 tensor-core peak (a 70 W card whose 320 GB/s "
        "memory limits ResNet50's many memory-bound layers), i.e. about 120 and 330 images/s for ResNet50 at 224 px"),
    "A100-class": GPUClass(
        "A100-class", "NVIDIA A100 (Ampere, 40/80 GB; datasheet 19.5 fp32 / 156 TF32 / 312 bf16 TFLOP/s)",
        {"fp32": 25.0, "amp": 50.0},
        "assumed: about 16 % of the TF32 peak (cuDNN runs fp32 convolutions in TF32 by default) and 16 % of the "
        "bf16 peak, i.e. about 1,000 and 2,000 images/s for ResNet50 at 224 px"),
}


@lru_cache(maxsize=32)
def training_flops_per_image(model: str = "resnet50", image_size: int = 224, num_classes: int = 10) -> float:
    """FLOPs of one training step (forward, cross-entropy, backward) per image for :func:`utils.models.build_model`
    ``model`` at ``image_size`` px, counted by ``FlopCounterMode`` on the meta device (no memory, no compute)."""
    from torch.utils.flop_counter import FlopCounterMode

    batch = 2
    with torch.device("meta"):
        net = build_model(model, num_classes, image_size=image_size)
        x = torch.randn(batch, 3, image_size, image_size)
        y = torch.randint(0, num_classes, (batch,))
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.cross_entropy(net(x), y).backward()
    return counter.get_total_flops() / batch


@dataclass(frozen=True)
class TimeEstimate:
    """The estimated time for ``images`` training images on one GPU class (an estimate, not a measurement)."""

    gpu_class: str
    precision: str
    images: int
    flops_per_image: float
    assumed_tflops: float

    @property
    def images_per_s(self) -> float:
        return self.assumed_tflops * 1e12 / self.flops_per_image

    @property
    def seconds(self) -> float:
        return self.images / self.images_per_s


def estimate_training_time(images: int, *, model: str = "resnet50", image_size: int = 224, num_classes: int = 10,
                           precision: str = "amp") -> list[TimeEstimate]:
    """One :class:`TimeEstimate` per GPU class of :data:`GPU_CLASSES` for training on ``images`` images (e.g.
    epochs x 9,469 for Imagenette), in ``precision`` ``"amp"`` (bf16/fp16 autocast) or ``"fp32"``."""
    if isinstance(images, bool) or not isinstance(images, int) or images < 1:
        raise ValueError(f"images must be a positive integer (training images, e.g. epochs x dataset size), "
                         f"got {images!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)} (amp: bf16/fp16 autocast), "
                         f"got {precision!r}")
    flops = training_flops_per_image(model, image_size, num_classes)
    return [TimeEstimate(c.name, precision, images, flops, c.sustained_tflops[precision]) for c in GPU_CLASSES.values()]


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def expected_time_line(images: int, what: str, *, model: str = "resnet50", image_size: int = 224,
                       num_classes: int = 10, precision: str = "amp") -> str:
    """One sentence for a day's header: the expected time of ``what`` (e.g. ``"one Imagenette epoch"``) on each GPU
    class, labelled as an estimate from FLOPs with its assumptions."""
    rows = estimate_training_time(images, model=model, image_size=image_size, num_classes=num_classes,
                                  precision=precision)
    per_gpu = ", ".join(f"about {_duration(r.seconds)} on {'an' if r.gpu_class[0] in 'AEIOU' else 'a'} "
                        f"{r.gpu_class} GPU" for r in rows)
    rates = " and ".join(f"{r.assumed_tflops:g}" for r in rows)
    mode = ("mixed precision" if precision == "amp"
            else "fp32, with PyTorch's default TF32 convolutions on Ampere and newer GPUs")
    return (f"Expected time for {what} ({images:,} images, {model} at {image_size} px, {mode}): {per_gpu}. This is "
            f"an estimate from FLOPs ({rows[0].flops_per_image / 1e9:.1f} GFLOP per image per training step, "
            f"counted), not a recording: it assumes {rates} TFLOP/s sustained and counts compute only.")

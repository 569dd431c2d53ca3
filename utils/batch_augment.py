"""Augmentation of a whole batch on the device it is on, with its own random parameters for every image: the
random-resized crop, horizontal flip and normalisation of torchvision's training transform, as a handful of
kernels for the whole batch (a cast, ``affine_grid`` + ``grid_sample``, the normalisation's multiply and subtract)
instead of a decode and three transforms per image on the host.

A torchvision v2 transform called on a batch draws *one* set of parameters for the whole call (every image gets the
same crop); here the parameters come from :func:`random_resized_crop_boxes`, one row per image, drawn as torchvision's
``RandomResizedCrop.make_params`` draws them (ten tries of area and log-aspect, then the central fallback). The
crop is resampled bilinearly without an antialiasing filter: from a cache stored at 8/7 of the output size
(:mod:`utils.decoded_cache`) the largest reduction is 1.14x, where a filter changes almost nothing. The same code runs
on a CPU (tests, smoke runs), CUDA and MPS.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F

#: The scale range the course's full-size runs use (torchvision's default is (0.08, 1.0), made for long ImageNet
#: runs), and torchvision's default aspect-ratio range.
DEFAULT_SCALE = (0.35, 1.0)
DEFAULT_RATIO = (3 / 4, 4 / 3)


def random_resized_crop_boxes(n: int, height: int, width: int, *, scale: Sequence[float] = DEFAULT_SCALE,
                              ratio: Sequence[float] = DEFAULT_RATIO, generator: torch.Generator | None = None,
                              tries: int = 10) -> torch.Tensor:
    """``n`` crop boxes ``(top, left, height, width)`` in whole pixels (float32, shape (n, 4)) for images of
    ``height`` x ``width``: each row drawn independently, as ``torchvision.transforms.v2.RandomResizedCrop`` does
    for one image (area fraction uniform in ``scale``, aspect ratio log-uniform in ``ratio``, the first of ``tries``
    draws that fits, else the central crop clamped to ``ratio``)."""
    area = height * width
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    target_area = area * (scale[0] + (scale[1] - scale[0]) * torch.rand(n, tries, generator=generator))
    aspect = torch.exp(log_lo + (log_hi - log_lo) * torch.rand(n, tries, generator=generator))
    w = torch.sqrt(target_area * aspect).round()
    h = torch.sqrt(target_area / aspect).round()
    fits = (w > 0) & (w <= width) & (h > 0) & (h <= height)
    first = fits.int().argmax(dim=1, keepdim=True)                  # the first try that fits (0 if none does)
    w, h, found = w.gather(1, first)[:, 0], h.gather(1, first)[:, 0], fits.any(dim=1)
    in_ratio = width / height                                        # the fallback: central, clamped to `ratio`
    if in_ratio < min(ratio):
        fw, fh = width, round(width / min(ratio))
    elif in_ratio > max(ratio):
        fw, fh = round(height * max(ratio)), height
    else:
        fw, fh = width, height
    w = torch.where(found, w, torch.full_like(w, fw))
    h = torch.where(found, h, torch.full_like(h, fh))
    u = torch.rand(n, 2, generator=generator)
    top = torch.where(found, torch.floor(u[:, 0] * (height - h + 1)), torch.full_like(h, (height - fh) // 2))
    left = torch.where(found, torch.floor(u[:, 1] * (width - w + 1)), torch.full_like(w, (width - fw) // 2))
    return torch.stack([top, left, h, w], dim=1).float()


def flip_draws(n: int, generator: torch.Generator | None = None, p: float = 0.5) -> torch.Tensor:
    """``n`` independent coin flips (bool, shape (n,)): which images to mirror left-right."""
    return torch.rand(n, generator=generator) < p


def _as_nchw_float(images: torch.Tensor) -> torch.Tensor:
    """A uint8 or float batch in (N, H, W, 3) or (N, 3, H, W) as float32 (N, 3, H, W) in [0, 255] or as given."""
    if images.ndim != 4:
        raise ValueError(f"expected a batch of images (4 dimensions), got shape {tuple(images.shape)}")
    if images.shape[-1] == 3 and images.shape[1] != 3:
        images = images.permute(0, 3, 1, 2)          # a view: channels_last memory, NCHW shape
    return images.float()


def crop_theta(boxes: torch.Tensor, flips: torch.Tensor | None, height: int, width: int) -> torch.Tensor:
    """The (N, 2, 3) affine matrices for ``torch.nn.functional.affine_grid`` (``align_corners=False``) that map
    an output image onto each box ``(top, left, height, width)`` of a ``height`` x ``width`` image, mirrored where
    ``flips`` is True. Output coordinates u in [-1, 1] land on input coordinates x = (w/W) u + (2 left + w)/W - 1:
    -1 and 1 are the outer edges of the box's edge pixels."""
    boxes = boxes.float()
    top, left, h, w = boxes.unbind(dim=1)
    sx, sy = w / width, h / height
    if flips is not None:
        sx = torch.where(flips.to(sx.device), -sx, sx)
    zero = torch.zeros_like(sx)
    return torch.stack([torch.stack([sx, zero, (2 * left + w) / width - 1], dim=1),
                        torch.stack([zero, sy, (2 * top + h) / height - 1], dim=1)], dim=1)


def resample(images: torch.Tensor, theta: torch.Tensor, size: int, *, mean: Sequence[float] | None = None,
             std: Sequence[float] | None = None) -> torch.Tensor:
    """Every image of ``images`` ((N, H, W, 3) or (N, 3, H, W), uint8 in [0, 255] or float) resampled bilinearly
    through its own ``theta`` (:func:`crop_theta`) to ``size`` x ``size``, then scaled to [0, 1] (uint8 input) and
    normalised with ``mean``/``std`` when given: a handful of kernels for the whole batch. Returns float32
    (N, 3, size, size) on the images' device."""
    x = _as_nchw_float(images)
    grid = F.affine_grid(theta.to(x.device), [x.shape[0], x.shape[1], size, size], align_corners=False)
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
    return normalize_(out, mean, std, scaled=images.dtype == torch.uint8)


def crop_resize_flip(images: torch.Tensor, boxes: torch.Tensor, flips: torch.Tensor | None, size: int, *,
                     mean: Sequence[float] | None = None, std: Sequence[float] | None = None) -> torch.Tensor:
    """Crop every image of ``images`` ((N, H, W, 3) or (N, 3, H, W), uint8 in [0, 255] or float) to its own box
    ``boxes[k] = (top, left, height, width)`` in pixels, resize the crop to ``size`` x ``size`` (bilinear, pixel
    centres as ``torch.nn.functional.interpolate(align_corners=False)`` places them; the whole image is sampled, so
    where a box is enlarged the first and last output row or column also weigh the pixel just outside the box, by up
    to a half, where torchvision's ``resized_crop`` clamps to the box's edge), mirror the images where ``flips`` is
    True, and scale to [0, 1] and normalise with ``mean``/``std`` (per channel, of [0, 1] values) when
    given. Returns float32 (N, 3, size, size) on the images' device."""
    channels_first = images.shape[1] == 3 and images.shape[-1] != 3
    height, width = images.shape[-2:] if channels_first else images.shape[1:3]
    return resample(images, crop_theta(boxes, flips, height, width), size, mean=mean, std=std)


def center_crop(images: torch.Tensor, size: int, *, mean: Sequence[float] | None = None,
                std: Sequence[float] | None = None) -> torch.Tensor:
    """The central ``size`` x ``size`` pixels of every image (no resampling), as float32 (N, 3, size, size), scaled
    and normalised as :func:`crop_resize_flip` does: the evaluation transform of a cache stored at 8/7 of ``size``
    (resize the shorter side to 256, crop the central 224)."""
    x = _as_nchw_float(images)
    height, width = x.shape[-2:]
    if size > min(height, width):
        raise ValueError(f"a {size} px centre crop needs images of at least {size} px, got {height}x{width}")
    top, left = (height - size) // 2, (width - size) // 2
    out = x[:, :, top:top + size, left:left + size].contiguous()
    if out.data_ptr() == images.data_ptr():              # a float batch already size x size: never the caller's
        out = out.clone()
    return normalize_(out, mean, std, scaled=images.dtype == torch.uint8)


_NORM_CACHE: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


def _scale_shift(mean: Sequence[float], std: Sequence[float], factor: float, device: torch.device,
                 dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """``(factor / std, mean / std)`` as (1, C, 1, 1) tensors on ``device``, made once per device and statistics:
    a host-to-device copy per batch would be a copy from pageable memory on every step."""
    key = (str(device), tuple(float(v) for v in mean), tuple(float(v) for v in std), factor, dtype)
    if key not in _NORM_CACHE:
        m = torch.tensor(key[1], dtype=torch.float64).view(1, -1, 1, 1)
        s = torch.tensor(key[2], dtype=torch.float64).view(1, -1, 1, 1)
        _NORM_CACHE[key] = ((factor / s).to(device, dtype), (m / s).to(device, dtype))
    return _NORM_CACHE[key]


def normalize_(x: torch.Tensor, mean: Sequence[float] | None, std: Sequence[float] | None, *,
               scaled: bool = True) -> torch.Tensor:
    """In place: ``x / 255`` (when ``scaled``), then ``(x - mean) / std`` per channel (when both are given), fused
    into one multiply and one subtract: ``x * (factor / std) - mean / std``. Returns ``x``."""
    factor = 1 / 255 if scaled else 1.0
    if mean is None or std is None:
        return x.mul_(factor) if factor != 1.0 else x
    scale, shift = _scale_shift(mean, std, factor, x.device, x.dtype)
    return x.mul_(scale).sub_(shift)

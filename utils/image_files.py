"""Image files on disk for data-loading experiments: real digits written as PNG files, decoded on every access.

Decoding compressed images in ``__getitem__`` is what makes real input pipelines CPU-bound, so it is the right
workload for tuning ``DataLoader`` workers. The dataset class lives in a module (not in a notebook) so that worker
processes started with ``spawn`` (macOS, Windows) or ``forkserver`` (Linux from Python 3.14) can import it; with
``fork`` (Linux up to Python 3.13) either works.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from .splits import bundled_digits


def write_digit_pngs(directory: str | Path, n: int | None = None, image_size: int = 128, seed: int = 0
                     ) -> list[tuple[Path, int]]:
    """Write ``n`` of scikit-learn's 1,797 real 8x8 digit scans (all when ``None``, else a seeded random choice) as ``image_size`` x ``image_size`` RGB PNG files in an ImageFolder layout
    (``directory/<label>/<index>_<image_size>.png``, the index zero-padded to 5 digits). Existing files are reused. Returns ``(path, label)`` pairs."""
    from PIL import Image
    if image_size < 8:
        raise ValueError(f"image_size must be >= 8 pixels, got {image_size}")
    scans, targets = bundled_digits()
    order = np.arange(len(targets))
    if n is not None:
        if not 1 <= n <= len(order):
            raise ValueError(f"n must be in 1..{len(order)}, got {n}")
        order = np.sort(np.random.default_rng(seed).choice(order, size=n, replace=False))
    root = Path(directory)
    samples: list[tuple[Path, int]] = []
    for i in order:
        label = int(targets[i])
        path = root / str(label) / f"{i:05d}_{image_size}.png"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            pixels = (scans[i] * (255 / 16)).round().astype(np.uint8)
            Image.fromarray(pixels).resize((image_size, image_size), Image.BICUBIC).convert("RGB").save(path)
        samples.append((path, label))
    return samples


def decode_png(path: str | Path) -> torch.Tensor:
    """Read and decode one image file (PNG, JPEG or any format Pillow opens) into a contiguous RGB ``uint8`` tensor of
    shape (3, H, W).

    With Pillow, as torchvision's ``ImageFolder`` does by default: torchvision's own decoders (``torchvision.io``)
    are deprecated since torchvision 0.29 in favour of TorchCodec's."""
    from PIL import Image

    with Image.open(path) as image:
        pixels = np.array(image.convert("RGB"))          # a writable (H, W, 3) copy
    return torch.from_numpy(pixels).permute(2, 0, 1).contiguous()


class ImageFiles(Dataset):
    """``(path, label)`` pairs decoded on every ``__getitem__``, then passed through ``transform`` (if any).

    Returns ``(image, label)`` with ``image`` a (3, H, W) tensor (``uint8`` unless the transform converts it).
    """

    def __init__(self, samples: Sequence[tuple[str | Path, int]], transform: Callable | None = None):
        self.samples = [(str(p), int(y)) for p, y in samples]
        self.transform = transform

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[i]
        image = decode_png(path)
        if self.transform is not None:
            image = self.transform(image)
        return image, label

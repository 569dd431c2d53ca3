#!/usr/bin/env python3
"""DataLoader scaling on a decode-heavy dataset: images/s for num_workers 0..2*cores x pin_memory.

The script writes PNG files (the digits scans, upscaled: real images) to a temp folder and decodes them in
__getitem__. The ceiling is the bare decode rate of one core times the number of cores the workers can use
(min(workers, physical cores); 1 for num_workers=0): the figure is the measured rate as a fraction of that ceiling.

    python benchmarks/dataloader_scaling.py
    python benchmarks/dataloader_scaling.py --smoke
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from common import provenance, write_result


def write_pngs(folder: Path, count: int, size: int) -> list[Path]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    paths = []
    for i in range(count):
        img = Image.fromarray((digits.images[i % len(digits.images)] * 15.9).astype(np.uint8)).resize((size, size))
        path = folder / f"{i:05d}.png"
        img.convert("RGB").save(path)
        paths.append(path)
    return paths


class PngDataset(Dataset):
    """Decodes a PNG file per sample: the work a real image pipeline does per sample."""

    def __init__(self, paths: list[Path]):
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        with Image.open(self.paths[i]) as img:
            arr = np.asarray(img.convert("RGB"), dtype=np.float32) / 255.0
        return torch.from_numpy(arr).permute(2, 0, 1), i % 10


def bare_decode_rate(ds: PngDataset, repeats: int) -> float:
    """Samples/s decoding in this process, one after another (one core)."""
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for i in range(len(ds)):
            ds[i]
        rates.append(len(ds) / (time.perf_counter() - start))
    return statistics.median(rates)


def loader_rate(ds: PngDataset, workers: int, pin: bool, batch_size: int, epochs: int) -> float:
    """Samples/s through a DataLoader, excluding worker start-up (persistent workers, first epoch untimed)."""
    loader = DataLoader(ds, batch_size=batch_size, num_workers=workers, pin_memory=pin,
                        persistent_workers=workers > 0)
    for _ in loader:  # start workers, warm caches
        pass
    rates = []
    for _ in range(epochs):
        start = time.perf_counter()
        for _batch in loader:
            pass
        rates.append(len(ds) / (time.perf_counter() - start))
    return statistics.median(rates)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--files", type=int, default=None)
    ap.add_argument("--size", type=int, default=None, help="image side in pixels")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    try:
        import psutil

        physical = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    except ImportError:
        physical = os.cpu_count() or 1
    files = args.files or (48 if args.smoke else 768)
    size = args.size or (64 if args.smoke else 160)
    workers_list = [0, 2] if args.smoke else list(range(0, 2 * physical + 1))
    pins = [False] if args.smoke else [False, True]
    epochs = 1 if args.smoke else 3
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        ds = PngDataset(write_pngs(Path(tmp), files, size))
        per_core = bare_decode_rate(ds, 1 if args.smoke else 3)
        print(f"bare decode rate: {per_core:,.0f} images/s on one core ({files} PNGs of {size}x{size}); "
              f"{physical} physical cores")
        rows = []
        for pin in pins:
            for w in workers_list:
                rate = loader_rate(ds, w, pin, batch_size=32, epochs=epochs)
                ceiling = per_core * (1 if w == 0 else min(w, physical))
                rows.append({"num_workers": w, "pin_memory": pin, "images_per_s": rate, "ceiling_images_per_s":
                             ceiling, "fraction_of_ceiling": rate / ceiling})
                print(f"num_workers={w:<2} pin_memory={str(pin):<5} {rate:9,.0f} images/s = "
                      f"{rate / ceiling:5.2f} of the ceiling ({ceiling:,.0f})")
    best = max(rows, key=lambda r: r["images_per_s"])
    print(f"best: num_workers={best['num_workers']} pin_memory={best['pin_memory']} at {best['images_per_s']:,.0f} "
          f"images/s, {best['fraction_of_ceiling']:.2f} of its ceiling")
    payload = {"benchmark": "dataloader_scaling", "provenance": provenance("cpu"), "files": files,
               "image_size": size, "bare_decode_images_per_s_per_core": per_core, "physical_cores": physical,
               "rows": rows}
    path = write_result("dataloader_scaling", payload, args.out)
    if path:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

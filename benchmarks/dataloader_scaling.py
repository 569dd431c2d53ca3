#!/usr/bin/env python3
"""DataLoader scaling on a decode-heavy dataset: images/s for num_workers 0..2*cores x pin_memory.

The script writes PNG files (the digits scans, upscaled: real images) to a temp folder with utils.image_files and
decodes them in __getitem__ with Pillow, as Day 10 does. The ceiling is the bare decode rate of one core times
the number of cores the workers can use (min(workers, physical cores); 1 for num_workers=0): the figure is the
measured rate as a fraction of that ceiling. Timings are medians from utils.timing.time_fn.

    python benchmarks/dataloader_scaling.py
    python benchmarks/dataloader_scaling.py --smoke
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import torch
from torch.utils.data import DataLoader
from torchvision.transforms import v2

from common import provenance, write_result
from utils.image_files import ImageFiles, write_digit_pngs
from utils.timing import time_fn


def png_dataset(folder: Path, count: int, size: int) -> ImageFiles:
    """``count`` digit scans as ``size`` x ``size`` PNG files, decoded with Pillow and scaled to float in every
    ``__getitem__``: the per-sample work of a real image pipeline, as Day 10 builds it."""
    samples = write_digit_pngs(folder, n=count, image_size=size)
    return ImageFiles(samples, transform=v2.ToDtype(torch.float32, scale=True))


def bare_decode_rate(ds: ImageFiles, repeats: int) -> float:
    """Images/s decoding every sample in this process, one after another (one core); median of ``repeats`` passes
    after one warm-up pass (page cache, first-call costs)."""
    timing = time_fn(lambda: [ds[i] for i in range(len(ds))], warmup=1, repeats=repeats)
    return timing.per_second(len(ds))


def loader_rate(ds: ImageFiles, workers: int, pin: bool, batch_size: int, epochs: int) -> float:
    """Images/s through a DataLoader, median of ``epochs`` epochs; worker start-up is excluded (persistent workers,
    the warm-up epoch is untimed)."""
    loader = DataLoader(ds, batch_size=batch_size, num_workers=workers, pin_memory=pin,
                        persistent_workers=workers > 0)

    def one_epoch() -> None:
        for _batch in loader:
            pass

    return time_fn(one_epoch, warmup=1, repeats=epochs).per_second(len(ds))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--files", type=int, default=None, help="number of PNG files, 1..1797 (the digits scans)")
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
        ds = png_dataset(Path(tmp), files, size)
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

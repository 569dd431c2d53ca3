#!/usr/bin/env python3
"""Host CPU cost per image of the full-size runs' two input paths, measured in one run on one core.

- old: what a DataLoader worker does per image on the ``"dataloader"`` path: decode a ~320 x 426 JPEG with Pillow,
  RandomResizedCrop to 224, flip, convert to float, normalise (``utils.full_scale.full_scale_data``'s transform).
- new: what the host does per image on the ``"cached"`` path (``utils.input_path``): gather the batch's rows from
  the decoded uint8 cache into a fresh (page-locked on CUDA) tensor, draw each image's crop box and flip
  (``gather_batch``), and dispatch the batched crop/flip/normalise to the device (``CachedInput.to_device``). On a
  CUDA machine the dispatch is timed launching the real kernels (the host's part only: no synchronisation inside the
  timed loop). Without one, the same calls are timed on the CPU on 8 px images, where the kernels' work is nil and
  what remains is the host's Python and dispatcher work per op; the number of ops per batch is counted (each is one
  kernel launch on CUDA, which adds its driver call on top).

The figure is the ratio old / new of CPU seconds per image (``time.process_time``, one thread), and images/s per core
= 1 / CPU seconds per image; the target is a ratio of at least 20, so that two cores feed 6,400 images/s. The JPEGs
are generated at Imagenette's 320 px size (``utils.datasets.write_imagenette_like``); the cache rows are tiled to
``--rows`` so that gathers read memory, not the CPU's caches.

    python benchmarks/input_path.py --out benchmarks/results
    python benchmarks/input_path.py --smoke
"""
from __future__ import annotations

import argparse
import statistics
from collections import deque
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from common import provenance, write_result
from utils.batch_augment import resample
from utils.decoded_cache import DecodedImages
from utils.device import pick_device, synchronize

TARGET_RATIO = 20.0
TARGET_IMAGES_PER_S = 6400


def cpu_seconds(fn, repeats: int) -> tuple[float, float]:
    """Median CPU seconds (``process_time``) and wall seconds of ``fn()`` over ``repeats`` calls after one warm-up."""
    fn()
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(cpu), statistics.median(wall)


def count_ops(fn) -> int:
    """ATen ops ``fn()`` dispatches (each is a kernel launch on CUDA)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return Count.n


def tiled_cache(cache: DecodedImages, rows: int, folder: Path) -> DecodedImages:
    """A memory-mapped copy of ``cache`` with its rows repeated up to ``rows`` (a dataset-sized file to gather from)."""
    path = folder / "tiled.npy"
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(rows, *cache.images.shape[1:]))
    src = cache.images.numpy()
    for start in range(0, rows, len(src)):
        out[start:start + len(src)] = src[:rows - start]
    out.flush()
    del out
    images = torch.from_numpy(np.load(path, mmap_mode="c"))
    labels = cache.labels.repeat((rows + len(cache) - 1) // len(cache))[:rows].clone()
    return DecodedImages(images, labels, cache.size, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (seconds), for the test suite")
    ap.add_argument("--device", default="auto", help="where the batched augmentation is dispatched")
    ap.add_argument("--images", type=int, default=None, help="JPEGs generated (10 classes)")
    ap.add_argument("--rows", type=int, default=None, help="rows of the tiled cache the batches are gathered from")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from utils.datasets import write_imagenette_like
    from utils.full_scale import full_scale_data
    from utils.input_path import CachedInput, gather_batch

    torch.set_num_threads(1)              # one core: per-core figures
    device = pick_device(args.device)
    images = args.images or (20 if args.smoke else 200)
    rows = args.rows or (4 * args.batch if args.smoke else 2048)
    per_class = max(1, images // 10)
    passes, batches = (1, 4) if args.smoke else (3, 40)
    with tempfile.TemporaryDirectory() as tmp:
        write_imagenette_like(tmp, size="320px", train_per_class=per_class, val_per_class=1, num_classes=10)
        data = full_scale_data("imagenette", 224, root=tmp)
        n = len(data.train)
        old_cpu, old_wall = cpu_seconds(lambda: [data.train[i] for i in range(n)], passes)
        path = CachedInput(data, 1, pin_memory=False, seed=0, progress=False)   # its cache and to_device
        cache = tiled_cache(path.train_cache, rows, Path(tmp))
        pin = device.type == "cuda"
        g = torch.Generator().manual_seed(0)
        order = torch.randperm(rows, generator=g)

        def gather(keep: int = 4) -> list:
            """``batches`` batches, keeping the last ``keep`` alive as the producer's queue does (holding all of them
            would page-fault fresh memory for every batch, which the training loop's steady state never does)."""
            kept: deque = deque(maxlen=keep)
            for k in range(batches):
                rows_k = order[(k * args.batch) % (rows - args.batch):][:args.batch]
                kept.append(gather_batch(cache.images, cache.labels, rows_k, generator=g, pin=pin))
            return list(kept)

        gather_cpu, gather_wall = cpu_seconds(gather, passes)
        host_batches = gather(keep=8)
        if device.type == "cuda":
            def dispatch() -> None:
                for batch in host_batches:
                    path.to_device(batch, device, non_blocking=pin, channels_last=True)
            dispatch_on = "cuda (real launches)"
        else:                 # the same ops on 8 px images: the host's dispatch work, the kernels' work nil
            tiny = [(b[0][:, :8, :8].contiguous(), b[1], b[2]) for b in host_batches]

            def dispatch() -> None:
                for images, labels, theta in tiny:
                    resample(images, theta, 7, mean=data.mean, std=data.std).contiguous(
                        memory_format=torch.channels_last)
            dispatch_on = "cpu, 8 px images (host dispatch only)"
        ops = count_ops(lambda: path.to_device(host_batches[0], torch.device("cpu"), channels_last=True))
        synchronize(device)
        dispatch_cpu, _ = cpu_seconds(dispatch, passes)
        synchronize(device)
        side = path.train_cache.size
    per = batches * args.batch
    old_ms = old_cpu / n * 1e3
    gather_ms, dispatch_ms = gather_cpu / per * 1e3, dispatch_cpu / per * 1e3
    new_ms = gather_ms + dispatch_ms
    ratio = old_ms / new_ms
    rows_out = [
        {"path": "old: PIL decode + RandomResizedCrop + flip + normalise (one DataLoader worker's work)",
         "cpu_ms_per_image": old_ms, "wall_ms_per_image": old_wall / n * 1e3, "images_per_s_per_core": 1e3 / old_ms,
         "cores_for_target": TARGET_IMAGES_PER_S * old_ms / 1e3},
        {"path": f"new: gather from the decoded cache ({side} px rows{', pinned' if pin else ''}) + crop parameters",
         "cpu_ms_per_image": gather_ms, "wall_ms_per_image": gather_wall / per * 1e3,
         "images_per_s_per_core": 1e3 / gather_ms, "cores_for_target": TARGET_IMAGES_PER_S * gather_ms / 1e3},
        {"path": f"new: dispatch of the batched crop/flip/normalise ({ops} ops per batch) on {dispatch_on}",
         "cpu_ms_per_image": dispatch_ms, "wall_ms_per_image": None, "images_per_s_per_core": 1e3 / dispatch_ms,
         "cores_for_target": TARGET_IMAGES_PER_S * dispatch_ms / 1e3},
        {"path": "new: total host cost", "cpu_ms_per_image": new_ms, "wall_ms_per_image": None,
         "images_per_s_per_core": 1e3 / new_ms, "cores_for_target": TARGET_IMAGES_PER_S * new_ms / 1e3},
    ]
    for r in rows_out:
        print(f"{r['path']:<86} {r['cpu_ms_per_image']:8.4f} ms/image  {r['images_per_s_per_core']:9,.0f} images/s "
              f"per core  {r['cores_for_target']:6.2f} cores for {TARGET_IMAGES_PER_S:,} images/s")
    verdict = "meets" if ratio >= TARGET_RATIO else "misses"
    print(f"ratio old/new host CPU per image: {ratio:.1f}x ({verdict} the target of {TARGET_RATIO:g}x); JPEGs "
          f"{n} at 320 px, batch {args.batch}, {rows} cache rows, dispatch timed on {dispatch_on}")
    payload = {"benchmark": "input_path", "provenance": provenance(device), "jpegs": n, "batch": args.batch,
               "cache_rows": rows, "cache_px": side, "dispatch": dispatch_on, "ops_per_batch": ops, "rows": rows_out,
               "ratio_old_over_new": ratio, "target_ratio": TARGET_RATIO, "meets_target": ratio >= TARGET_RATIO}
    path_out = write_result(f"input_path_{device.type}", payload, args.out)
    if path_out:
        print(f"wrote {path_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

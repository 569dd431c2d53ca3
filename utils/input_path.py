"""How a full-size run's batches reach the model, and whether that path, not the technique, set the run's speed.

Two input paths (:data:`INPUT_PATHS`), chosen with ``full_scale_run(input_path=...)``:

- ``"cached"`` (the default): every image decoded once into a uint8 cache (:mod:`utils.decoded_cache`); a
  background thread gathers each shuffled batch from it (into page-locked memory when the run pins), and the
  random-resized crop, flip and normalisation run on the device, batched, one set of parameters per image
  (:mod:`utils.batch_augment`). The host's work per image is a copy of 196 KB, not a JPEG decode: the way FFCV
  (decoded pages, JIT-compiled host transforms) and airbench (the whole dataset on the GPU, batched GPU
  augmentation) keep a GPU fed, with only torch and Pillow.
- ``"dataloader"``: the end-to-end ``DataLoader`` of Days 03 and 10 (JPEG decode and torchvision transforms in
  worker processes): what a plain PyTorch script does, and what those days measure.

Every run measures its input path alone (:func:`measure_input_rate`: the batches that were already waiting are
taken first, then a few batches timed with the device synchronised) and records it beside the training speed:
:func:`input_bound` says whether the loader, rather than the technique, limited the run.
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Any, Iterable, Iterator, Sequence

import torch

from .data import DataSplits, TransformedSubset, dataset_labels
from .device import synchronize

INPUT_PATHS = ("cached", "dataloader")
#: The input path alone must deliver at least this multiple of the training images/s ...
MIN_HEADROOM = 1.25
#: ... and the training loop may wait for batches at most this share of its timed window; else the run is
#: input-bound, and its images/s measure the loader at least as much as the technique.
MAX_WAIT_SHARE = 0.05


def input_bound(loader_images_per_s: float | None, images_per_s: float, data_wait_share: float) -> bool:
    """True when the input path limited a run: the loop waited for data more than :data:`MAX_WAIT_SHARE` of its
    time, or the path alone delivered less than :data:`MIN_HEADROOM` x the images/s the run trained at."""
    if data_wait_share > MAX_WAIT_SHARE:
        return True
    return loader_images_per_s is not None and loader_images_per_s < MIN_HEADROOM * images_per_s


def input_limit_text(label: str, loader_images_per_s: float | None, images_per_s: float,
                     data_wait_share: float) -> str:
    """One sentence saying by how much the input path limited the run ``label``."""
    alone = (f"its input path alone delivered {loader_images_per_s:,.0f} images/s, "
             f"{loader_images_per_s / images_per_s:.2f}x" if loader_images_per_s else "its input path was not measured")
    return (f"{label} trained at {images_per_s:,.0f} images/s and waited for data {data_wait_share:.0%} of its time; "
            f"{alone} (needed: at least {MIN_HEADROOM:g}x, and at most {MAX_WAIT_SHARE:.0%} waiting)")


class InputPath:
    """Batches for training and evaluation, on the host until :meth:`to_device` moves and finishes them."""

    name = "custom"
    workers = 0            # processes that prepare batches (0: threads or the main process)
    prefetched = 0         # batches that may be ready before the first request (taken before measuring)

    def train_batches(self) -> Iterator[Any]:
        """An endless iterator of host batches (shuffled, full batches only)."""
        raise NotImplementedError

    def to_device(self, batch: Any, device: torch.device, *, non_blocking: bool = False,
                  channels_last: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``(images, labels)`` ready for the model on ``device``."""
        raise NotImplementedError

    def eval_batches(self, batch_size: int) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
        """The held-out set, in order, for :func:`utils.training.evaluate`."""
        raise NotImplementedError

    def describe(self) -> str:
        return self.name

    def close(self) -> None:
        """Stop background work (threads, worker processes)."""


def measure_input_rate(path: InputPath, batches: Iterator[Any], device: torch.device, *, count: int,
                       non_blocking: bool = False, channels_last: bool = False) -> float:
    """Images/s of ``path`` alone: the batches that may already be waiting (``path.prefetched``) are taken first,
    then ``count`` batches are taken and moved to ``device`` (cropped and normalised there on the cached path),
    timed between two synchronisations of the device. Nothing else runs meanwhile, so this is the path's best case."""
    for _ in range(path.prefetched):
        next(batches)
    synchronize(device)
    start, images = time.perf_counter(), 0
    for _ in range(count):
        _, y = path.to_device(next(batches), device, non_blocking=non_blocking, channels_last=channels_last)
        images += int(y.shape[0])
    synchronize(device)
    return images / max(time.perf_counter() - start, 1e-9)


def _endless(loader: Iterable) -> Iterator[Any]:
    while True:
        yield from loader


class DataLoaderInput(InputPath):
    """The ``DataLoader`` of :meth:`utils.data.DataSplits.loaders`: decode and augment in ``workers`` processes."""

    name = "dataloader"

    def __init__(self, data: DataSplits, batch_size: int, *, workers: int, pin_memory: bool, seed: int):
        self.workers, self.batch_size = workers, batch_size
        # Workers are forked after CUDA may be initialised: safe, because they only decode and transform on the CPU.
        self.train, _, self.test = data.loaders(batch_size, num_workers=workers, pin_memory=pin_memory, seed=seed,
                                                drop_last=True, persistent_workers=workers > 0)
        self.prefetched = 2 * workers          # DataLoader's prefetch_factor (2) batches per worker
        if len(self.train) == 0:
            raise ValueError(f"the training set ({len(data.train)} images) is smaller than one batch ({batch_size})")

    def train_batches(self) -> Iterator[Any]:
        return _endless(self.train)

    def to_device(self, batch: Any, device: torch.device, *, non_blocking: bool = False,
                  channels_last: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = batch
        x, y = x.to(device, non_blocking=non_blocking), y.to(device, non_blocking=non_blocking)
        return (x.contiguous(memory_format=torch.channels_last) if channels_last else x), y

    def eval_batches(self, batch_size: int) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
        return self.test

    def describe(self) -> str:
        return (f"DataLoader, {self.workers} worker processes decoding and transforming images" if self.workers else
                "DataLoader, images decoded and transformed in the main process")


def gather_batch(images: torch.Tensor, labels: torch.Tensor, rows: torch.Tensor, *, generator: torch.Generator,
                 pin: bool = False, scale: Sequence[float] = (0.35, 1.0),
                 ratio: Sequence[float] = (3 / 4, 4 / 3)) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The host's whole share of one cached batch: ``rows`` of the cache gathered into new (page-locked when
    ``pin``) tensors, and each image's crop box and flip drawn and turned into its affine matrix (so that the device
    runs only the resampling). Returns ``(images (B, S, S, 3) uint8, labels (B,) int64, theta (B, 2, 3) float32)``."""
    from .batch_augment import crop_theta, flip_draws, random_resized_crop_boxes

    idx, b, side = rows.sort().values, len(rows), images.shape[1]    # sorted rows: sequential reads of the file
    out = torch.empty((b, *images.shape[1:]), dtype=torch.uint8, pin_memory=pin)
    torch.index_select(images, 0, idx, out=out)
    out_labels = torch.empty(b, dtype=torch.int64, pin_memory=pin)
    torch.index_select(labels, 0, idx, out=out_labels)
    boxes = random_resized_crop_boxes(b, side, side, scale=scale, ratio=ratio, generator=generator)
    theta = torch.empty((b, 2, 3), dtype=torch.float32, pin_memory=pin)
    theta.copy_(crop_theta(boxes, flip_draws(b, generator), side, side))
    return out, out_labels, theta


class _Producer(threading.Thread):
    """Gathers shuffled batches from a decoded cache into (page-locked) host tensors, ``depth`` batches ahead."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, batch_size: int, *, seed: int, pin: bool,
                 depth: int, scale: Sequence[float], ratio: Sequence[float]):
        super().__init__(daemon=True, name="decoded-cache-batches")
        self.images, self.labels, self.batch_size, self.seed, self.pin = images, labels, batch_size, seed, pin
        self.scale, self.ratio = scale, ratio
        self.out: queue.Queue = queue.Queue(maxsize=depth)
        self.stopped = threading.Event()

    def run(self) -> None:
        g = torch.Generator().manual_seed(self.seed)
        n, b = len(self.labels), self.batch_size
        try:
            while not self.stopped.is_set():
                order = torch.randperm(n, generator=g)
                for k in range(n // b):
                    batch = gather_batch(self.images, self.labels, order[k * b:(k + 1) * b], generator=g,
                                         pin=self.pin, scale=self.scale, ratio=self.ratio)
                    if not self._put(batch):
                        return
        except BaseException as error:        # handed to the consumer, which raises it
            self._put(error)

    def _put(self, item: Any) -> bool:
        while not self.stopped.is_set():
            try:
                self.out.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator[Any]:
        while True:
            item = self.out.get()
            if isinstance(item, BaseException):
                raise item
            yield item

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)


class CachedInput(InputPath):
    """Batches gathered from a decoded uint8 cache and augmented on the device (see the module docstring)."""

    name = "cached"

    def __init__(self, data: DataSplits, batch_size: int, *, pin_memory: bool, seed: int,
                 cache_dir: str | None = None, depth: int = 4, progress: bool = True,
                 scale: Sequence[float] = (0.35, 1.0), ratio: Sequence[float] = (3 / 4, 4 / 3)):
        from .decoded_cache import cache_size

        for split in ("train", "test"):
            if not isinstance(getattr(data, split), TransformedSubset):
                raise ValueError(f"input_path='cached' needs a torchvision image dataset (Imagenette, CIFAR-10, an "
                                 f"ImageFolder); {data.name!r} is not one: use input_path='dataloader'")
        self.data, self.batch_size, self.pin, self.seed, self.depth = data, batch_size, pin_memory, seed, depth
        self.scale, self.ratio, self.cache_dir, self.progress = scale, ratio, cache_dir, progress
        self.size = cache_size(data.image_size)
        native = getattr(data.train.base, "data", None)       # in-memory arrays (CIFAR-10): never cache them larger
        # In-memory data is evaluated as the DataLoader path does for it: the whole image resized, not a centre crop.
        self.resize_whole = native is not None and getattr(native, "ndim", 0) == 4
        if self.resize_whole:
            self.size = min(self.size, int(min(native.shape[1:3])))
        self.train_cache = self._cache(data.train, "train")
        if len(self.train_cache) < batch_size:
            raise ValueError(f"the training set ({len(self.train_cache)} images) is smaller than one batch "
                             f"({batch_size})")
        self.test_cache = None
        self.prefetched = depth + 1          # the queue's depth, and the one batch the producer holds when it is full
        self._producer: _Producer | None = None

    def _cache(self, split: TransformedSubset, part: str):
        from .decoded_cache import decoded_cache

        return decoded_cache(split.base, split.indices, dataset_labels(split), self.size,
                             name=f"{self.data.name}-{part}", cache_dir=self.cache_dir, progress=self.progress)

    def train_batches(self) -> Iterator[Any]:
        self.close()
        self._producer = _Producer(self.train_cache.images, self.train_cache.labels, self.batch_size, seed=self.seed,
                                   pin=self.pin, depth=self.depth, scale=self.scale, ratio=self.ratio)
        self._producer.start()
        return iter(self._producer)

    def to_device(self, batch: Any, device: torch.device, *, non_blocking: bool = False,
                  channels_last: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        from .batch_augment import resample

        images, labels, theta = (t.to(device, non_blocking=non_blocking) for t in batch)
        x = resample(images, theta, self.data.image_size, mean=self.data.mean, std=self.data.std)
        return (x.contiguous(memory_format=torch.channels_last) if channels_last else x), labels

    def eval_batches(self, batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The central ``image_size`` pixels of each cached test image (the cache is 8/7 of that: resize, then crop,
        as the DataLoader path evaluates decoded files); for in-memory data (CIFAR-10, cached at most at its own
        32 px) the whole image resized to ``image_size``, as the DataLoader path's ``Resize((size, size))`` does."""
        from .batch_augment import center_crop, crop_theta, resample

        if self.test_cache is None:
            self.test_cache = self._cache(self.data.test, "test")
        images, labels = self.test_cache.images, self.test_cache.labels
        size = self.data.image_size
        height, width = images.shape[1:3] if images.shape[-1] == 3 else images.shape[-2:]
        for k in range(0, len(labels), batch_size):
            chunk = images[k:k + batch_size]
            if not self.resize_whole and min(height, width) >= size:
                x = center_crop(chunk, size, mean=self.data.mean, std=self.data.std)
            else:
                whole = torch.tensor([[0, 0, height, width]] * len(chunk))
                x = resample(chunk, crop_theta(whole, None, height, width), size, mean=self.data.mean,
                             std=self.data.std)
            yield x, labels[k:k + batch_size]

    def describe(self) -> str:
        return (f"decoded cache ({len(self.train_cache):,} images at {self.size} px, "
                f"{self.train_cache.nbytes / 2**30:.2f} GiB), crop/flip/normalise on the device")

    def close(self) -> None:
        if self._producer is not None:
            self._producer.stop()
            self._producer = None


def make_input_path(kind: str | InputPath, data: DataSplits, batch_size: int, *, workers: int, pin_memory: bool,
                    seed: int, cache_dir: str | None = None, progress: bool = True) -> InputPath:
    """The :class:`InputPath` named ``kind`` (one of :data:`INPUT_PATHS`) for ``data``, or ``kind`` itself."""
    if isinstance(kind, InputPath):
        return kind
    if kind == "cached":
        return CachedInput(data, batch_size, pin_memory=pin_memory, seed=seed, cache_dir=cache_dir,
                           progress=progress)
    if kind == "dataloader":
        return DataLoaderInput(data, batch_size, workers=workers, pin_memory=pin_memory, seed=seed)
    raise ValueError(f"input_path must be one of {', '.join(INPUT_PATHS)} (or an InputPath), got {kind!r}")

"""Datasets: the :class:`DataSplits` every loader returns, and the offline default (scikit-learn's digits).

Every loader returns :class:`DataSplits`: stratified train/val/test splits (:mod:`utils.splits`) that share no
sample, normalised with statistics computed on the training split only, and a :meth:`DataSplits.loaders` method for
DataLoaders.
:func:`load_dataset` is the one entry point; CIFAR-10, Imagenette and ImageFolder trees come from torchvision
through :mod:`utils.datasets`, which also decides where their files live (:func:`utils.datasets.data_root`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from .seeding import make_generator, seed_worker
from .splits import bundled_digits, stratified_split, stratified_subsample

DATASETS = ("digits", "cifar10", "imagenette", "imagefolder")


class DatasetUnavailableError(RuntimeError):
    """The dataset is neither on disk nor downloadable right now. The message names the offline alternative."""


# --------------------------------------------------------------------------------------------------- subsets
class TransformedSubset(Dataset):
    """The samples ``indices`` of ``base`` (which yields ``(image, label)``), with ``transform`` applied to images.

    Lets train and eval splits of one torchvision dataset use different transforms (augmentation for train only).
    """

    def __init__(self, base: Dataset, indices: Sequence[int], transform: Callable | None = None):
        self.base = base
        self.indices = [int(i) for i in indices]
        self.transform = transform

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> tuple[Any, int]:
        image, label = self.base[self.indices[i]]
        if self.transform is not None:
            image = self.transform(image)
        return image, int(label)


def dataset_labels(ds: Dataset) -> np.ndarray:
    """Labels of a dataset without decoding its images, where the dataset allows it."""
    if isinstance(ds, TensorDataset):
        return ds.tensors[1].cpu().numpy()
    if isinstance(ds, TransformedSubset):
        return dataset_labels(ds.base)[ds.indices]
    for attr in ("targets", "_labels"):
        if hasattr(ds, attr):
            return np.asarray(getattr(ds, attr))
    if hasattr(ds, "_samples"):  # torchvision Imagenette
        return np.asarray([t for _, t in ds._samples])
    if hasattr(ds, "samples"):  # ImageFolder
        return np.asarray([t for _, t in ds.samples])
    return np.asarray([int(ds[i][1]) for i in range(len(ds))])


# --------------------------------------------------------------------------------------------------- result
@dataclass
class DataSplits:
    """Train/val/test datasets of ``(image float32 3xHxW normalised, label)`` and what describes them. The label
    is an int from the torchvision-backed loaders and a 0-d int64 tensor from the digits' TensorDataset; a DataLoader
    batches both alike."""

    name: str
    train: Dataset
    val: Dataset
    test: Dataset
    classes: list[str]
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    image_size: int

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.train), "val": len(self.val), "test": len(self.test)}

    def summary(self) -> str:
        s = self.sizes()
        return (f"{self.name}: {s['train']} train / {s['val']} val / {s['test']} test, {self.num_classes} classes, "
                f"3x{self.image_size}x{self.image_size}, mean={tuple(round(m, 3) for m in self.mean)}, "
                f"std={tuple(round(v, 3) for v in self.std)}")

    def loaders(self, batch_size: int, *, eval_batch_size: int | None = None, num_workers: int = 0,
                pin_memory: bool = False, seed: int = 0, drop_last: bool = False,
                **loader_kwargs: Any) -> tuple[DataLoader, DataLoader, DataLoader]:
        """DataLoaders for train (shuffled, seeded), val and test (in order)."""
        check_batch_size(batch_size)
        eval_bs = check_batch_size(eval_batch_size or batch_size, "eval_batch_size")
        if num_workers < 0:
            raise ValueError(f"num_workers must be >= 0 (0 loads in the main process), got {num_workers}")
        common: dict[str, Any] = dict(num_workers=num_workers, pin_memory=pin_memory, **loader_kwargs)
        if num_workers > 0:
            common["worker_init_fn"] = seed_worker
        train = DataLoader(self.train, batch_size=batch_size, shuffle=True, generator=make_generator(seed),
                           drop_last=drop_last, **common)
        val = DataLoader(self.val, batch_size=eval_bs, shuffle=False, **common)
        test = DataLoader(self.test, batch_size=eval_bs, shuffle=False, **common)
        return train, val, test


def check_batch_size(batch_size: Any, name: str = "batch_size") -> int:
    """Return ``batch_size`` if it is a positive int, else raise a ValueError saying what is allowed."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
        raise ValueError(f"{name} must be a positive integer (number of samples per step), got {batch_size!r}")
    return int(batch_size)


def check_image_size(image_size: Any) -> int:
    """Return ``image_size`` if it is an integer >= 8 (pixels per side), else raise a ValueError."""
    if isinstance(image_size, bool) or not isinstance(image_size, (int, np.integer)) or image_size < 8:
        raise ValueError(f"image_size must be an integer >= 8 (pixels per side), got {image_size!r}")
    return int(image_size)


# --------------------------------------------------------------------------------------------------- digits
def load_digits(image_size: int = 32, *, val_fraction: float = 0.15, test_fraction: float = 0.15, seed: int = 0,
                max_train_samples: int | None = None) -> DataSplits:
    """scikit-learn's bundled handwritten digits (1,797 real 8x8 scans, 10 classes) as 3 x image_size x image_size
    tensors. Works offline. Pixels are scaled to [0, 1], resized bilinearly, copied to 3 channels, and normalised
    with the training split's mean and std."""
    size = check_image_size(image_size)
    scans, targets = bundled_digits()
    images = torch.tensor(scans, dtype=torch.float32).unsqueeze(1) / 16.0  # (N,1,8,8) in [0,1]
    if size != 8:
        images = torch.nn.functional.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
    images = images.clamp_(0, 1).expand(-1, 3, -1, -1).contiguous()
    labels = torch.tensor(targets, dtype=torch.long)
    tr, va, te = stratified_split(labels, val_fraction, test_fraction, seed)
    if max_train_samples is not None and max_train_samples < len(tr):
        tr = np.sort(stratified_subsample(labels[tr].numpy(), max_train_samples, seed, tr))
    mean = images[tr].mean(dim=(0, 2, 3))
    std = images[tr].std(dim=(0, 2, 3))
    normed = (images - mean[None, :, None, None]) / std[None, :, None, None]

    def part(idx: np.ndarray) -> TensorDataset:
        t = torch.as_tensor(idx, dtype=torch.long)
        return TensorDataset(normed[t].clone(), labels[t].clone())

    return DataSplits("digits", part(tr), part(va), part(te), [str(i) for i in range(10)],
                      tuple(mean.tolist()), tuple(std.tolist()), size)


# --------------------------------------------------------------------------------------------------- statistics
def compute_mean_std(dataset: Dataset, max_samples: int = 2000, seed: int = 0,
                     num_workers: int = 0) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and std of ``dataset``'s images (tensors in [0, 1]) over at most ``max_samples`` samples,
    read by ``num_workers`` DataLoader worker processes (0: in this process).

    Call it on the *training* split only: statistics from val/test would leak information into training.
    """
    n = len(dataset)
    if n == 0:
        raise ValueError("cannot compute statistics of an empty dataset")
    if max_samples < 1:
        raise ValueError(f"max_samples must be at least 1 (the number of images to average over), got {max_samples}")
    rng = np.random.default_rng(seed)
    pick = rng.choice(n, size=min(n, max_samples), replace=False)
    sample = torch.utils.data.Subset(dataset, pick.tolist())
    images = (x for x, _ in DataLoader(sample, batch_size=None, num_workers=num_workers))
    total = total_sq = None                        # one entry per channel, sized by the first image
    pixels = 0
    for image in images:
        x = image.to(torch.float64)
        if total is None:
            total, total_sq = torch.zeros(x.shape[0], dtype=torch.float64), torch.zeros(x.shape[0], dtype=torch.float64)
        total += x.sum(dim=(1, 2))
        total_sq += (x * x).sum(dim=(1, 2))
        pixels += x.shape[1] * x.shape[2]
    mean = total / pixels
    std = (total_sq / pixels - mean**2).clamp_min(1e-12).sqrt()
    return tuple(mean.tolist()), tuple(std.tolist())


def load_dataset(name: str = "digits", *, image_size: int = 32, root: str | os.PathLike | None = None,
                 download: bool = False, seed: int = 0, augment: bool = False,
                 max_train_samples: int | None = None, **kwargs: Any) -> DataSplits:
    """Load one of :data:`DATASETS` as :class:`DataSplits`. Only downloads when ``download=True``.

    ``digits`` is the offline default. ``cifar10`` and ``imagenette`` need the files under ``root`` (default
    :func:`utils.datasets.data_root`: ``$BOOTCAMP_DATA`` or ``~/.cache/gpu-bootcamp/data``), or a network and
    ``download=True``; ``imagefolder`` reads ``root`` as a tree of class folders.
    """
    key = str(name).strip().lower().replace("-", "").replace("_", "")
    if key == "digits":
        if augment:
            raise ValueError("augment=True is for the image-file datasets; digits are pre-computed tensors")
        return load_digits(image_size, seed=seed, max_train_samples=max_train_samples, **kwargs)
    if key not in ("cifar10", "imagenette", "imagefolder"):
        raise ValueError(f"Unknown dataset {name!r}. Choose one of {', '.join(DATASETS)} "
                         "('digits' works offline and is the default).")
    from . import datasets  # torchvision-backed loaders, imported only when asked for

    common = dict(seed=seed, augment=augment, max_train_samples=max_train_samples, **kwargs)
    if key == "cifar10":
        return datasets.load_cifar10(root, image_size, download=download, **common)
    if key == "imagenette":
        return datasets.load_imagenette(root, image_size, download=download, **common)
    if download:
        raise ValueError("imagefolder reads a local folder; there is nothing to download")
    if root is None:
        raise ValueError("imagefolder needs root=<a folder of class sub-folders of images>")
    return datasets.load_imagefolder(root, image_size, **common)


def synthetic_batch(batch_size: int, image_size: int, num_classes: int = 10, device: torch.device | str = "cpu",
                    seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random images and labels already on ``device``: for speed and memory measurements only, never accuracy."""
    check_batch_size(batch_size)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch_size, 3, image_size, image_size, generator=g)
    y = torch.randint(0, num_classes, (batch_size,), generator=g)
    return x.to(device), y.to(device)

"""The torchvision-backed datasets: CIFAR-10, Imagenette and any ImageFolder tree, as :class:`utils.data.DataSplits`.

Where the files live: :func:`data_root` (an explicit ``root``, else ``$BOOTCAMP_DATA``, else
``~/.cache/gpu-bootcamp/data``). Nothing is downloaded unless the caller passes ``download=True``; torchvision then
checks the archive's md5 before extracting it, and later calls reuse the extracted folder. Imagenette folders are
also checked for completeness against the ``noisy_imagenette.csv`` listing they ship with (an interrupted
extraction leaves a folder that torchvision alone would accept). Errors say what to do, offline included.
"""
from __future__ import annotations

import csv
import os
import pickle
import urllib.error
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from .data import (DataSplits, DatasetUnavailableError, TransformedSubset, check_image_size, compute_mean_std,
                   dataset_labels)
from .splits import stratified_split, stratified_subsample

DATA_ENV_VAR = "BOOTCAMP_DATA"
DEFAULT_DATA_DIR = Path("~/.cache/gpu-bootcamp/data")
IMAGENETTE_FOLDERS = {"full": "imagenette2", "320px": "imagenette2-320", "160px": "imagenette2-160"}
IMAGENETTE_LISTING = "noisy_imagenette.csv"


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The data folder: ``root`` if given, else ``$BOOTCAMP_DATA``, else ``~/.cache/gpu-bootcamp/data`` (expanded)."""
    if root is None:
        root = os.environ.get(DATA_ENV_VAR, "").strip() or DEFAULT_DATA_DIR
    return Path(root).expanduser()


# --------------------------------------------------------------------------------------------------- errors
def _download_error(name: str, root: Path, err: BaseException) -> DatasetUnavailableError:
    return DatasetUnavailableError(
        f"Could not download {name!r} into {root} ({type(err).__name__}: {err}). This machine may have no network. "
        f"Work offline with load_dataset('digits') (bundled with scikit-learn), or copy the dataset into {root} "
        "on a machine with a network and call again with download=False."
    )


def _missing_error(name: str, root: Path, expected: str) -> DatasetUnavailableError:
    return DatasetUnavailableError(
        f"{name!r} is not under {root} (expected {expected}). Pass download=True on a machine with a network "
        f"(or set {DATA_ENV_VAR} to a folder that has it), or use load_dataset('digits'), which works offline."
    )


def _corrupt_download_error(name: str, root: Path) -> DatasetUnavailableError:
    return DatasetUnavailableError(
        f"The {name!r} archive downloaded into {root} failed its md5 check (a truncated or altered download). Delete "
        "the archive file there and call again with download=True."
    )


# --------------------------------------------------------------------------------------------------- transforms
def _transforms(image_size: int, mean: Sequence[float] | None, std: Sequence[float] | None, augment: bool,
                resize_from_larger: bool):
    from torchvision.transforms import v2

    steps: list[Any] = [v2.ToImage(), v2.RGB()]
    if augment:
        steps += [v2.RandomResizedCrop(image_size, scale=(0.35, 1.0), antialias=True), v2.RandomHorizontalFlip()]
    elif resize_from_larger:
        steps += [v2.Resize(int(round(image_size * 1.14)), antialias=True), v2.CenterCrop(image_size)]
    else:
        steps += [v2.Resize((image_size, image_size), antialias=True)]
    steps.append(v2.ToDtype(torch.float32, scale=True))
    if mean is not None and std is not None:
        steps.append(v2.Normalize(list(mean), list(std)))
    return v2.Compose(steps)


def _build_splits(name: str, base_train: Dataset, base_test: Dataset | None, classes: list[str], image_size: int,
                  val_fraction: float, test_fraction: float, seed: int, augment: bool,
                  max_train_samples: int | None, resize_from_larger: bool, stats_workers: int = 0) -> DataSplits:
    labels = dataset_labels(base_train)
    if base_test is None:  # one pool: split three ways
        tr, va, te = stratified_split(labels, val_fraction, test_fraction, seed)
        test_base, te_idx = base_train, te
    else:  # an official test split exists: split the training pool into train/val only
        tr, va, _ = stratified_split(labels, val_fraction, 0.0, seed)
        test_base, te_idx = base_test, np.arange(len(base_test))
    if max_train_samples is not None and max_train_samples < len(tr):
        tr = np.sort(stratified_subsample(labels[tr], max_train_samples, seed, tr))
    plain = _transforms(image_size, None, None, False, resize_from_larger)
    mean, std = compute_mean_std(TransformedSubset(base_train, tr, plain), seed=seed, num_workers=stats_workers)
    eval_tf = _transforms(image_size, mean, std, False, resize_from_larger)
    train_tf = _transforms(image_size, mean, std, augment, resize_from_larger)
    return DataSplits(name, TransformedSubset(base_train, tr, train_tf), TransformedSubset(base_train, va, eval_tf),
                      TransformedSubset(test_base, te_idx, eval_tf), list(classes), mean, std, image_size)


# --------------------------------------------------------------------------------------------------- CIFAR-10
def _torchvision_cifar10():
    from torchvision.datasets import CIFAR10
    from torchvision.datasets.utils import check_integrity

    class CheckedCIFAR10(CIFAR10):
        """CIFAR10 that can skip the md5 checks (for small files made by tests or a trimmed copy)."""

        def __init__(self, *args: Any, verify_checksums: bool = True, **kwargs: Any):
            self.verify_checksums = verify_checksums
            super().__init__(*args, **kwargs)

        def _check_integrity(self) -> bool:
            if self.verify_checksums:
                return super()._check_integrity()
            return all(os.path.isfile(os.path.join(self.root, self.base_folder, f))
                       for f, _ in self.train_list + self.test_list)

        def _load_meta(self) -> None:
            path = os.path.join(self.root, self.base_folder, self.meta["filename"])
            if self.verify_checksums and not check_integrity(path, self.meta["md5"]):
                raise RuntimeError("Dataset metadata file not found or corrupted.")
            with open(path, "rb") as f:
                self.classes = pickle.load(f, encoding="latin1")[self.meta["key"]]
            self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    return CheckedCIFAR10


def load_cifar10(root: str | os.PathLike | None = None, image_size: int = 32, *, download: bool = False,
                 val_fraction: float = 0.1, seed: int = 0, augment: bool = False,
                 max_train_samples: int | None = None, verify_checksums: bool = True,
                 stats_workers: int = 0) -> DataSplits:
    """CIFAR-10 through torchvision: the official test split as test, a stratified val split from train.

    ``image_size`` above 32 upscales the 32x32 images (e.g. 224 for a full-size ResNet50 stem).
    """
    size = check_image_size(image_size)
    root = data_root(root)
    cls = _torchvision_cifar10()
    try:
        train = cls(str(root), train=True, download=download, verify_checksums=verify_checksums)
        test = cls(str(root), train=False, download=False, verify_checksums=verify_checksums)
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        raise _download_error("cifar10", root, e) from e
    except RuntimeError as e:
        if download and str(e).startswith("File not found or corrupted"):
            raise _corrupt_download_error("cifar10", root) from e
        if "not found or corrupted" in str(e):
            raise _missing_error("cifar10", root, "cifar-10-batches-py/ with data_batch_1..5, test_batch and "
                                 "batches.meta") from e
        raise
    return _build_splits("cifar10", train, test, list(train.classes), size, val_fraction, 0.0, seed, augment,
                         max_train_samples, resize_from_larger=False, stats_workers=stats_workers)


# --------------------------------------------------------------------------------------------------- Imagenette
def _imagenette_folder(size: str) -> str:
    if size not in IMAGENETTE_FOLDERS:
        raise ValueError(f"Imagenette size must be one of {', '.join(IMAGENETTE_FOLDERS)}, got {size!r} ('320px' "
                         "for 224 px training, '160px' for smaller images, 'full' for the original resolution)")
    return IMAGENETTE_FOLDERS[size]


def verify_imagenette(folder: str | os.PathLike, splits: Sequence[str] = ("train", "val")) -> dict[str, int]:
    """Check that every image ``noisy_imagenette.csv`` lists for ``splits`` is in ``folder`` (an extracted
    ``imagenette2*`` folder). Returns ``{split: number of images}``; raises :class:`DatasetUnavailableError`
    naming what is missing (an interrupted extraction) and how to repair it."""
    folder = Path(folder)
    listing = folder / IMAGENETTE_LISTING
    repair = (f"Delete {folder} (keep the .tgz archive beside it: torchvision reuses it after checking its md5) "
              "and call again with download=True, or pass verify=False to use the folder as it is.")
    if not listing.is_file():
        raise DatasetUnavailableError(f"{folder} has no {IMAGENETTE_LISTING}, which every Imagenette download holds: "
                                      f"the extraction did not finish, or this is not an Imagenette folder. {repair}")
    with open(listing, newline="") as f:
        paths = [row["path"] for row in csv.DictReader(f)]
    counts = {}
    for split in splits:
        listed = [p for p in paths if p.split("/", 1)[0] == split]
        missing = [p for p in listed if not (folder / p).is_file()]
        if missing:
            raise DatasetUnavailableError(f"{folder} is incomplete: {len(missing)} of the {len(listed)} {split} images "
                                          f"that {IMAGENETTE_LISTING} lists are missing (e.g. {missing[0]}). {repair}")
        counts[split] = len(listed)
    return counts


def load_imagenette(root: str | os.PathLike | None = None, image_size: int = 160, *, download: bool = False,
                    size: str = "160px", val_fraction: float = 0.1, seed: int = 0, augment: bool = False,
                    max_train_samples: int | None = None, verify: bool = True, stats_workers: int = 0) -> DataSplits:
    """Imagenette (10 easy ImageNet classes, 9,469 train and 3,925 val images) through torchvision: its 'val' split
    as test, a stratified val split from train.

    ``size`` picks the download: ``"160px"`` (shorter side 160 px, 99 MB), ``"320px"`` (for 224 px training,
    341 MB) or ``"full"`` (1.5 GB). ``verify`` checks the folder against its ``noisy_imagenette.csv`` listing.
    """
    from torchvision.datasets import Imagenette

    px = check_image_size(image_size)
    folder_name = _imagenette_folder(size)
    root = data_root(root)
    try:
        train = Imagenette(str(root), split="train", size=size, download=download)
        test = Imagenette(str(root), split="val", size=size, download=False)
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        raise _download_error("imagenette", root, e) from e
    except RuntimeError as e:
        if download and str(e).startswith("File not found or corrupted"):
            raise _corrupt_download_error("imagenette", root) from e
        if "not found" in str(e).lower():
            raise _missing_error("imagenette", root, f"{folder_name}/train/<wnid>/*.JPEG and {folder_name}/val/...") \
                from e
        raise
    except FileNotFoundError as e:  # the size folder exists but train/ or val/ does not
        raise _missing_error("imagenette", root, f"{folder_name}/train/<wnid>/*.JPEG and {folder_name}/val/...") \
            from e
    if verify:
        verify_imagenette(root / folder_name)
    classes = [c[0] if isinstance(c, tuple) else c for c in train.classes]
    return _build_splits("imagenette", train, test, classes, px, val_fraction, 0.0, seed, augment,
                         max_train_samples, resize_from_larger=True, stats_workers=stats_workers)


def write_imagenette_like(root: str | os.PathLike, *, size: str = "160px", train_per_class: int = 8,
                          val_per_class: int = 2, num_classes: int = 10, seed: int = 0) -> Path:
    """Write a small folder shaped like an extracted Imagenette download (``<root>/imagenette2-160/{train,val}/
    <wnid>/*.JPEG`` and its ``noisy_imagenette.csv``) and return the ``imagenette2*`` folder.

    The images are generated (smooth colour fields plus noise, shorter side as in ``size``), so
    :func:`load_imagenette` can be tested and timed, JPEG decoding included, without a network. They carry no
    class information: use them for speed and memory, never for accuracy.
    """
    from concurrent.futures import ThreadPoolExecutor

    from PIL import Image
    from torchvision.datasets import Imagenette

    folder = Path(root) / _imagenette_folder(size)
    wnids = sorted(Imagenette._WNID_TO_CLASS)
    if not 2 <= num_classes <= len(wnids):
        raise ValueError(f"num_classes must be between 2 and {len(wnids)}, got {num_classes}")
    short = {"160px": 160, "320px": 320, "full": 500}[size]
    height, width = short, short * 4 // 3  # landscape, like most Imagenette photos
    rows, jobs = [], []
    for split, per_class in (("train", train_per_class), ("val", val_per_class)):
        for wnid in wnids[:num_classes]:
            (folder / split / wnid).mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                rel = f"{split}/{wnid}/{wnid}_{i:05d}.JPEG"
                jobs.append(rel)
                rows.append([rel, wnid, wnid, wnid, wnid, wnid, str(split == "val")])

    def write(k: int) -> None:
        # A smooth colour field (a 4x4 grid, bicubic-upsampled by Pillow) plus pixel noise; its own seed per image.
        rng = np.random.default_rng([seed, k])
        coarse = (rng.random((4, 4, 3)) * 200 + 28).astype(np.uint8)
        field = np.asarray(Image.fromarray(coarse).resize((width, height), Image.BICUBIC), dtype=np.int16)
        noise = rng.integers(-14, 15, size=(height, width, 3), dtype=np.int16)
        Image.fromarray(np.clip(field + noise, 0, 255).astype(np.uint8)).save(folder / jobs[k], quality=90)

    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:   # Pillow encodes without the GIL
        list(pool.map(write, range(len(jobs))))
    with open(folder / IMAGENETTE_LISTING, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["path", "noisy_labels_0", "noisy_labels_1", "noisy_labels_5", "noisy_labels_25",
                         "noisy_labels_50", "is_valid"])
        writer.writerows(rows)
    return folder


# --------------------------------------------------------------------------------------------------- folders
def load_imagefolder(root: str | os.PathLike, image_size: int = 64, *, val_fraction: float = 0.15,
                     test_fraction: float = 0.15, seed: int = 0, augment: bool = False,
                     max_train_samples: int | None = None, stats_workers: int = 0) -> DataSplits:
    """Any ``root/<class>/<image>`` tree through torchvision's ImageFolder, split three ways (stratified).

    If ``root`` has ``train/`` and ``test/`` (or ``val/``) folders, those are used as given and val comes from train.
    """
    from torchvision.datasets import ImageFolder

    px = check_image_size(image_size)
    root = Path(root).expanduser()
    if not root.is_dir():
        raise DatasetUnavailableError(f"ImageFolder root {root} does not exist. Point it at a folder of class "
                                      "subfolders of images, or use load_dataset('digits'), which works offline.")
    held_out = next((root / d for d in ("test", "val") if (root / d).is_dir()), None)
    try:
        if (root / "train").is_dir() and held_out is not None:
            train, test = ImageFolder(str(root / "train")), ImageFolder(str(held_out))
            return _build_splits("imagefolder", train, test, list(train.classes), px, val_fraction, 0.0, seed,
                                 augment, max_train_samples, resize_from_larger=True, stats_workers=stats_workers)
        pool = ImageFolder(str(root))
    except FileNotFoundError as e:
        raise DatasetUnavailableError(f"No images found under {root}: {e}. Expected root/<class>/<image>.png|jpg.") \
            from e
    return _build_splits("imagefolder", pool, None, list(pool.classes), px, val_fraction, test_fraction, seed,
                         augment, max_train_samples, resize_from_larger=True, stats_workers=stats_workers)

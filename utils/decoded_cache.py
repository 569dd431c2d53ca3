"""Decode a dataset split once into a uint8 cache on disk, so that training reads pixels instead of JPEGs.

Each image is decoded (Pillow), its central square scaled to ``size`` x ``size`` (the shorter side resized to
``size``, the longer one cropped in the middle: ``Resize(size)`` + ``CenterCrop(size)``) and stored as a row of one
``.npy`` file of shape (N, size, size, 3), channels last, with the labels beside it. :func:`decoded_cache` returns a
:class:`DecodedImages` whose ``images`` tensor is memory-mapped (copy-on-write: nothing writes the file): a batch is
one gather of rows the page cache already holds. Imagenette's 9,469 training images at 256 px take 1.9 GB.

A manifest (JSON) keys what the cache was built from: a SHA-256 digest (:func:`source_key`) of every source file's
path, size and modification time (or of in-memory arrays such as CIFAR-10's), the labels, ``size`` and the format
version, beside the format version, ``size``, the count and the first source in plain text. A cache whose manifest
does not match is rebuilt, and the older cache of the same split and size is deleted. The build decodes in parallel
threads (Pillow releases the GIL while it decodes and resizes) with a progress bar.

Where caches live: ``cache_dir`` if given, else ``$BOOTCAMP_CACHE``, else a ``decoded/`` folder beside the dataset
(CIFAR-10 and Imagenette: inside :func:`utils.datasets.data_root`; an ImageFolder: beside its class tree, never in it,
where torchvision would read ``decoded/`` as a class without images and refuse the next load), else
``~/.cache/gpu-bootcamp/decoded``; never inside the course's git checkout (a folder there is replaced by the last one).
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torchvision.datasets import DatasetFolder

from .environment import usable_cpus

CACHE_ENV_VAR = "BOOTCAMP_CACHE"
FALLBACK_DIR = Path("~/.cache/gpu-bootcamp/decoded")
FORMAT_VERSION = 1
_REPO = Path(__file__).resolve().parents[1]


def cache_size(image_size: int) -> int:
    """The side of the cached square for training at ``image_size``: 8/7 of it (256 px for 224 px), the usual
    resize-then-crop ratio, so that evaluation crops the central ``image_size`` and training crops inside it."""
    return int(round(image_size * 8 / 7))


def _inside_repo(path: Path) -> bool:
    try:
        return (_REPO / ".git").exists() and path.resolve().is_relative_to(_REPO)
    except OSError:
        return False


def cache_folder(cache_dir: str | os.PathLike | None = None, dataset: Any = None) -> Path:
    """The folder caches go to: ``cache_dir``, else ``$BOOTCAMP_CACHE``, else ``<dataset.root>/decoded`` (beside the
    data; for an ImageFolder, whose ``root`` is the class tree itself, ``<root>/../decoded``), else
    ``~/.cache/gpu-bootcamp/decoded``; a choice inside the course's git checkout falls back to the last."""
    explicit = cache_dir or os.environ.get(CACHE_ENV_VAR, "").strip() or None
    if explicit:
        folder = Path(explicit).expanduser()
    elif getattr(dataset, "root", None):
        root = Path(dataset.root).expanduser()
        # Every folder in an ImageFolder's root is a class: a decoded/ there would break its next load.
        folder = (root.parent if isinstance(dataset, DatasetFolder) else root) / "decoded"
    else:
        folder = FALLBACK_DIR.expanduser()
    if _inside_repo(folder) or (not explicit and not _writable(folder)):
        folder = FALLBACK_DIR.expanduser()
    return folder


def _writable(folder: Path) -> bool:
    """Whether ``folder`` exists or can be made, and files can be created in it (a read-only dataset mount: no)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return os.access(folder, os.W_OK)
    except OSError:
        return False


@dataclass
class DecodedImages:
    """A decoded split: ``images`` (N, size, size, 3) uint8, memory-mapped; ``labels`` (N,) int64."""

    images: torch.Tensor
    labels: torch.Tensor
    size: int
    path: Path                            # the .npy file of the images
    manifest: dict[str, Any] = field(default_factory=dict)
    build_s: float | None = None          # seconds this call spent building it; None when it was reused

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.images.numel())


# ----------------------------------------------------------------------------------------------------- sources
def _sample_paths(base: Any) -> list[str] | None:
    """Image file paths of a torchvision dataset (Imagenette's ``_samples``, ImageFolder's ``samples``), or None."""
    for attr in ("_samples", "samples"):
        samples = getattr(base, attr, None)
        if samples and isinstance(samples[0], (tuple, list)) and isinstance(samples[0][0], (str, os.PathLike)):
            return [str(s[0]) for s in samples]
    return None


def source_key(base: Any, indices: Sequence[int], labels: np.ndarray, size: int) -> str:
    """A digest of what a cache of ``base[indices]`` at ``size`` px holds: each file's path, bytes and modification
    time (or the bytes of an in-memory ``data`` array), the labels, ``size`` and the format version."""
    h = hashlib.sha256(json.dumps({"version": FORMAT_VERSION, "size": size, "n": len(indices)}).encode())
    paths = _sample_paths(base)
    if paths is not None:
        for i in indices:
            st = os.stat(paths[i])
            h.update(f"{paths[i]}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    elif isinstance(getattr(base, "data", None), np.ndarray):
        h.update(np.ascontiguousarray(base.data[np.asarray(indices)]).tobytes())
    else:
        raise ValueError(f"cannot key a decoded cache on {type(base).__name__}: it has neither image file paths "
                         "(samples) nor an in-memory data array")
    h.update(np.asarray(labels, dtype=np.int64).tobytes())
    return h.hexdigest()


def _square(image: Any, size: int) -> np.ndarray:
    """The central square of a PIL image, scaled to ``size`` x ``size`` (bilinear, antialiased when shrinking)."""
    from PIL import Image

    image = image.convert("RGB")
    w, h = image.size
    short = min(w, h)
    box = ((w - short) / 2, (h - short) / 2, (w + short) / 2, (h + short) / 2)
    if short == size and w == h:
        return np.asarray(image)
    return np.asarray(image.resize((size, size), Image.BILINEAR, box=box))


def _decode(base: Any, paths: list[str] | None, index: int, size: int) -> np.ndarray:
    from PIL import Image

    if paths is not None:
        with Image.open(paths[index]) as image:
            image.draft("RGB", (size, size))     # JPEG: decode at 1/2, 1/4, 1/8 scale where that still covers size
            return _square(image, size)
    data = getattr(base, "data", None)
    if isinstance(data, np.ndarray):
        return _square(Image.fromarray(data[index]), size)
    image = base[index][0]
    if isinstance(image, torch.Tensor):
        image = Image.fromarray(image.permute(1, 2, 0).numpy())
    return _square(image, size)


# ----------------------------------------------------------------------------------------------------- build
def _files(folder: Path, stem: str) -> tuple[Path, Path, Path]:
    return folder / f"{stem}.images.npy", folder / f"{stem}.labels.npy", folder / f"{stem}.manifest.json"


def _load(images_file: Path, labels_file: Path, manifest: dict, size: int) -> DecodedImages:
    # mmap_mode="c": copy-on-write pages, so the tensor is writable for torch and the file is never changed
    pixels = np.load(images_file, mmap_mode="c")
    labels = np.load(labels_file)
    if pixels.shape != (manifest["count"], size, size, 3) or len(labels) != manifest["count"]:
        raise ValueError(f"{images_file} does not have the shape its manifest states")
    return DecodedImages(torch.from_numpy(pixels), torch.from_numpy(labels.astype(np.int64)), size, images_file,
                         manifest)


def decoded_cache(base: Any, indices: Sequence[int], labels: Sequence[int], size: int, *, name: str,
                  cache_dir: str | os.PathLike | None = None, workers: int | None = None,
                  progress: bool = True) -> DecodedImages:
    """The decoded cache of ``base[indices]`` (a torchvision image dataset: Imagenette, ImageFolder, CIFAR-10) at
    ``size`` px, built on the first call and reused while its sources stay the same. ``name`` (e.g.
    ``"imagenette-train"``) names the files; ``workers`` decoding threads (default: every core this process may
    use). Building Imagenette's training split reads 9,469 JPEGs: about 20 s on one core."""
    indices = [int(i) for i in indices]
    labels_arr = np.asarray(labels, dtype=np.int64)
    if len(indices) == 0 or len(labels_arr) != len(indices):
        raise ValueError(f"need one label per index and at least one image, got {len(indices)} indices and "
                         f"{len(labels_arr)} labels")
    folder = cache_folder(cache_dir, base)
    key = source_key(base, indices, labels_arr, size)
    stem = f"{name}-{size}px-{key[:16]}"
    images_file, labels_file, manifest_file = _files(folder, stem)
    if manifest_file.is_file():
        try:
            manifest = json.loads(manifest_file.read_text())
            if manifest.get("key") == key:
                return _load(images_file, labels_file, manifest, size)
        except (OSError, ValueError):
            pass                                      # unreadable or inconsistent: rebuild it
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    tmp = f".tmp-{os.getpid()}-{time.monotonic_ns()}"
    images_tmp, labels_tmp = Path(str(images_file) + tmp), Path(str(labels_file) + tmp)
    out = np.lib.format.open_memmap(images_tmp, mode="w+", dtype=np.uint8, shape=(len(indices), size, size, 3))
    paths = _sample_paths(base)
    cores = len(usable_cpus())
    chunks = [range(k, min(k + 64, len(indices))) for k in range(0, len(indices), 64)]

    def fill(rows: range) -> int:
        for row in rows:
            out[row] = _decode(base, paths, indices[row], size)
        return len(rows)

    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(indices), desc=f"decoding {name} once ({size} px)", unit="img", leave=False)
    try:
        with ThreadPoolExecutor(max_workers=max(1, workers or cores)) as pool:
            for done in pool.map(fill, chunks):
                if bar is not None:
                    bar.update(done)
        out.flush()
        del out
        with open(labels_tmp, "wb") as f:                  # a file object: np.save adds no ".npy" to its name
            np.save(f, labels_arr, allow_pickle=False)
    except BaseException:                                  # interrupted or failed: leave no half-written files
        images_tmp.unlink(missing_ok=True)
        labels_tmp.unlink(missing_ok=True)
        raise
    finally:
        if bar is not None:
            bar.close()
    os.replace(images_tmp, images_file)
    os.replace(labels_tmp, labels_file)
    manifest = {"version": FORMAT_VERSION, "key": key, "name": name, "size": size, "count": len(indices),
                "bytes": len(indices) * size * size * 3, "sources": paths[indices[0]] if paths else type(base).__name__,
                "build_s": round(time.perf_counter() - start, 2), "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    manifest_tmp = Path(str(manifest_file) + tmp)
    manifest_tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(manifest_tmp, manifest_file)
    for old in folder.glob(f"{name}-{size}px-*.manifest.json"):   # an older build of the same split and size
        if old != manifest_file:
            for f in (old, *_files(folder, old.name[:-len(".manifest.json")])[:2]):
                f.unlink(missing_ok=True)
    cache = _load(images_file, labels_file, manifest, size)
    cache.build_s = manifest["build_s"]
    return cache

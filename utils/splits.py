"""Stratified splits: train/val/test index arrays that keep each class's share, and the bundled digits' raw arrays.

The indices are exactly those of scikit-learn's ``train_test_split(..., stratify=labels, random_state=seed)``
(``tests/test_splits.py`` compares the two on many label sets and seeds). They are computed here, with the same
steps and the same ``RandomState`` draws, because importing scikit-learn costs about 1.5 s of CPU in every process
that loads data: every notebook kernel and every rank of a multi-process run.
"""
from __future__ import annotations

import gzip
import importlib.util
from math import ceil
from pathlib import Path
from typing import Sequence

import numpy as np
import torch


def bundled_digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 1,797 handwritten digits as ``(images float64 (N, 8, 8) with values 0..16, labels int (N,))``.

    Read from the file scikit-learn installs (``sklearn/datasets/data/digits.csv.gz``), as its ``load_digits`` does,
    without importing scikit-learn.
    """
    spec = importlib.util.find_spec("sklearn")  # finds the package without running its __init__
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz" if (
        spec is not None and spec.submodule_search_locations) else None
    if path is None or not path.is_file():
        from sklearn.datasets import load_digits  # a layout this reader does not know: ask scikit-learn
        bunch = load_digits()
        return bunch.images, bunch.target
    with gzip.open(path, mode="rt", encoding="utf-8") as f:
        data = np.loadtxt(f, delimiter=",")
    return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)


def _approximate_mode(class_counts: np.ndarray, n_draws: int, rng: np.random.RandomState) -> np.ndarray:
    """How many of ``n_draws`` samples each class gets: its share rounded down, the leftover samples going to the
    largest remainders, ties broken at random (scikit-learn's ``utils.extmath._approximate_mode``)."""
    continuous = class_counts / class_counts.sum() * n_draws
    floored = np.floor(continuous)
    need_to_add = int(n_draws - floored.sum())
    if need_to_add > 0:
        remainder = continuous - floored
        for value in np.sort(np.unique(remainder))[::-1]:
            (ties,) = np.where(remainder == value)
            add_now = min(len(ties), need_to_add)
            floored[rng.choice(ties, size=add_now, replace=False)] += 1
            need_to_add -= add_now
            if need_to_add == 0:
                break
    return floored.astype(int)


def stratified_shuffle_split(labels: np.ndarray, n_train: int, n_test: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``n_train`` and ``n_test`` samples of ``labels``, disjoint, each keeping the class shares.

    The first split of scikit-learn's ``StratifiedShuffleSplit(train_size=n_train, test_size=n_test,
    random_state=seed)``, draw for draw. Raises a ValueError when a class has one sample or a side would get fewer
    samples than there are classes.
    """
    classes, y_indices, class_counts = np.unique(labels, return_inverse=True, return_counts=True)
    if class_counts.min() < 2:
        raise ValueError(f"classes {classes[class_counts < 2].tolist()} have only 1 sample: a stratified split "
                         "needs at least 2 of every class")
    for side, n in (("train", n_train), ("test", n_test)):
        if n < len(classes):
            raise ValueError(f"the {side} side would get {n} samples, fewer than the {len(classes)} classes")
    class_positions = np.split(np.argsort(y_indices, kind="stable"), np.cumsum(class_counts)[:-1])
    rng = np.random.RandomState(seed)
    n_i = _approximate_mode(class_counts, n_train, rng)
    t_i = _approximate_mode(class_counts - n_i, n_test, rng)
    train: list[int] = []
    test: list[int] = []
    for i in range(len(classes)):
        shuffled = class_positions[i].take(rng.permutation(class_counts[i]), mode="clip")
        train.extend(shuffled[: n_i[i]])
        test.extend(shuffled[n_i[i]: n_i[i] + t_i[i]])
    return rng.permutation(train), rng.permutation(test)


def _holdout_split(indices: np.ndarray, labels: np.ndarray, *, test_fraction: float | None = None,
                   n_train: int | None = None, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``train_test_split(indices, test_size=test_fraction, stratify=labels)``, or ``train_size=n_train``: the test
    side gets ``ceil(test_fraction * n)`` samples, the train side the rest (or exactly ``n_train``)."""
    n = len(indices)
    n_test = ceil(test_fraction * n) if test_fraction is not None else n - n_train
    n_train = n - n_test if n_train is None else n_train
    if n_train <= 0 or n_test <= 0:
        raise ValueError(f"{n} samples leave {n_train} for training and {n_test} held out")
    train, test = stratified_shuffle_split(labels, n_train, n_test, seed)
    return indices[train], indices[test]


def stratified_split(labels: Sequence[int] | np.ndarray | torch.Tensor, val_fraction: float = 0.15,
                     test_fraction: float = 0.15, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split sample indices into train/val/test so that each split keeps the class proportions.

    Returns three disjoint, sorted index arrays that together cover every sample. ``val_fraction`` or
    ``test_fraction`` may be 0 (that split is then empty). Two stratified hold-outs, as scikit-learn's
    ``train_test_split`` would make them: first val+test apart from train, then test apart from val.
    """
    y = np.asarray(labels.cpu() if isinstance(labels, torch.Tensor) else labels)
    if y.ndim != 1 or len(y) == 0:
        raise ValueError("labels must be a non-empty 1-D sequence of class indices")
    for name, f in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
        if not 0 <= f < 1:
            raise ValueError(f"{name} must be in [0, 1), got {f}")
    if val_fraction + test_fraction >= 1:
        raise ValueError(f"val_fraction + test_fraction must be < 1, got {val_fraction + test_fraction}")
    idx = np.arange(len(y))
    holdout = val_fraction + test_fraction
    if holdout == 0:
        return idx, idx[:0], idx[:0]
    try:
        train_idx, rest_idx = _holdout_split(idx, y, test_fraction=holdout, seed=seed)
        if test_fraction == 0:
            return np.sort(train_idx), np.sort(rest_idx), idx[:0]
        if val_fraction == 0:
            return np.sort(train_idx), idx[:0], np.sort(rest_idx)
        val_idx, test_idx = _holdout_split(rest_idx, y[rest_idx], test_fraction=test_fraction / holdout, seed=seed)
    except ValueError as e:
        raise ValueError(f"cannot split {len(y)} samples of {len(np.unique(y))} classes into val_fraction="
                         f"{val_fraction} and test_fraction={test_fraction} keeping class proportions ({e}). Every "
                         "split needs at least as many samples as there are classes, and every class at least 2 "
                         "samples in what is split: use more samples, larger fractions, or a fraction of 0.") from e
    return np.sort(train_idx), np.sort(val_idx), np.sort(test_idx)


def stratified_subsample(labels: np.ndarray, n: int, seed: int, indices: np.ndarray | None = None) -> np.ndarray:
    """``n`` of ``indices`` (default: all positions) keeping class proportions (``labels`` belong to ``indices``).

    ``n >= len(indices)`` returns them all. Otherwise both the ``n`` kept and the ``len(indices) - n`` left out must
    hold at least as many samples as there are classes (a ValueError says which limit ``n`` broke and what to ask for
    instead), and every class needs at least 2 samples. Each class's share is rounded, so a class too rare for its
    share to round up to one sample can still be missing from the kept part or from the part left out.
    """
    idx = np.arange(len(labels)) if indices is None else np.asarray(indices)
    if n >= len(idx):
        return idx
    num_classes = len(np.unique(np.asarray(labels)))
    if n < num_classes:
        raise ValueError(f"a stratified subsample of {n} samples cannot hold one of each of the {num_classes} "
                         f"classes: ask for at least {num_classes}")
    if len(idx) - n < num_classes:
        raise ValueError(f"keeping {n} of {len(idx)} samples leaves out {len(idx) - n}, fewer than the {num_classes} "
                         f"classes, and a stratified split (scikit-learn's) needs at least as many samples as "
                         f"classes on each side: keep them all (n >= {len(idx)}) or at most {len(idx) - num_classes}")
    keep, _ = _holdout_split(idx, np.asarray(labels), n_train=n, seed=seed)
    return keep

"""utils.splits: the same indices as scikit-learn's stratified train_test_split, and the digits read without it."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from utils import splits as S

LABEL_SETS = {
    "balanced": np.repeat(np.arange(5), 40),
    "skewed": np.array([0] * 50 + [1] * 7 + [2] * 13 + [3] * 2),  # at 0.5, two remainders tie: the random tie-break
    "shuffled_digits": np.random.default_rng(0).permutation(np.repeat(np.arange(10), 31)[:301]),
    "string_classes": np.array(list("abcab" * 12)),
}


@pytest.mark.parametrize("name", LABEL_SETS)
@pytest.mark.parametrize("seed", [0, 1, 7, 123])
@pytest.mark.parametrize("test_fraction", [0.15, 0.3, 0.5])
def test_holdout_split_is_scikit_learns_index_for_index(name, seed, test_fraction):
    labels = LABEL_SETS[name]
    idx = np.arange(100, 100 + len(labels))  # not positions: the indices themselves must be returned
    ours = S._holdout_split(idx, labels, test_fraction=test_fraction, seed=seed)
    theirs = train_test_split(idx, test_size=test_fraction, stratify=labels, random_state=seed)
    assert [a.tolist() for a in ours] == [b.tolist() for b in theirs]


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("n", [20, 51, 150])
def test_subsample_is_scikit_learns_train_size_split(seed, n):
    labels = LABEL_SETS["balanced"]
    idx = np.arange(len(labels)) * 2
    expected, _ = train_test_split(idx, train_size=n, stratify=labels, random_state=seed)
    assert S.stratified_subsample(labels, n, seed, idx).tolist() == expected.tolist()


def test_subsample_says_which_limit_n_broke():
    labels = LABEL_SETS["balanced"]                  # 200 samples of 5 classes
    with pytest.raises(ValueError, match="leaves out 3, fewer than the 5 classes.*at most 195"):
        S.stratified_subsample(labels, 197, 0)
    with pytest.raises(ValueError, match="at least 5"):
        S.stratified_subsample(labels, 3, 0)
    assert len(S.stratified_subsample(labels, 195, 0)) == 195 and len(S.stratified_subsample(labels, 200, 0)) == 200


def test_three_way_split_matches_two_scikit_learn_hold_outs():
    labels = load_digits().target
    tr, va, te = S.stratified_split(labels, 0.15, 0.15, seed=0)
    idx = np.arange(len(labels))
    tr_sk, rest = train_test_split(idx, test_size=0.3, stratify=labels, random_state=0)
    va_sk, te_sk = train_test_split(rest, test_size=0.5, stratify=labels[rest], random_state=0)
    for ours, theirs in ((tr, tr_sk), (va, va_sk), (te, te_sk)):
        assert ours.tolist() == sorted(theirs.tolist())


@pytest.mark.parametrize("labels,match", [
    (np.array([0, 0, 1, 1, 2]), r"classes \[2\] have only 1 sample"),
    (np.repeat(np.arange(10), 3), "test side would get 9 samples, fewer than the 10 classes"),
])
def test_impossible_stratified_splits_say_why(labels, match):
    with pytest.raises(ValueError, match=match):
        S._holdout_split(np.arange(len(labels)), labels, test_fraction=0.3, seed=0)


@pytest.mark.slow  # a fresh process imports torch: about 2.5 s of CPU
def test_bundled_digits_are_scikit_learns_and_load_without_importing_it():
    images, labels = S.bundled_digits()
    bunch = load_digits()
    assert images.shape == (1797, 8, 8) and np.array_equal(images, bunch.images)
    assert labels.dtype.kind == "i" and np.array_equal(labels, bunch.target)
    code = ("import sys, utils; utils.load_dataset('digits', image_size=8); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'scipy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"loading the digits imported {out.strip()}: every process pays ~1.5 s for it"

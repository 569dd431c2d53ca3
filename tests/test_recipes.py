"""utils.recipes: the small digits classifier the evaluation/inspection/export days start from."""
from __future__ import annotations

import pytest
import torch

from utils.recipes import train_classifier

pytest.importorskip("sklearn.datasets")  # its import (~seconds, once) is paid at collection, not in a test


def test_train_classifier_learns_something_and_returns_eval_model():
    tc = train_classifier("small_cnn", image_size=8, epochs=2, max_train_samples=300, verbose=False)
    assert not tc.model.training
    assert len(tc.history) == 2 and tc.seconds > 0
    # 10 balanced classes: chance is ~10 %; two epochs on 400 real digits must beat it clearly.
    assert tc.history.last["val_accuracy"] > 0.3
    val, test = tc.loaders(64)
    x, _ = next(iter(test))
    assert tc.model(x).shape == (x.shape[0], 10)


def test_train_classifier_is_reproducible():
    a = train_classifier("small_cnn", image_size=8, epochs=1, max_train_samples=200, verbose=False)
    b = train_classifier("small_cnn", image_size=8, epochs=1, max_train_samples=200, verbose=False)
    for pa, pb in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(pa, pb)

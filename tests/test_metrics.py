"""utils.metrics: confusion matrix convention (rows = true) and every metric, checked against scikit-learn."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import confusion_matrix as sk_confusion
from sklearn.metrics import precision_recall_fscore_support
from torch import nn

from utils.metrics import classification_report, collect_predictions, confusion_matrix


def _random_preds(n=300, c=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    targets = torch.randint(0, c, (n,), generator=g)
    preds = torch.where(torch.rand(n, generator=g) < 0.6, targets, torch.randint(0, c, (n,), generator=g))
    return preds, targets


def test_confusion_rows_are_true_classes():
    cm = confusion_matrix(torch.tensor([1, 1, 2]), torch.tensor([0, 1, 1]), 3)
    assert cm.tolist() == [[0, 1, 0], [0, 1, 1], [0, 0, 0]]
    assert cm.dtype == torch.int64


def test_confusion_matches_sklearn_and_keeps_absent_classes():
    preds, targets = _random_preds(c=4)
    cm = confusion_matrix(preds, targets, 6)
    assert cm.shape == (6, 6) and cm[4:].sum() == 0
    np.testing.assert_array_equal(cm.numpy(), sk_confusion(targets, preds, labels=range(6)))


def test_confusion_rejects_bad_input():
    with pytest.raises(ValueError, match="same number"):
        confusion_matrix(torch.tensor([0, 1]), torch.tensor([0]), 2)
    with pytest.raises(ValueError, match="outside"):
        confusion_matrix(torch.tensor([0, 3]), torch.tensor([0, 1]), 3)


@pytest.mark.parametrize("average", ["macro", "weighted", "micro"])
def test_report_matches_sklearn(average):
    preds, targets = _random_preds()
    r = classification_report(confusion_matrix(preds, targets, 5))
    p, rc, f, _ = precision_recall_fscore_support(targets, preds, average=average, zero_division=0)
    got = getattr(r, average)
    assert got["precision"] == pytest.approx(p) and got["recall"] == pytest.approx(rc)
    assert got["f1"] == pytest.approx(f)


def test_report_per_class_and_zero_division():
    cm = torch.tensor([[3, 1, 0], [2, 2, 0], [0, 0, 0]])  # class 2 never occurs and is never predicted
    r = classification_report(cm)
    assert r.precision.tolist() == pytest.approx([3 / 5, 2 / 3, 0.0])
    assert r.recall.tolist() == pytest.approx([3 / 4, 2 / 4, 0.0])
    assert r.accuracy == pytest.approx(5 / 8)
    assert r.micro["f1"] == pytest.approx(r.accuracy)
    assert torch.equal(r.per_class_accuracy, r.recall)
    assert r.support.tolist() == [4, 4, 0]


class _DropoutNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.9)

    def forward(self, x):
        return self.drop(x)


def test_collect_predictions_uses_eval_mode_and_restores_it():
    model = _DropoutNet().train()
    x = torch.randn(10, 3)
    loader = [(x[:6], torch.zeros(6)), (x[6:], torch.ones(4))]
    p = collect_predictions(model, loader, "cpu")
    assert torch.equal(p.logits, x)  # dropout off
    assert p.targets.tolist() == [0] * 6 + [1] * 4 and p.targets.dtype == torch.int64
    assert model.training
    assert p.preds.tolist() == x.argmax(1).tolist()


def test_f1_divides_by_precision_plus_recall_below_one():
    # Class 0: precision 1/2, recall 1/4, so F1 = 2PR/(P+R) = 1/3 (a denominator clamped to 1 would give 1/4).
    report = classification_report(torch.tensor([[1, 3], [1, 0]]))
    assert abs(report.f1[0].item() - 1 / 3) < 1e-12
    assert report.f1[1].item() == 0.0


def test_confusion_matrix_reads_nothing_back():
    """An evaluation loop may call it every batch: no host read, no data-dependent output size (bincount)."""
    from utils.sync_ops import count_reads

    preds, targets = _random_preds(c=4)
    with count_reads() as reads:
        cm = confusion_matrix(preds, targets, 4)
    assert reads["n"] == 0, reads["by_method"]
    np.testing.assert_array_equal(cm.numpy(), sk_confusion(targets, preds, labels=range(4)))


def test_confusion_matrix_under_deterministic_algorithms():
    torch.use_deterministic_algorithms(True)
    try:
        cm = confusion_matrix(torch.tensor([1, 0, 1]), torch.tensor([1, 1, 1]), 2)
    finally:
        torch.use_deterministic_algorithms(False)
    assert cm.tolist() == [[0, 0], [1, 2]]


def test_confusion_matrix_rejects_negative_classes_and_mixed_devices():
    with pytest.raises(ValueError, match="outside"):
        confusion_matrix(torch.tensor([-1, 0]), torch.tensor([0, 1]), 2)
    assert confusion_matrix(torch.tensor([], dtype=torch.int64), torch.tensor([], dtype=torch.int64), 3).sum() == 0


def test_paired_difference_counts_only_the_samples_the_two_disagree_on():
    import numpy as np
    from utils.metrics import paired_difference

    # a and b share 90 right and 2 wrong answers; a alone gets 6 right, b alone 2: a gain of 4 over 8 disagreements
    a = np.array([True] * 90 + [False] * 2 + [True] * 6 + [False] * 2)
    b = np.array([True] * 90 + [False] * 2 + [False] * 6 + [True] * 2)
    d = paired_difference(a, b)
    assert (d.gain, d.disagreements) == (4, 8)
    assert d.noise == pytest.approx(2 * 8 ** 0.5) and not d.beyond_noise
    # the same gain with no disagreement but those four images is beyond the noise (2 * sqrt(4) = 4 is not > 4)
    assert paired_difference(a[:96], np.r_[b[:92], [False] * 4]).beyond_noise is False
    assert paired_difference(torch.ones(100, dtype=torch.bool), torch.zeros(100, dtype=torch.bool)).beyond_noise
    assert paired_difference(b, a).gain == -4, "the sign says which is better"


def test_paired_difference_validates():
    from utils.metrics import paired_difference

    with pytest.raises(ValueError, match="same samples"):
        paired_difference([True, False], [True])
    with pytest.raises(ValueError, match="z must be"):
        paired_difference([True], [True], z=0)

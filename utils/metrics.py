"""Classification metrics from a confusion matrix (Day 28 onwards).

Convention everywhere in the course (the same as scikit-learn's and torchmetrics'): ``cm[i, j]`` counts the samples
whose **true** class is ``i`` (row) and whose **predicted** class is ``j`` (column). So a row sum is the class's
support (how many samples truly belong to it) and a column sum is how often the model predicted it:

* recall_c    = cm[c, c] / row_sum_c     (of the true c, how many were found; also "per-class accuracy")
* precision_c = cm[c, c] / column_sum_c  (of the predicted c, how many were right)

A class with no support (or never predicted) gets 0 for the undefined ratio, as scikit-learn's
``zero_division=0``. All ratios are plain floats or float64 tensors (fractions in [0, 1], not percentages); counts
(the confusion matrix, the support) are int64.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch
from torch import nn

from .device import synchronize
from .modes import modes_kept


def confusion_matrix(preds: torch.Tensor, targets: torch.Tensor, num_classes: int) -> torch.Tensor:
    """``num_classes x num_classes`` int64 counts, rows = true class, columns = predicted class.

    Counted on the device of the inputs without reading anything back, so that an evaluation loop can call it every
    batch without a host sync on a GPU: each (true, predicted) pair becomes one integer ``true * C + pred``, added
    into a tensor of fixed length ``C * C`` with ``scatter_add_`` (``torch.bincount`` would read the maximum back
    to size its output). ``num_classes`` is explicit so that a class that never occurs still has its row and column.

    A class outside ``[0, num_classes - 1]`` raises ``ValueError`` on the CPU; on a CUDA device the same check is a
    device-side assertion (``torch._assert_async``), reported at the next synchronisation, never a host read. On other
    devices (MPS) this function does not check the values.
    """
    preds = torch.as_tensor(preds).reshape(-1).long()
    targets = torch.as_tensor(targets).reshape(-1).long()
    if preds.shape != targets.shape:
        raise ValueError(f"preds and targets need the same number of elements, got {preds.numel()} and "
                         f"{targets.numel()}")
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    if preds.device != targets.device:
        raise ValueError(f"preds are on {preds.device} and targets on {targets.device}: move them to one device")
    _check_classes(preds, targets, num_classes)
    flat = targets * num_classes + preds
    counts = torch.zeros(num_classes * num_classes, dtype=torch.int64, device=flat.device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    return counts.reshape(num_classes, num_classes)


def _check_classes(preds: torch.Tensor, targets: torch.Tensor, num_classes: int) -> None:
    """Every class in range, checked without a host read (see :func:`confusion_matrix`)."""
    if preds.device.type not in ("cpu", "cuda") or preds.numel() == 0:
        return
    inside = ((preds >= 0) & (preds < num_classes) & (targets >= 0) & (targets < num_classes)).all()
    message = f"preds or targets hold a class outside [0, {num_classes - 1}]"
    try:
        torch._assert_async(inside, message)
    except RuntimeError as e:            # the CPU checks at once; a CUDA device asserts asynchronously
        raise ValueError(message) from e


def _safe_div(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    # 0 where den == 0; den may be a fraction (F1's P + R), so no clamp to 1.
    return torch.where(den > 0, num / torch.where(den > 0, den, torch.ones_like(den)), torch.zeros_like(num))


@dataclass
class ClassificationReport:
    """Every metric of a confusion matrix. Per-class precision, recall and F1 are float64 of length
    ``num_classes``; ``support`` (like ``confusion``) holds int64 counts."""

    confusion: torch.Tensor
    accuracy: float
    precision: torch.Tensor
    recall: torch.Tensor
    f1: torch.Tensor
    support: torch.Tensor
    macro: dict[str, float]
    weighted: dict[str, float]
    micro: dict[str, float]

    @property
    def per_class_accuracy(self) -> torch.Tensor:
        """The seed's ``acc_per_class``: diag / row sums, which *is* the recall."""
        return self.recall

    def as_dict(self) -> dict[str, object]:
        return {"accuracy": self.accuracy, "precision": self.precision.tolist(), "recall": self.recall.tolist(),
                "f1": self.f1.tolist(), "support": self.support.tolist(), "macro": self.macro,
                "weighted": self.weighted, "micro": self.micro}


def classification_report(cm: torch.Tensor) -> ClassificationReport:
    """All metrics from one confusion matrix (rows = true, columns = predicted), computed once, on the CPU."""
    cm = torch.as_tensor(cm).detach().to("cpu", torch.float64)
    if cm.ndim != 2 or cm.shape[0] != cm.shape[1]:
        raise ValueError(f"a confusion matrix is square, got shape {tuple(cm.shape)}")
    tp = cm.diag()
    support = cm.sum(dim=1)          # true count per class (row sums)
    predicted = cm.sum(dim=0)        # predicted count per class (column sums)
    total = cm.sum()
    precision = _safe_div(tp, predicted)
    recall = _safe_div(tp, support)
    f1 = _safe_div(2 * precision * recall, precision + recall)
    accuracy = float(tp.sum() / total) if total > 0 else 0.0
    weights = support / total if total > 0 else torch.zeros_like(support)
    macro = {"precision": float(precision.mean()), "recall": float(recall.mean()), "f1": float(f1.mean())}
    weighted = {"precision": float((precision * weights).sum()), "recall": float((recall * weights).sum()),
                "f1": float((f1 * weights).sum())}
    # Micro: pool every sample. In single-label multiclass, sum(FP) == sum(FN), so all three equal the accuracy.
    micro_p = float(_safe_div(tp.sum(), predicted.sum()))
    micro_r = float(_safe_div(tp.sum(), support.sum()))
    micro_f1 = 2 * micro_p * micro_r / (micro_p + micro_r) if micro_p + micro_r > 0 else 0.0
    micro = {"precision": micro_p, "recall": micro_r, "f1": micro_f1}
    return ClassificationReport(cm.long(), accuracy, precision, recall, f1, support.long(), macro, weighted, micro)


@dataclass
class Predictions:
    """Everything one pass over a loader produced, on the CPU, in the loader's order."""

    logits: torch.Tensor   # (N, C) float32
    targets: torch.Tensor  # (N,) int64

    @property
    def preds(self) -> torch.Tensor:
        return self.logits.argmax(dim=1)

    @property
    def probs(self) -> torch.Tensor:
        return self.logits.softmax(dim=1)

    @property
    def num_classes(self) -> int:
        return self.logits.shape[1]

    def confusion(self) -> torch.Tensor:
        return confusion_matrix(self.preds, self.targets, self.num_classes)


def collect_predictions(model: nn.Module, loader: Iterable, device: torch.device | str) -> Predictions:
    """Logits and targets for every sample of ``loader`` (use an unshuffled loader to keep dataset order),
    computed in eval mode under ``torch.inference_mode``. The mode of the model and of each submodule is restored
    afterwards (a BatchNorm frozen in eval mode stays frozen)."""
    dev = torch.device(device)
    logits: list[torch.Tensor] = []
    targets: list[torch.Tensor] = []
    with modes_kept(model), torch.inference_mode():
        model.eval()
        for images, labels in loader:
            logits.append(model(images.to(dev)).float().cpu())
            targets.append(torch.as_tensor(labels).cpu())
    synchronize(dev)
    if not logits:
        raise ValueError("the loader yielded no batches")
    return Predictions(torch.cat(logits), torch.cat(targets).long())


@dataclass(frozen=True)
class PairedDifference:
    """Two classifiers scored on the same test samples: how many more samples ``a`` gets right than ``b``, and the
    test set's sampling noise of that number (all counts in samples, e.g. test images)."""

    gain: int              # samples a gets right minus samples b gets right
    disagreements: int     # samples exactly one of the two gets right: only these move ``gain``
    noise: float           # z * sqrt(disagreements): the noise level ``gain`` is judged against

    @property
    def beyond_noise(self) -> bool:
        return abs(self.gain) > self.noise


def paired_difference(right_a, right_b, *, z: float = 2.0) -> PairedDifference:
    """Compare two classifiers on the same samples from their per-sample correctness (boolean arrays or tensors).

    Only the samples one of them gets right and the other not move the difference (McNemar's test). Were the two
    equally good, each of those would go either way with even odds, so ``gain`` would have a standard deviation of
    ``sqrt(disagreements)``; a gain within ``z`` of those is within the test set's noise. Seed-to-seed variation of
    training is not in it: a gain beyond it from one seed is consistent with a real difference, not proof of one.
    """
    a = torch.as_tensor(right_a).reshape(-1).bool()
    b = torch.as_tensor(right_b).reshape(-1).bool()
    if a.shape != b.shape:
        raise ValueError(f"right_a and right_b must mark the same samples: got {a.numel()} and {b.numel()} values")
    if z <= 0:
        raise ValueError(f"z must be > 0 (how many standard deviations count as noise), got {z}")
    disagreements = int((a != b).sum())
    return PairedDifference(int(a.sum()) - int(b.sum()), disagreements, z * disagreements ** 0.5)

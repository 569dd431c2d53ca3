"""Day 27 · Troubleshooting clinic: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

_MODULE_HEAD = '''%%writefile {SKIP_MODULE}
"""Skip the samples a dataset fails to load, and report their indices (a module, so that spawn workers import it)."""
'''

ALTERNATIVES = [
    Alternative(
        cell="day27_max_batch",
        why="solves the linear memory model for b in closed form, then corrects the rounding by stepping one batch "
            "down or up",
        source='''def max_batch_that_fits(breakdown, budget_bytes, overhead_fraction=0.1):
    def peak(b):
        return breakdown.at_batch(b).peak_bytes(overhead_fraction)
    if peak(1) > budget_bytes:
        return 0
    per_sample = peak(2) - peak(1)
    b = 1 + int((budget_bytes - peak(1)) // max(per_sample, 1))
    while b > 1 and peak(b) > budget_bytes:
        b -= 1
    while peak(b + 1) <= budget_bytes:
        b += 1
    return b
'''),
    Alternative(
        cell="day27_max_batch",
        why="doubles an upper bound, then lets bisect.bisect_right (with key=) find the first batch that does not fit",
        source='''import bisect

def max_batch_that_fits(breakdown, budget_bytes, overhead_fraction=0.1):
    peak = lambda b: breakdown.at_batch(b).peak_bytes(overhead_fraction)
    hi = 1
    while peak(hi) <= budget_bytes:
        hi *= 2
    # batches 1 .. hi; peak grows with the batch, so the fitting ones come first
    return bisect.bisect_right(range(1, hi + 1), budget_bytes, key=peak)
'''),
    Alternative(
        cell="day27_guarded_step",
        why="reads the finiteness checks with .item(), zeroes with the default zero_grad(), clips with "
            "error_if_nonfinite=False",
        source='''def guarded_step(model, images, targets, optimizer, max_grad_norm=1.0):
    if not torch.isfinite(images).all().item():
        raise ValueError(f"bad input batch: {int((~torch.isfinite(images)).sum())} non-finite values")
    out = model(images)
    loss = nn.functional.cross_entropy(out, targets)
    if not torch.isfinite(loss).item():
        return None
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_grad_norm, error_if_nonfinite=False)
    optimizer.step()
    return float(loss)
'''),
    Alternative(
        cell="day27_guarded_step",
        why="checks NaN and inf separately, reads the loss once as a Python float with math.isfinite, and returns "
            "that value",
        source='''import math

def guarded_step(model, images, targets, optimizer, max_grad_norm=1.0):
    if torch.isnan(images).any() or torch.isinf(images).any():
        raise ValueError("NaN or inf in the input images")
    loss = nn.functional.cross_entropy(model(images), targets)
    value = loss.item()
    if not math.isfinite(value):
        return None
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(model.parameters()), max_grad_norm)
    optimizer.step()
    return value
'''),
    Alternative(
        cell="day27_guarded_step",
        why="zeroes the gradients with model.zero_grad() (the optimizer holds every parameter) and clips with "
            "clip_grad_norm_'s foreach path",
        source='''def guarded_step(model, images, targets, optimizer, max_grad_norm=1.0):
    if not torch.isfinite(images).all():
        raise ValueError("the input batch holds NaN or inf")
    loss = nn.functional.cross_entropy(model(images), targets)
    if not torch.isfinite(loss):
        return None
    model.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm, foreach=True)
    optimizer.step()
    return loss.item()
'''),
    Alternative(
        cell="day27_accuracy",
        why="inference_mode instead of no_grad, counts kept as a device tensor and read once, the mode restored "
            "without try/finally",
        source='''def accuracy(model, loader, device):
    mode = model.training
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=device)
    total = 0
    with torch.inference_mode():
        for xb, yb in loader:
            correct += (model(xb.to(device)).argmax(dim=1) == yb.to(device)).sum()
            total += yb.shape[0]
    model.train(mode)
    return correct.item() / total
'''),
    Alternative(
        cell="day27_accuracy",
        why="collects every prediction, then one float32 mean (correct to float32's rounding)",
        source='''def accuracy(model, loader, device):
    was_training = model.training
    model.eval()
    preds, labels = [], []
    try:
        with torch.no_grad():
            for xb, yb in loader:
                preds.append(model(xb.to(device)).argmax(1).cpu())
                labels.append(yb)
    finally:
        model.train(was_training)
    return (torch.cat(preds) == torch.cat(labels)).float().mean().item()
'''),
    Alternative(
        cell="day27_train_epoch",
        why="keeps the detached, sample-weighted losses on the device and reads their sum once at the end",
        source='''def train_epoch(model, loader, optimizer, device):
    model.train()
    weighted, n = [], 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        optimizer.step()
        weighted.append(loss.detach() * yb.shape[0])
        n += yb.shape[0]
    return torch.stack(weighted).sum().item() / n
'''),
    Alternative(
        cell="day27_train_epoch",
        why="a float64 running sum on the device, added to under torch.no_grad() (so it never joins a graph), read "
            "once with float()",
        source='''def train_epoch(model, loader, optimizer, device):
    model.train()
    total = torch.zeros((), dtype=torch.float64, device=device)
    count = 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            total += loss * len(yb)
        count += len(yb)
    return float(total) / count
'''),
    Alternative(
        cell="day27_skip_bad_samples",
        why="the marker is a plain tuple ('__bad__', index, message), checked by its first element",
        source=_MODULE_HEAD + '''import torch.utils.data as data

BAD = "__bad__"


class SkipBadSamples(data.Dataset):
    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        try:
            return self.dataset[index]
        except Exception as e:
            return (BAD, index, str(e))


def _is_bad(sample):
    return isinstance(sample, tuple) and len(sample) == 3 and isinstance(sample[0], str) and sample[0] == BAD


def collate_skipping_bad(batch):
    failed = [s[1] for s in batch if _is_bad(s)]
    kept = [s for s in batch if not _is_bad(s)]
    if len(kept) == 0:
        return None, None, failed
    images, labels = data.default_collate(kept)
    return images, labels, failed
'''),
    Alternative(
        cell="day27_skip_bad_samples",
        why="a dataclass marker holding the exception's type name, and the good samples collated field by field "
            "with torch.stack / torch.tensor semantics of default_collate",
        source=_MODULE_HEAD + '''from dataclasses import dataclass

import torch
from torch.utils.data import Dataset, default_collate


@dataclass
class Failed:
    index: int
    kind: str


class SkipBadSamples(Dataset):
    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        try:
            sample = self.dataset[i]
        except Exception as error:
            return Failed(i, type(error).__name__)
        return sample


def collate_skipping_bad(batch):
    bad_indices = []
    good = []
    for sample in batch:
        if isinstance(sample, Failed):
            bad_indices.append(sample.index)
        else:
            good.append(sample)
    if not good:
        return None, None, bad_indices
    collated = default_collate(good)
    return collated[0], collated[1], bad_indices
'''),
    Alternative(cell="day27_skip_bad_samples",
                why="the failed indices collected in a tuple (a sequence, as the visible test reads it with list())",
                find="bad = [s.index for s in batch if isinstance(s, BadSample)]",
                replace="bad = tuple(s.index for s in batch if isinstance(s, BadSample))"),
]

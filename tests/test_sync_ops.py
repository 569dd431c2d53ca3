"""utils.sync_ops: the operations that read back inside their own kernels are counted, the fixed-size ones not."""
from __future__ import annotations

import torch

from utils.sync_ops import count_reads, count_sync_ops


def test_data_dependent_operations_are_counted_whoever_calls_them():
    x = torch.tensor([0, 1, 1, 3])
    with count_sync_ops() as ops:
        torch.bincount(x, minlength=5)
        x[x > 0]
        torch.unique(x)
        x.nonzero()
        torch.masked_select(x, x > 1)
        torch.histc(x.float())                       # min == max == 0: it finds the range from the data
    assert ops["by_op"] == {"bincount": 1, "index (boolean mask)": 1, "_unique2": 1, "nonzero": 1,
                            "masked_select": 1, "histc": 1}


def test_fixed_size_operations_are_not_counted():
    x = torch.tensor([0, 1, 1, 3])
    with count_sync_ops() as ops:
        torch.zeros(5, dtype=torch.int64).scatter_add_(0, x, torch.ones_like(x))
        torch.zeros(5, dtype=torch.int64).index_add_(0, x, torch.ones_like(x))
        torch.where(x > 0, x, 0)
        torch.histc(x.float(), bins=4, min=0, max=4)
        x.repeat_interleave(torch.ones(4, dtype=torch.int64), output_size=4)
        x.sum()
    assert ops["n"] == 0, ops["by_op"]


def test_a_mask_filled_with_one_number_is_not_counted_but_a_mask_given_many_values_is():
    # x[mask] = 0.0 goes from index_put_ to masked_fill_ (one mask, one CPU value): nothing is read back.
    x = torch.arange(6.0)
    with count_sync_ops() as ops:
        x[x > 2] = 0.0
        x[x > 2] = torch.tensor(1.0)
        torch.index_put_(x, (x > 0,), torch.tensor(1.0), accumulate=True)   # accumulate: no masked_fill_
        x[x > 0] = torch.ones(2)                                            # one value per True element
    assert ops["by_op"] == {"index_put_ (boolean mask)": 2}, ops["by_op"]


def test_inside_inference_mode_and_library_code():
    # torchmetrics' confusion matrix update calls torch.bincount (and validates with torch.unique): both seen.
    from torchmetrics.classification import MulticlassConfusionMatrix

    metric = MulticlassConfusionMatrix(num_classes=3)
    with torch.inference_mode(), count_sync_ops() as ops:
        metric.update(torch.tensor([0, 1, 2]), torch.tensor([0, 2, 2]))
    assert ops["by_op"].get("bincount") == 1, ops["by_op"]


def test_count_reads_adds_methods_and_operations():
    x = torch.tensor([2, 0, 1])
    with count_reads() as reads:
        float(x.sum())
        torch.bincount(x)
    assert reads["n"] == 2
    assert reads["by_method"] == {"__float__": 1, "op:bincount": 1} and reads["by_op"] == {"bincount": 1}


def test_scalar_reads_inside_torch_are_counted_on_request():
    """An enabled GradScaler reads its found-inf flag in every step() (torch/amp/grad_scaler.py, _maybe_opt_step)."""
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reads = {}
    for enabled in (False, True):
        scaler = torch.amp.GradScaler("cpu", enabled=enabled)
        loss = model(torch.randn(4, 3)).pow(2).mean()
        scaler.scale(loss).backward()
        with count_sync_ops(scalar_reads=True) as ops:
            scaler.step(optimizer)
        reads[enabled] = ops["by_op"].get("_local_scalar_dense", 0)
        scaler.update()
        optimizer.zero_grad()
    assert reads == {False: 0, True: 1}
    with count_sync_ops() as ops:
        float(torch.ones(()))
    assert ops["n"] == 0, "scalar reads are counted only on request (count_host_syncs sees the caller's)"

"""Count the operations that make a GPU's host wait, including those hidden inside library code.

:func:`utils.host_syncs.count_host_syncs` counts the ``Tensor`` methods a caller uses to read a value back
(``.item()``, ``float(t)``, ``if t:``, printing). Some operations read values back *inside* their own kernel code,
where no Python method is called: their **output size depends on the data**, so on a GPU the host must learn a
number from the device before it can allocate the result. ``torch.bincount`` reads the input's maximum (and
minimum) to size its output (``aten/src/ATen/native/cuda/SummaryOps.cu``); ``nonzero``, boolean-mask indexing,
``masked_select``, ``unique`` and ``repeat_interleave`` without ``output_size`` read how many elements they return.
On the CPU they cost no wait, which is why a loop that calls them every batch looks fine there.

:func:`count_sync_ops` sees them at the dispatcher, with a ``TorchDispatchMode``, whoever calls them (your code,
torchmetrics, torch itself), on any device. :func:`count_reads` adds the two counters: everything a loop reads back,
by method and by operation. Fixed-size alternatives do not sync: ``scatter_add_``/``index_add_`` into a tensor of
known length instead of ``bincount``, ``torch.where(mask, x, 0)`` instead of ``x[mask]``, ``nonzero_static``.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .host_syncs import count_host_syncs

__all__ = ["DATA_DEPENDENT_OPS", "count_reads", "count_sync_ops"]

# Operation name (the overload's packet, as torch.ops.aten names it) -> why it reads back on a GPU.
DATA_DEPENDENT_OPS: dict[str, str] = {
    "bincount": "its output length is max(input) + 1: it reads the input's max (and min) back",
    "nonzero": "its output length is the number of non-zero elements: it reads that count back",
    "masked_select": "its output length is the number of True elements: it reads that count back",
    "unique_dim": "its output length is the number of distinct values: it reads it back",
    "_unique": "its output length is the number of distinct values: it reads it back",
    "_unique2": "its output length is the number of distinct values: it reads it back",
    "unique_consecutive": "its output length is the number of runs: it reads it back",
    "repeat_interleave": "without output_size its output length is the sum of the repeats: it reads it back",
    "histc": "with min == max it reads the input's min and max back to find its range",
}


def _boolean_index(func: Any, args: tuple, kwargs: dict) -> bool:
    # x[mask] and x[mask] = v: a boolean index becomes nonzero() inside the kernel ...
    name = func._overloadpacket.__name__
    if name not in ("index", "index_put", "index_put_", "_index_put_impl_") or len(args) < 2:
        return False
    masks = [i for i in (args[1] or ()) if isinstance(i, torch.Tensor)]
    if not any(i.dtype == torch.bool for i in masks):
        return False
    return name == "index" or not _fills_a_mask(args, kwargs, masks)


def _fills_a_mask(args: tuple, kwargs: dict, masks: list) -> bool:
    # ... except x[mask] = <number or one-element CPU tensor>: index_put_ then calls masked_fill_, which reads
    # nothing back (ATen's canDispatchToMaskedFill: one mask on x's device, no accumulate).
    value, accumulate = args[2], kwargs.get("accumulate", args[3] if len(args) > 3 else False)
    return (not accumulate and value.numel() == 1 and value.device.type == "cpu" and len(masks) == 1
            and masks[0].dtype in (torch.bool, torch.uint8) and masks[0].device == args[0].device)


def _reads_back(func: Any, args: tuple, kwargs: dict) -> str | None:
    """The name to count ``func`` under when it reads data back to size its output, else None."""
    name = func._overloadpacket.__name__
    if name == "repeat_interleave" and (kwargs.get("output_size") is not None or
                                        (len(args) > 3 and args[3] is not None)):
        return None
    if name == "histc":
        lo = kwargs.get("min", args[2] if len(args) > 2 else 0)
        hi = kwargs.get("max", args[3] if len(args) > 3 else 0)
        return name if lo == hi else None
    if name in DATA_DEPENDENT_OPS:
        return name
    if _boolean_index(func, args, kwargs):
        return f"{name} (boolean mask)"
    return None


class _SyncOpLog(TorchDispatchMode):
    def __init__(self, counts: dict, scalar_reads: bool) -> None:
        super().__init__()
        self.counts = counts
        self.scalar_reads = scalar_reads

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _reads_back(func, args, kwargs)
        if name is None and self.scalar_reads and func._overloadpacket.__name__ == "_local_scalar_dense":
            name = "_local_scalar_dense"
        if name is not None:
            self.counts["n"] += 1
            self.counts["by_op"][name] = self.counts["by_op"].get(name, 0) + 1
        return func(*args, **kwargs)


@contextlib.contextmanager
def count_sync_ops(scalar_reads: bool = False) -> Iterator[dict]:
    """Count the operations with a data-dependent output size run inside the ``with`` block.

    Yields a dict filled while the block runs: ``"n"`` (an int) and ``"by_op"`` (counts per operation name, e.g.
    ``{"bincount": 3}``). Sees calls from any code, library code included, on any device; runs the operations
    unchanged. With ``scalar_reads`` it also counts ``_local_scalar_dense``, the operation behind every ``.item()``,
    ``float(t)``, ``int(t)`` and ``if t:``, whoever calls it (``GradScaler.step`` reads one per step with a
    non-fused optimizer, for example).
    Not thread-safe.
    """
    counts: dict = {"n": 0, "by_op": {}}
    with _SyncOpLog(counts, scalar_reads):
        yield counts


@contextlib.contextmanager
def count_reads() -> Iterator[dict]:
    """Both counters at once: the read-back methods called outside torch (``utils.host_syncs``) plus the
    data-dependent operations (:func:`count_sync_ops`). Yields ``{"n", "by_method", "by_op"}``, filled when the block
    ends; ``n`` is the sum, and ``by_method`` lists both kinds (operations as ``"op:<name>"``), so that a message
    shows what to remove.
    """
    counts: dict = {"n": 0, "by_method": {}, "by_op": {}}
    with count_host_syncs() as methods, count_sync_ops() as ops:
        yield counts
    counts["by_op"] = dict(ops["by_op"])
    counts["by_method"] = {**methods["by_method"], **{f"op:{k}": v for k, v in ops["by_op"].items()}}
    counts["n"] = methods["n"] + ops["n"]

"""Count the host synchronisations a piece of code would make on a GPU, on any device.

A GPU runs asynchronously: the host queues kernels and moves on, until some call needs a *result* on the host
(``loss.item()``, ``if tensor:``, ``float(norm)``, printing a tensor). Then the host waits until the device has
finished everything queued so far, and the pipeline stops. On the CPU these calls cost nothing, so a loop that syncs
on every step looks fine there and is slow on a GPU. Timing syncs is noisy; counting them is exact, and the count of
tensor reads is the same on every device, which is what makes it usable in tests that run on the CPU. An explicit
wait is the exception: ``torch.cuda.synchronize`` (and so ``utils.device.synchronize``) is counted only where CUDA
runs it; on a CPU ``synchronize(device)`` does nothing and is not counted, nor is ``torch.mps.synchronize``.

:func:`count_host_syncs` is a spy: inside ``with count_host_syncs() as syncs:`` it counts every call, made from code
outside PyTorch's libraries, of the ``Tensor`` methods that must wait for the device (:data:`SYNC_METHODS`), plus
``torch.cuda.synchronize``. Calls made by PyTorch itself and by the libraries installed beside it
(:data:`LIBRARY_DIRS`: torchvision, torchaudio, torchmetrics) are not counted: a ``GradScaler.step`` that reads its
``found_inf`` flag, or torchvision's ``make_grid(normalize=True)`` reading a batch's min and max, is the library's
sync, not the caller's (``utils.sync_ops.count_sync_ops`` sees reads inside any code). Reading what a counted ``.cpu()`` returned (or a view
of it), unchanged since, is not counted again: on a GPU the copy was the sync, and ``t.cpu().tolist()`` waits once.
Two exceptions: under ``torch.inference_mode()`` the copy has no version counter, so each read of it is counted
(on a GPU ``t.cpu().tolist()`` counts 2); and on a CPU run ``.cpu()`` returns the tensor itself, so a read of that tensor,
unchanged (or changed only through ``.data``), is not counted either, though on a GPU it would wait again.
A ``.to("cpu")`` copy also syncs and is not seen.
"""
from __future__ import annotations

import contextlib
import os
import sys
import weakref
from pathlib import Path
from typing import Callable, Iterator

import torch

__all__ = ["LIBRARY_DIRS", "SYNC_METHODS", "count_host_syncs"]

SYNC_METHODS: tuple[str, ...] = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "__index__",
                                 "__format__", "__repr__")
#: Folders whose code is library code: its reads are the library's, not the caller's. Each ends with a separator, so a
#: package that only begins with "torch" (say, ``torchfoo``) counts as the caller's.
LIBRARY_DIRS: tuple[str, ...] = tuple(str(Path(torch.__file__).parent.parent / name) + os.sep
                                      for name in ("torch", "torchvision", "torchaudio", "torchmetrics"))


@contextlib.contextmanager
def count_host_syncs() -> Iterator[dict]:
    """Count host-syncing calls made inside the ``with`` block (not thread-safe; one counter at a time).

    Yields a dict, filled while the block runs: ``"n"`` (total calls, an int) and ``"by_method"`` (calls per method
    name). The ``Tensor`` methods are restored on exit, also when the block raises.
    """
    counts: dict = {"n": 0, "by_method": {}}
    originals = {m: (getattr(torch.Tensor, m), m in torch.Tensor.__dict__) for m in SYNC_METHODS}
    original_sync = torch.cuda.synchronize

    host_copies: dict[int, tuple[weakref.ref, int]] = {}   # id -> (tensor, version) of what a counted .cpu() returned

    def already_on_host(t: object) -> bool:
        # The result of a counted .cpu(), or a view of it, not modified since (its version counter is unchanged; on a
        # CPU run .cpu() returns the tensor itself, which later in-place updates change).
        if not isinstance(t, torch.Tensor):
            return False
        for x in (t, t._base):
            entry = host_copies.get(id(x)) if x is not None else None
            if entry is not None and entry[0]() is x and not x.is_inference() and x._version == entry[1]:
                return True
        return False

    def wrap(name: str, fn: Callable) -> Callable:
        def counted(*args, **kwargs):
            counted_call = (not sys._getframe(1).f_code.co_filename.startswith(LIBRARY_DIRS)
                            and not (args and already_on_host(args[0])))
            if counted_call:
                counts["n"] += 1
                counts["by_method"][name] = counts["by_method"].get(name, 0) + 1
            out = fn(*args, **kwargs)
            # An inference tensor has no version counter, so a read of it is always counted.
            if counted_call and name == "cpu" and isinstance(out, torch.Tensor) and not out.is_inference():
                host_copies[id(out)] = (weakref.ref(out), out._version)
            return out
        return counted

    for method, (fn, _) in originals.items():
        setattr(torch.Tensor, method, wrap(method, fn))
    torch.cuda.synchronize = wrap("torch.cuda.synchronize", original_sync)
    try:
        yield counts
    finally:
        for method, (fn, own) in originals.items():
            if own:
                setattr(torch.Tensor, method, fn)
            else:
                delattr(torch.Tensor, method)     # it was inherited: remove the wrapper, do not shadow the base
        torch.cuda.synchronize = original_sync

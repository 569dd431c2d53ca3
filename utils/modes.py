"""Train/eval modes, kept: evaluation on a model the caller lent must hand it back as it came.

``model.train(was_training)`` is not enough: it sets every submodule to the top-level mode, so a BatchNorm frozen in
eval mode inside a training model (fine-tuning) would start updating its statistics again. Day 06 teaches the fix.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from torch import nn

__all__ = ["modes_kept"]


@contextmanager
def modes_kept(model: nn.Module) -> Iterator[None]:
    """Put back the train/eval mode of ``model`` and of each of its submodules when the block ends, even by an error."""
    modes = [(module, module.training) for module in model.modules()]
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training

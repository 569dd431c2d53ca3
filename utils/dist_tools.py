"""Teaching tools for data parallelism: count what DDP communicates, and compute which slice a rank owns.

:class:`CommCounter` is a DDP communication hook that counts the gradient all-reduces and their bytes (Day 19's
``no_sync`` measurement); :func:`shard_range` is the slice of a flat tensor one rank owns under ZeRO/FSDP's
layout (Day 20).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CommCounter:
    """Counts gradient all-reduces through a DDP communication hook (no change to the math).

    ``calls`` is the number of buckets reduced; ``bytes`` the payload in bytes summed over those calls.
    Register with ``ddp_model.register_comm_hook(state=None, hook=counter.hook)`` (before the first backward).
    """

    calls: int = 0
    bytes: int = 0
    sizes: list[int] = field(default_factory=list)

    def hook(self, state: Any, bucket):  # no annotation: DDP rejects string annotations here
        """The comm hook: count the bucket, then do DDP's default all-reduce (average) on it."""
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        buf = bucket.buffer()
        self.calls += 1
        self.bytes += buf.numel() * buf.element_size()
        self.sizes.append(buf.numel())
        return allreduce_hook(None, bucket)


def shard_range(numel: int, rank: int, world_size: int) -> tuple[int, int]:
    """The ``[start, stop)`` slice of a flat tensor of ``numel`` elements that ``rank`` owns when it is split into
    ``world_size`` equal shards padded at the end (the layout ZeRO and FSDP use)."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
    per = -(-numel // world_size)
    start = min(rank * per, numel)
    return start, min(start + per, numel)

"""Teaching tools for data parallelism: count what DDP communicates, time a failure, and compute which slice a
rank owns.

:class:`CommCounter` is a DDP communication hook that counts the gradient all-reduces and their bytes (Day 19's
``no_sync`` measurement); :func:`time_to_error` times a worker's collectives from their first call to their error
and can dump the rank's flight recorder (Day 19); :func:`shard_range` is the slice of a flat tensor one rank owns
under ZeRO/FSDP's layout (Day 20).
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


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


def dump_flight_recorder(path: str | os.PathLike) -> dict:
    """Write this process's flight recorder (PyTorch's ring buffer of its last collectives, on by default with 2,000
    entries) to ``path`` in the pickle format ``torchfrtrace`` reads, and return it as a dict.

    A gloo group's dump in PyTorch 2.14 lists its default group under the name ``""`` in ``pg_config`` while its
    entries name it ``"0"`` (as NCCL's dumps do), and ``torchfrtrace`` then stops with ``KeyError: ('0', 0)``; the
    written file uses ``"0"`` for both.
    """
    import torch

    dump = pickle.loads(torch._C._distributed_c10d._dump_fr_trace(includeCollectives=True, includeStackTraces=False,
                                                                   onlyActive=False))
    groups = {e["process_group"][0]: e["process_group"][1] for e in dump.get("entries", [])}
    config = dump.get("pg_config", {})
    if "" in config and len(config) == 1 and set(groups) == {"0"}:
        dump["pg_config"] = {"0": {**config[""], "name": "0", "desc": groups["0"]}}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(pickle.dumps(dump))
    return dump


def time_to_error(body: Callable[[], Any], dump_dir: str | os.PathLike | None = None) -> dict:
    """Run ``body()`` in a distributed worker and time it on this process's clock, from its first line (its first
    collective call) to its return or its exception: the time the rank waited for an error, without the start-up of
    the process or the group. Returns ``{"seconds", "value", "error"}`` (``error``: the exception's type and message,
    or None). With ``dump_dir``, a rank that failed writes its flight recorder to ``<dump_dir>/rank_<rank>``."""
    import torch.distributed as dist

    start = time.perf_counter()
    try:
        value = body()
    except Exception as err:
        seconds = time.perf_counter() - start
        if dump_dir is not None:
            dump_flight_recorder(Path(dump_dir) / f"rank_{dist.get_rank()}")
        return {"seconds": seconds, "value": None, "error": f"{type(err).__name__}: {err}"}
    return {"seconds": time.perf_counter() - start, "value": value, "error": None}


def torchfrtrace(dump_dir: str | os.PathLike, *args: str) -> str:
    """What the ``torchfrtrace <dump_dir> -p rank_`` command reports on the dumps of :func:`dump_flight_recorder`,
    run in this process (no new interpreter): its log lines and anything it prints, as text."""
    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
        from torch.distributed.flight_recorder.fr_trace import main      # its import logs a warning too
    log = logging.getLogger("Flight Recorder")
    handlers, propagate = log.handlers[:], log.propagate
    log.handlers, log.propagate = [logging.StreamHandler(text)], False
    try:
        with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
            main([str(dump_dir), "-p", "rank_", *args])
    except AssertionError as err:            # older versions assert that every dump comes from NCCL or XCCL
        if "name formatting error" not in str(err):
            raise
        import torch

        text.write(f"torchfrtrace of PyTorch {torch.__version__} reads only NCCL and XCCL dumps ({err}); these come "
                   "from gloo. Newer versions (2.14 does) read gloo dumps too; on a GPU cluster the dumps are NCCL's, "
                   "which this version reads.\n")
    finally:
        log.handlers, log.propagate = handlers, propagate
    return text.getvalue()

"""Bus bandwidth of a collective in nccl-tests' convention, and its measurement against message size.

nccl-tests (``doc/PERFORMANCE.md``) reports two rates for a collective on a message of ``S`` bytes that took ``t``
seconds on ``n`` ranks:

* **algbw** = ``S / t``: what a user sees (bytes of the tensor per second);
* **busbw** = ``algbw x factor``, where ``factor`` is the share of ``S`` that each rank's link must carry with the
  optimal algorithm: ``2(n-1)/n`` for all-reduce (a ring: a reduce-scatter then an all-gather), ``(n-1)/n`` for
  all-gather, reduce-scatter and all-to-all, ``1`` for broadcast and reduce.

busbw does not depend on ``n`` for a bandwidth-bound algorithm, so it can be compared across world sizes and with
the hardware's link speed; algbw of an all-reduce falls towards half of it as ``n`` grows.

:func:`measure_all_reduce` starts ``n`` local processes (:func:`utils.processes.run_processes`), times
``all_reduce`` on float32 tensors of each size (warm-up, then windows of several calls between two device
synchronisations, the same number of calls on every rank, the median window, the slowest rank) and returns one row
per size with both rates. It runs gloo on the CPU anywhere, and NCCL with one process per GPU where
:func:`utils.backend_choice.collective_backend` says so. :func:`recording_payload` is what a recording for Day 17
would hold (the GPU check kit has no Day 17 part yet: its machines have one GPU, where this records gloo on the
host's cores, labelled as such).
"""
from __future__ import annotations

import math
import statistics
import time
from typing import Any, Sequence

import torch
import torch.distributed as dist

from .backend_choice import collective_backend
from .processes import run_processes

__all__ = ["BUS_FACTORS", "bus_factor", "bandwidths", "all_reduce_window_times", "measure_all_reduce",
           "recording_payload"]

# nccl-tests' factors, as functions of the number of ranks n.
BUS_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


def bus_factor(collective: str, world_size: int) -> float:
    """nccl-tests' bus-bandwidth factor of ``collective`` on ``world_size`` ranks (e.g. ``2(n-1)/n`` for
    ``"all_reduce"``)."""
    if collective not in BUS_FACTORS:
        raise ValueError(f"unknown collective {collective!r}; one of {sorted(BUS_FACTORS)}")
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    return BUS_FACTORS[collective](world_size)


def bandwidths(nbytes: int, seconds: float, collective: str, world_size: int) -> tuple[float, float]:
    """``(algbw, busbw)`` in bytes per second for one call of ``collective`` on ``nbytes`` that took ``seconds``."""
    if seconds <= 0:
        raise ValueError(f"seconds must be positive, got {seconds}")
    algbw = nbytes / seconds
    return algbw, algbw * bus_factor(collective, world_size)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def all_reduce_window_times(rank: int, world_size: int, sizes_bytes: Sequence[int], *, warmup: int = 2,
                            repeats: int = 5, min_window_s: float = 0.02, max_calls: int = 1000) -> list[dict]:
    """Inside a running process group: for each size, this rank's median seconds per ``all_reduce`` call.

    Each size is timed in ``repeats`` windows of ``k`` calls between two synchronisations (``k`` chosen so that a
    window lasts about ``min_window_s``, and agreed by all ranks with a MAX all-reduce: every rank must make the
    same number of calls, or the group hangs). The tensor holds zeros, so repeated sums never overflow. Runs as a
    :func:`utils.processes.run_processes` worker (``rank`` and ``world_size`` come first).
    """
    device = torch.device("cuda", torch.cuda.current_device()) if "nccl" in str(dist.get_backend()) \
        else torch.device("cpu")
    rows = []
    for nbytes in sizes_bytes:
        buf = torch.zeros(max(1, int(nbytes) // 4), dtype=torch.float32, device=device)
        for _ in range(warmup):
            dist.all_reduce(buf)
        _sync(device)
        start = time.perf_counter()
        dist.all_reduce(buf)
        _sync(device)
        one = max(time.perf_counter() - start, 1e-6)
        calls = torch.tensor([min(max_calls, max(1, math.ceil(min_window_s / one)))], device=device)
        dist.all_reduce(calls, op=dist.ReduceOp.MAX)          # the same count on every rank
        k = int(calls.item())
        windows = []
        for _ in range(repeats):
            dist.barrier()
            _sync(device)
            start = time.perf_counter()
            for _ in range(k):
                dist.all_reduce(buf)
            _sync(device)
            windows.append((time.perf_counter() - start) / k)
        median = statistics.median(windows)
        rows.append({"bytes": buf.numel() * 4, "calls_per_window": k, "median_s": median,
                     "spread": (max(windows) - min(windows)) / median})
    return rows


def measure_all_reduce(world_size: int, sizes_bytes: Sequence[int], *, backend: str = "gloo", repeats: int = 5,
                       min_window_s: float = 0.02, timeout_s: float = 180.0) -> list[dict[str, Any]]:
    """Time ``all_reduce`` over ``world_size`` local processes for each message size; one row per size.

    ``backend="gloo"`` runs the ranks on the CPU (one thread each); ``"nccl"`` runs one rank per GPU
    (``world_size`` must not exceed the GPU count). Each row: ``world_size``, ``bytes``, ``seconds`` (the slowest
    rank's median per call), ``algbw_GBps`` and ``busbw_GBps`` (10^9 bytes per second, nccl-tests' unit).
    """
    device = "auto" if backend == "nccl" else "cpu"
    per_rank = run_processes(all_reduce_window_times, world_size, (list(sizes_bytes),),
                             kwargs={"repeats": repeats, "min_window_s": min_window_s}, backend=backend,
                             device=device, timeout_s=timeout_s)
    rows = []
    for i, first in enumerate(per_rank[0]):
        slowest = max((rank_rows[i] for rank_rows in per_rank), key=lambda row: row["median_s"])
        algbw, busbw = bandwidths(first["bytes"], slowest["median_s"], "all_reduce", world_size)
        rows.append({"world_size": world_size, "backend": backend, "bytes": first["bytes"],
                     "seconds": slowest["median_s"], "spread": slowest["spread"], "algbw_GBps": algbw / 1e9,
                     "busbw_GBps": busbw / 1e9})
    return rows


def recording_payload(tiny: bool = False) -> dict[str, Any]:
    """What a recording for Day 17 holds (``results/day17/``, which the notebook shows where it lacks two GPUs):
    all_reduce algbw and busbw against message size. The GPU check kit has no Day 17 part yet.

    With two or more GPUs: NCCL over all of them (at most 8), 8 KiB to 512 MiB. With fewer (NCCL cannot put two ranks
    on one GPU): gloo on the host's CPU cores at 2, 4 and 8 ranks, labelled as such. ``tiny`` (the kit's CPU dry
    run): two ranks, two small sizes.
    """
    backend = collective_backend()
    if tiny:
        worlds, sizes = [2], [2**12, 2**16]
    elif backend == "nccl":
        worlds, sizes = [min(torch.cuda.device_count(), 8)], [2**k for k in range(13, 31, 2)]
    else:
        worlds, sizes = [2, 4, 8], [2**k for k in range(12, 25, 2)]
    rows = [row for w in worlds for row in measure_all_reduce(w, sizes, backend=backend,
                                                              min_window_s=0.005 if tiny else 0.05)]
    largest = max(r["bytes"] for r in rows)
    summary = [f"{backend}, {r['world_size']} ranks, {largest / 2**20:g} MiB: busbw {r['busbw_GBps']:.3g} GB/s, "
               f"algbw {r['algbw_GBps']:.3g} GB/s" for r in rows if r["bytes"] == largest]
    where = "one rank per GPU" if backend == "nccl" else "ranks on the CPU (fewer than 2 GPUs)"
    what = (f"all_reduce of float32 tensors over {backend}, {where}: the slowest rank's median time per call, "
            "algbw = bytes / time, busbw = algbw x 2(n-1)/n (nccl-tests' convention)")
    return {"what": what, "summary": summary, "rows": rows, "backend": backend}

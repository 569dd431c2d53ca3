"""Honest timing: warm up, synchronise the device, repeat, report the median.

GPU work is asynchronous: a CUDA call returns once the kernel is *queued*. Timing without
:func:`utils.device.synchronize` measures the queueing, not the work. The first calls also pay one-off costs
(allocator growth, cuDNN autotuning, lazy initialisation, thread-pool start-up), hence the warm-up.

:func:`time_fn` synchronises after every call: each timing is the *latency* of one call from an idle device, and
includes one host-device round trip (tens of microseconds on a GPU). That is right for a call that stands alone.
For a step that a training loop issues back to back (the device queue never runs dry, nothing waits in between)
the right number is the *throughput* time per call: :func:`time_windows` times windows of many back-to-back calls
with one synchronisation per window (CUDA events on the GPU's clock), so the round trip is spread over the window.
To compare settings, :func:`time_alternating` interleaves them round by round.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from .device import synchronize


@dataclass
class Timing:
    """Repeated timings of one callable, in seconds per call: wall-clock time between device synchronisations
    (:func:`time_fn`; :func:`time_windows` off CUDA), or the GPU's own clock from CUDA events (:func:`time_windows`
    on CUDA, one value per window)."""

    times_s: list[float] = field(default_factory=list)
    warmup: int = 0
    device: str = "cpu"

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    @property
    def mean_s(self) -> float:
        return statistics.fmean(self.times_s)

    @property
    def min_s(self) -> float:
        return min(self.times_s)

    @property
    def iqr_s(self) -> float:
        """Interquartile range (seconds): the spread of the middle half of the runs; with fewer than 4 runs, where
        quartiles are not defined, the full range (max - min), which ``str()`` then calls "range"."""
        if len(self.times_s) < 4:
            return max(self.times_s) - min(self.times_s)
        q = statistics.quantiles(self.times_s, n=4)
        return q[2] - q[0]

    def per_second(self, items: int) -> float:
        """Throughput in items/s (e.g. images/s) for ``items`` processed per call, from the median."""
        return items / self.median_s

    def __str__(self) -> str:
        spread = "IQR" if len(self.times_s) >= 4 else "range"
        return (f"median {self.median_s * 1e3:.3f} ms ({spread} {self.iqr_s * 1e3:.3f} ms, {len(self.times_s)} runs "
                f"after {self.warmup} warm-up) on {self.device}")


def time_fn(fn: Callable[[], object], *, device: torch.device | str = "cpu", warmup: int = 3, repeats: int = 10,
            min_time_s: float = 0.0) -> Timing:
    """Time ``fn()`` honestly: ``warmup`` untimed calls, then ``repeats`` timed calls, each between two device
    synchronisations. Keeps going past ``repeats`` until ``min_time_s`` seconds have been measured.

    Returns a :class:`Timing` with every run's seconds; use ``.median_s``.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    dev = torch.device(device)
    for _ in range(warmup):
        fn()
    synchronize(dev)
    times: list[float] = []
    while len(times) < repeats or sum(times) < min_time_s:
        start = time.perf_counter()
        fn()
        synchronize(dev)
        times.append(time.perf_counter() - start)
    return Timing(times, warmup, str(dev))


def time_windows(fn: Callable[[], object], *, device: torch.device | str = "cpu", warmup: int = 3,
                 windows: int = 5, calls_per_window: int = 20) -> Timing:
    """Throughput timing: seconds per call, one value per window of ``calls_per_window`` back-to-back calls.

    ``warmup`` untimed calls, a synchronisation, then ``windows`` windows. On CUDA each window is bracketed by two
    ``torch.cuda.Event(enable_timing=True)`` on the current stream (the GPU's own clock; the host only waits for the
    window's end event); elsewhere by two synchronisations around ``time.perf_counter``. A host-device round trip
    therefore costs ``1 / calls_per_window`` of itself per call, instead of all of it as in :func:`time_fn`.
    Returns a :class:`Timing` of per-call seconds (``.median_s`` is the median over windows).
    """
    if windows < 1 or calls_per_window < 1:
        raise ValueError(f"need windows >= 1 and calls_per_window >= 1, got {windows}, {calls_per_window}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    dev = torch.device(device)
    for _ in range(warmup):
        fn()
    synchronize(dev)
    per_call: list[float] = []
    for _ in range(windows):
        if dev.type == "cuda":
            stream = torch.cuda.current_stream(dev)
            start_ev, end_ev = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start_ev.record(stream)
            for _ in range(calls_per_window):
                fn()
            end_ev.record(stream)
            end_ev.synchronize()
            per_call.append(start_ev.elapsed_time(end_ev) / 1e3 / calls_per_window)
        else:
            start = time.perf_counter()
            for _ in range(calls_per_window):
                fn()
            synchronize(dev)
            per_call.append((time.perf_counter() - start) / calls_per_window)
    return Timing(per_call, warmup, str(dev))


def time_alternating(fns: dict[str, Callable[[], object]], *, device: torch.device | str = "cpu", rounds: int = 3,
                     repeats: int = 5, warmup: int = 3, rewarm: int = 1,
                     flip_order: bool = True) -> dict[str, list[Timing]]:
    """A/B (or A/B/C...) timing that interleaves the settings, so that drift and bursts of load from other processes
    hit every setting alike instead of whichever ran last.

    ``rounds`` rounds; in each, every callable in ``fns`` is timed by :func:`time_fn` with ``repeats`` calls, after
    ``warmup`` untimed calls in the first round and ``rewarm`` in later ones. With ``flip_order`` the order reverses
    every other round (A B, B A, A B, ...), so neither setting always runs right after the other.
    Returns ``{name: [Timing of round 0, round 1, ...]}`` (seconds per call): keep the rounds apart to see the
    noise (how far one setting's rounds spread), or pool them with :func:`pooled`.
    """
    if not fns:
        raise ValueError("fns is empty: give {name: callable} for each setting to compare")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if rewarm < 0:
        raise ValueError(f"rewarm must be >= 0, got {rewarm}")
    names = list(fns)
    result: dict[str, list[Timing]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[::-1] if flip_order and r % 2 else names
        for name in order:
            result[name].append(time_fn(fns[name], device=device, warmup=warmup if r == 0 else rewarm,
                                        repeats=repeats))
    return result


def pooled(timings: list[Timing]) -> Timing:
    """One :class:`Timing` holding every run of ``timings`` (e.g. one setting's rounds from :func:`time_alternating`)."""
    if not timings:
        raise ValueError("no timings to pool")
    return Timing([t for timing in timings for t in timing.times_s], timings[0].warmup, timings[0].device)


class Stopwatch:
    """``with Stopwatch(device) as sw: ...`` then ``sw.elapsed_s``: one synchronised wall-clock interval."""

    def __init__(self, device: torch.device | str = "cpu"):
        self.device = torch.device(device)
        self.elapsed_s = float("nan")

    def __enter__(self) -> "Stopwatch":
        synchronize(self.device)
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        synchronize(self.device)
        self.elapsed_s = time.perf_counter() - self._start

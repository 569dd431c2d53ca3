"""Timing on an asynchronous device: CUDA events, loops that cannot run ahead of the GPU, copy/compute overlap.

A CUDA call queues work on a stream and returns (Day 03). Four consequences, one helper each:

- :func:`cuda_event_timer` times a block on the GPU's own clock: two ``torch.cuda.Event(enable_timing=True)``
  recorded on the current stream around the block. The GPU timestamps each event when it *reaches* it, so work
  queued before the block is not counted and no host synchronisation is needed between measurements. Off CUDA it
  falls back to ``synchronize`` + ``time.perf_counter``. :func:`event_times` uses it to time repeated calls.
- :func:`run_for` calls a function for a given number of seconds, in bursts sized from one timed call, with a
  synchronisation after each burst: the GPU queue never holds more than one burst, so the loop stops on time.
- :func:`measure_overlap` measures how much of an asynchronous operation (a ``non_blocking`` copy from pinned
  memory) is hidden behind host work started right after it.
- :func:`host_wait` measures how long a call keeps the host while device work is still queued: a blocking copy
  (``cudaMemcpyAsync`` + a stream synchronisation) waits for the queue to drain; a ``non_blocking`` one from pinned
  memory does not, and one from pageable memory may (CUDA lets the driver wait for the stream before it stages the
  bytes), which is why it is measured.

All times are in seconds.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

from .device import synchronize

__all__ = ["EventTimer", "cuda_event_timer", "event_times", "LoopStats", "run_for", "Overlap", "measure_overlap",
           "host_wait"]


class EventTimer:
    """``with cuda_event_timer(device) as t: work()`` then ``t.elapsed_s``.

    On CUDA the block is bracketed by two timing events on the device's current stream; reading ``elapsed_s``
    waits for the end event only (not for the whole device) and converts ``Event.elapsed_time`` (milliseconds) to
    seconds. The result is GPU time from the start event to the end event, including any idle gaps in between; it
    excludes host work done before the block. Elsewhere (CPU, MPS) it is the wall-clock time between two device
    synchronisations. ``method`` says which.
    """

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self.uses_events = self.device.type == "cuda"
        self.method = "CUDA events" if self.uses_events else "perf_counter + synchronize"
        self._elapsed_s: float | None = None

    def __enter__(self) -> "EventTimer":
        self._elapsed_s = None
        if self.uses_events:
            self._stream = torch.cuda.current_stream(self.device)
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)
            self._start.record(self._stream)
        else:
            synchronize(self.device)
            self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.uses_events:
            self._end.record(self._stream)
        else:
            synchronize(self.device)
            self._elapsed_s = time.perf_counter() - self._t0

    @property
    def elapsed_s(self) -> float:
        if self._elapsed_s is None:
            if not self.uses_events or not hasattr(self, "_end"):
                raise RuntimeError("read elapsed_s after the with-block has ended")
            self._end.synchronize()                       # the GPU has reached the end event
            self._elapsed_s = self._start.elapsed_time(self._end) / 1e3
        return self._elapsed_s


def cuda_event_timer(device: torch.device | str) -> EventTimer:
    """A block timer on ``device``'s own clock (CUDA events), or synchronised wall-clock time elsewhere."""
    return EventTimer(device)


def event_times(fn: Callable[[], object], *, device: torch.device | str, warmup: int = 3,
                repeats: int = 10) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn()`` after ``warmup`` untimed calls.

    On CUDA every call is bracketed by its own event pair and the host never waits between calls: the times are
    read once all calls are queued. Elsewhere each call is timed between two synchronisations.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")
    for _ in range(warmup):
        fn()
    timers = []
    for _ in range(repeats):
        with cuda_event_timer(device) as timer:
            fn()
        timers.append(timer)
    return [t.elapsed_s for t in timers]


@dataclass(frozen=True)
class LoopStats:
    """What :func:`run_for` did: ``calls`` finished in ``elapsed_s`` seconds, ``burst`` calls per synchronisation."""

    calls: int
    elapsed_s: float
    burst: int

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.elapsed_s


def run_for(fn: Callable[[], object], seconds: float, *, device: torch.device | str,
            burst_s: float = 0.05) -> LoopStats:
    """Call ``fn()`` for about ``seconds`` seconds, every call finished when it returns.

    One warm-up call, one timed call, then bursts of ``burst_s / (one call)`` calls, each followed by a device
    synchronisation. Without those, a loop "for two seconds" around a GPU call queues as much work as the CPU can
    launch in two seconds, and the GPU keeps computing long after the loop ended.
    """
    if seconds <= 0 or burst_s <= 0:
        raise ValueError(f"seconds and burst_s must be > 0, got {seconds} and {burst_s}")
    dev = torch.device(device)
    fn()
    synchronize(dev)
    start = time.perf_counter()
    fn()
    synchronize(dev)
    burst = max(1, round(burst_s / max(time.perf_counter() - start, 1e-9)))
    calls = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(burst):
            fn()
        synchronize(dev)
        calls += burst
    return LoopStats(calls, time.perf_counter() - start, burst)


@dataclass(frozen=True)
class Overlap:
    """Median seconds of the asynchronous operation alone (until synchronised), of the host work alone, and of
    both started back to back."""

    async_s: float
    host_s: float
    together_s: float

    @property
    def hidden_share(self) -> float:
        """Share of the shorter of the two that ran concurrently with the other: 1 = fully overlapped,
        0 = one after the other (clipped to [0, 1] against noise)."""
        saved = self.async_s + self.host_s - self.together_s
        return min(1.0, max(0.0, saved / min(self.async_s, self.host_s)))


def measure_overlap(start_async: Callable[[], object], host_work: Callable[[], object], *,
                    sync: Callable[[], None], repeats: int = 5,
                    clock: Callable[[], float] = time.perf_counter) -> Overlap:
    """Time ``start_async(); sync()``, then ``host_work()``, then ``start_async(); host_work(); sync()``, each
    ``repeats`` times (medians). ``sync`` waits for the device (``lambda: synchronize(device)``); ``clock`` is
    injectable so that tests can drive the function with a simulated device."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")

    def median_of(body: Callable[[], None]) -> float:
        times = []
        for _ in range(repeats):
            sync()
            t0 = clock()
            body()
            times.append(clock() - t0)
        return statistics.median(times)

    async_s = median_of(lambda: (start_async(), sync()))
    host_s = median_of(lambda: host_work())
    together_s = median_of(lambda: (start_async(), host_work(), sync()))
    if min(async_s, host_s) <= 0:
        raise ValueError(f"both operations must take time: async {async_s} s, host {host_s} s")
    return Overlap(async_s, host_s, together_s)


def host_wait(call: Callable[[], object], *, queue_work: Callable[[], object], sync: Callable[[], None],
              repeats: int = 5, clock: Callable[[], float] = time.perf_counter) -> float:
    """Median seconds that ``call()`` keeps the host right after ``queue_work()`` has queued device work.

    Each repetition starts on an idle device (``sync()``), queues the work, times ``call()`` alone, then waits for
    everything (``sync()``). A call that synchronises the stream (a blocking copy) returns only after the queued work:
    about the work's duration plus its own. A ``non_blocking`` copy from pinned memory returns after its
    launch; one from pageable memory returns after the driver has staged the bytes, and CUDA allows the driver to
    wait for the stream first, so it may take as long as a blocking copy. ``clock`` is injectable for tests with a
    simulated device.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    times = []
    for _ in range(repeats):
        sync()
        queue_work()
        t0 = clock()
        call()
        times.append(clock() - t0)
        sync()
    return statistics.median(times)

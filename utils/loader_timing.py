"""Time a ``DataLoader`` in its steady state, with its start-up reported apart.

A loader with workers starts them in ``iter(loader)`` and immediately hands each worker ``prefetch_factor`` batches
to prepare. So while the loop still waits for the first batch, every worker decodes its first one and has the rest
queued: timing the steps right after the first batch times batches that were finished or under way during start-up,
and reads a throughput the workers cannot sustain (by how much depends on the machine and the worker count: Day 10
prints it for yours). :func:`measure_loader` therefore

1. times ``iter(loader)`` (worker creation) and the wait for the first batch: the *start-up*;
2. consumes, untimed, the next ``num_workers x prefetch_factor`` batches: the rest of those requested during
   start-up, and the one requested when the first batch arrived;
3. times a window of at least three rounds of workers (``3 x num_workers`` batches): the *steady state*, whose
   throughput is batches x batch size / the window's wall time, with each step split into the wait for ``next()``
   and the step itself.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from torch.utils.data import DataLoader

__all__ = ["LoaderTiming", "prefetched_batches", "steady_batches", "batches_needed", "measure_loader"]

#: Rounds of workers (each worker delivering one batch) that the timed window must cover at least.
ROUNDS = 3


@dataclass(frozen=True)
class LoaderTiming:
    """One epoch's measurement of a loader (times in seconds)."""

    iter_s: float          # ``iter(loader)``: worker creation (and, without persistent workers, every epoch)
    first_batch_s: float   # then the wait for the first batch
    # batches consumed untimed after the first one: the rest of those prefetched during start-up, plus the one
    # requested when the first arrived
    discarded: int
    steps: int             # batches in the timed window
    window_s: float        # wall time of the timed window
    wait_s: float          # time spent inside ``next()`` during the window
    compute_s: float       # time spent in the step (synchronised) during the window
    batch_size: int

    @property
    def startup_s(self) -> float:
        """From ``iter(loader)`` to the first batch in hand."""
        return self.iter_s + self.first_batch_s

    @property
    def samples_per_s(self) -> float:
        """Steady-state throughput: ``steps x batch_size`` per second of the window's wall time (a short last batch of
        the epoch, when the window reaches it, counts as a full one)."""
        return self.steps * self.batch_size / self.window_s

    @property
    def wait_share(self) -> float:
        """Fraction of the window spent waiting for data."""
        return self.wait_s / self.window_s

    @property
    def wait_ms(self) -> float:
        """Mean wait for a batch in the window, in milliseconds."""
        return 1e3 * self.wait_s / self.steps

    @property
    def compute_ms(self) -> float:
        """Mean step time in the window, in milliseconds."""
        return 1e3 * self.compute_s / self.steps


def prefetched_batches(loader: DataLoader) -> int:
    """Batches a loader requests from its workers in ``iter()``: ``num_workers x prefetch_factor`` (0 without
    workers, where nothing is prepared ahead)."""
    if loader.num_workers == 0:
        return 0
    return loader.num_workers * (loader.prefetch_factor or 2)


def steady_batches(num_workers: int, at_least: int = 1) -> int:
    """Batches to time: at least ``ROUNDS`` rounds of workers, and at least ``at_least``."""
    return max(ROUNDS * max(num_workers, 1), at_least)


def batches_needed(loader: DataLoader, at_least: int = 1) -> int:
    """Batches one :func:`measure_loader` epoch consumes: the first, the prefetched ones and the timed window."""
    return 1 + prefetched_batches(loader) + steady_batches(loader.num_workers, at_least)


def measure_loader(loader: DataLoader, step: Callable[[Any], None] | None = None, *, timed_steps: int | None = None,
                   discard: int | None = None, sync: Callable[[], None] | None = None) -> LoaderTiming:
    """Run one epoch of ``loader`` (only the batches needed) and time its start-up and its steady state.

    ``step(batch)`` is the training step (``None``: measure the loader alone); ``sync()`` waits for queued device
    work (``utils.synchronize``), called after every step so that the step's time is its own. ``discard`` defaults
    to :func:`prefetched_batches`, ``timed_steps`` to :func:`steady_batches`. Raises ``ValueError`` when the loader
    has fewer batches than that (use a sampler with ``num_samples``, e.g. ``RandomSampler(ds, num_samples=n)``).
    """
    step = step or (lambda batch: None)
    sync = sync or (lambda: None)
    discard = prefetched_batches(loader) if discard is None else discard
    timed_steps = steady_batches(loader.num_workers) if timed_steps is None else timed_steps
    if timed_steps < 1 or discard < 0:
        raise ValueError(f"timed_steps must be >= 1 and discard >= 0, got {timed_steps} and {discard}")
    needed = 1 + discard + timed_steps
    try:
        available = len(loader)
    except TypeError:   # an iterable dataset without a length: find out while iterating
        available = None
    if available is not None and available < needed:
        raise ValueError(f"the loader yields {available} batches per epoch; this measurement needs {needed} "
                         f"(1 + {discard} prefetched + {timed_steps} timed): give it more samples")
    # A loader built with batch_sampler= has batch_size None: its sampler knows the size (None also means a
    # dataset that yields whole batches, counted as one sample each).
    batch_size = loader.batch_size or getattr(loader.batch_sampler, "batch_size", None) or 1
    consumed = 0

    def next_batch(iterator: Any) -> Any:
        nonlocal consumed
        try:
            batch = next(iterator)
        except StopIteration:
            raise ValueError(f"the loader ended after {consumed} batches; this measurement needs {needed} "
                             f"(1 + {discard} prefetched + {timed_steps} timed): give it more samples") from None
        consumed += 1
        return batch

    start = time.perf_counter()
    iterator = iter(loader)                      # workers are created (or woken up) here
    created = time.perf_counter()
    batch = next_batch(iterator)
    first = time.perf_counter()
    step(batch)
    for _ in range(discard):                     # decoded during start-up: not the steady state
        step(next_batch(iterator))
    sync()
    wait = compute = 0.0
    window_start = time.perf_counter()
    for _ in range(timed_steps):
        t0 = time.perf_counter()
        batch = next_batch(iterator)
        t1 = time.perf_counter()
        step(batch)
        sync()
        t2 = time.perf_counter()
        wait += t1 - t0
        compute += t2 - t1
    window_s = time.perf_counter() - window_start
    del iterator                                 # shuts non-persistent workers down
    return LoaderTiming(iter_s=created - start, first_batch_s=first - created, discarded=discard, steps=timed_steps,
                        window_s=window_s, wait_s=wait, compute_s=compute, batch_size=batch_size)

"""utils.loader_timing: the steady state of a DataLoader, measured without the batches prefetched during start-up.

The fake dataset sleeps for every item (``time.sleep`` releases the GIL, so workers run side by side): the true
steady-state rate is exactly ``num_workers / seconds_per_item`` samples/s and no measurement can honestly exceed it.
The old method of Day 10 (time every batch after the first) reads several times too high on it.
"""
from __future__ import annotations

import multiprocessing as mp
import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler

from utils.loader_timing import (LoaderTiming, batches_needed, measure_loader, prefetched_batches,
                                 steady_batches)

FORK = "fork" in mp.get_all_start_methods()


class SleepyItems(Dataset):
    """Each item costs ``seconds`` of wall time, like a decode that one core cannot speed up."""

    def __init__(self, n: int, seconds: float):
        self.n, self.seconds = n, seconds

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(self.seconds)
        return torch.tensor(i)


def old_method_samples_per_s(loader: DataLoader, steps: int, step) -> float:
    """Day 10's former "steady state": the waits and steps of every batch after the first, summed."""
    it = iter(loader)
    spent = 0.0
    for s in range(steps):
        t0 = time.perf_counter()
        batch = next(it)
        step(batch)
        if s > 0:
            spent += time.perf_counter() - t0
    del it
    return (steps - 1) * loader.batch_size / spent


class SlowFirstStep:
    """A training step whose first call is slow (allocations, cuDNN's autotuning, a compile): meanwhile the workers
    fill every prefetch slot."""

    def __init__(self, first_s: float):
        self.first_s, self.calls = first_s, 0

    def __call__(self, batch) -> None:
        self.calls += 1
        if self.calls == 1:
            time.sleep(self.first_s)


def sleepy_loader(workers: int, prefetch: int, batch: int, seconds: float, batches: int) -> DataLoader:
    ds = SleepyItems(64, seconds)
    return DataLoader(ds, batch_size=batch, num_workers=workers, prefetch_factor=prefetch,
                      multiprocessing_context="fork", sampler=RandomSampler(ds, num_samples=batches * batch))


def test_counts():
    ds = SleepyItems(8, 0.0)
    assert prefetched_batches(DataLoader(ds, batch_size=2)) == 0
    loader = DataLoader(ds, batch_size=2, num_workers=3, prefetch_factor=4)
    assert prefetched_batches(loader) == 12
    assert steady_batches(3) == 9 and steady_batches(0) == 3 and steady_batches(2, at_least=10) == 10
    assert batches_needed(loader) == 1 + 12 + 9


def test_refuses_an_epoch_too_short_to_reach_the_steady_state():
    loader = DataLoader(SleepyItems(8, 0.0), batch_size=2)        # 4 batches
    with pytest.raises(ValueError, match="needs"):
        measure_loader(loader, timed_steps=5)


def test_main_process_loader_is_timed_batch_by_batch():
    seconds, batch = 0.004, 4
    loader = DataLoader(SleepyItems(64, seconds), batch_size=batch)
    steps = []
    timing = measure_loader(loader, steps.append, timed_steps=5)
    assert isinstance(timing, LoaderTiming) and timing.discarded == 0 and timing.steps == 5
    assert len(steps) == 1 + 0 + 5, "every batch handed out goes through the step, timed or not"
    assert timing.samples_per_s <= 1.1 / seconds, "nothing decodes faster than one item per sleep in one process"
    assert timing.wait_share > 0.8


@pytest.mark.slow
@pytest.mark.skipif(not FORK, reason="the fake workers are forked")
def test_steady_state_is_not_inflated_by_prefetched_batches():
    # Slow items (0.5 s a batch) keep the loaded machine's scheduling noise (tens of ms a call) small beside them.
    workers, prefetch, batch, seconds = 4, 2, 2, 0.25
    true_rate = workers / seconds                                  # samples/s, exactly, by construction
    loader = sleepy_loader(workers, prefetch, batch, seconds, batches=1 + workers * prefetch + 3 * workers)
    timing = measure_loader(loader, SlowFirstStep(2.0))
    assert timing.discarded == workers * prefetch and timing.steps == 3 * workers
    assert timing.samples_per_s <= 1.15 * true_rate, (
        f"measured {timing.samples_per_s:.0f} samples/s, above the {true_rate:.0f} the workers can deliver: the "
        "window still contains batches decoded during start-up")
    assert timing.samples_per_s >= 0.25 * true_rate, "a loaded machine is slower, but not four times"
    assert timing.startup_s >= batch * seconds, "the start-up includes the first batch's decoding"

    old = old_method_samples_per_s(sleepy_loader(workers, prefetch, batch, seconds, batches=12), 4, SlowFirstStep(2.0))
    assert old >= 2 * true_rate, (f"the old method read {old:.0f} samples/s against a true {true_rate:.0f}: this "
                                  "test no longer shows what it is for")


@pytest.mark.slow
@pytest.mark.skipif(not FORK, reason="the fake workers are forked")
def test_worker_creation_is_inside_the_startup():
    # A slow worker_init_fn stands for a spawn worker importing torch: it runs in iter()'s workers before any batch.
    ds = SleepyItems(64, 0.0)
    loader = DataLoader(ds, batch_size=2, num_workers=2, multiprocessing_context="fork",
                        worker_init_fn=lambda _: time.sleep(0.3))
    timing = measure_loader(loader)
    assert timing.startup_s >= 0.3 and timing.window_s < timing.startup_s


class _ThreeBatches(torch.utils.data.IterableDataset):
    def __iter__(self):
        return iter([(torch.zeros(1), 0)] * 3)


def test_measure_loader_says_an_unsized_loader_is_too_short():
    # An IterableDataset has no length to check up front: running out must say so, not end in a bare StopIteration.
    with pytest.raises(ValueError, match="ended after 3 batches; this measurement needs 6"):
        measure_loader(DataLoader(_ThreeBatches(), batch_size=1), timed_steps=5)


def test_measure_loader_counts_the_samples_of_a_batch_sampler():
    # DataLoader(batch_sampler=...) sets loader.batch_size to None: samples/s must not become batches/s.
    from torch.utils.data import BatchSampler, SequentialSampler, TensorDataset
    ds = TensorDataset(torch.zeros(64, 1))
    loader = DataLoader(ds, batch_sampler=BatchSampler(SequentialSampler(ds), 8, drop_last=False))
    assert measure_loader(loader, timed_steps=3).batch_size == 8

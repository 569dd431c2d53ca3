"""utils.timing: warm-up, synchronisation, repeat counts and statistics (behaviour, not speed targets)."""
from __future__ import annotations

import pytest
import torch

from utils import timing as T


def test_time_fn_warms_up_then_repeats(monkeypatch):
    calls, syncs = [], []
    monkeypatch.setattr(T, "synchronize", lambda dev: syncs.append(len(calls)))
    result = T.time_fn(lambda: calls.append(1), warmup=2, repeats=5)
    assert len(calls) == 7 and len(result.times_s) == 5 and result.warmup == 2
    # one sync after the warm-up, then one after every timed call
    assert syncs == [2, 3, 4, 5, 6, 7]


def test_time_fn_statistics():
    t = T.Timing([0.3, 0.1, 0.2, 10.0], warmup=0)
    assert t.median_s == pytest.approx(0.25)  # robust to the outlier, unlike the mean
    assert t.mean_s == pytest.approx(2.65)
    assert t.min_s == 0.1
    assert t.per_second(100) == pytest.approx(400)
    assert "median" in str(t)


def test_time_fn_min_time_extends_runs():
    result = T.time_fn(lambda: sum(range(1000)), warmup=0, repeats=1, min_time_s=0.01)
    assert sum(result.times_s) >= 0.01 and len(result.times_s) > 1


def test_time_fn_validates():
    with pytest.raises(ValueError):
        T.time_fn(lambda: None, repeats=0)
    with pytest.raises(ValueError):
        T.time_fn(lambda: None, warmup=-1)


def test_iqr_is_the_spread_of_the_middle_half():
    t = T.Timing([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 100.0])
    # quartiles (exclusive method) 2.25 and 6.75: the outlier 100 does not widen the IQR
    assert t.iqr_s == pytest.approx(4.5)
    assert T.Timing([0.3, 0.1, 0.2]).iqr_s == pytest.approx(0.2), "fewer than 4 runs: the full range"
    assert "(range 200.000 ms" in str(T.Timing([0.3, 0.1, 0.2])), "and it is called a range, not an IQR"
    assert "(IQR 4500.000 ms" in str(t)


def test_stopwatch_synchronises_before_and_after_the_interval(monkeypatch):
    events = []
    monkeypatch.setattr(T, "synchronize", lambda dev: events.append(("sync", str(dev))))
    with T.Stopwatch("cpu") as sw:
        events.append(("work", ""))
    assert events == [("sync", "cpu"), ("work", ""), ("sync", "cpu")]
    assert sw.elapsed_s >= 0


class _RoundTripDevice:
    """A simulated asynchronous device: each call queues `work_s` of device time and returns; a synchronisation
    waits for the queue and then pays a host-device round trip of `round_trip_s`. A fake clock keeps the time."""

    def __init__(self, work_s: float, round_trip_s: float):
        self.now = self.device_free = 0.0
        self.work_s, self.round_trip_s = work_s, round_trip_s

    def call(self):
        self.device_free = max(self.device_free, self.now) + self.work_s
        self.now += 1e-7                                  # launching costs the host almost nothing

    def sync(self, dev):
        self.now = max(self.now, self.device_free) + self.round_trip_s

    def clock(self):
        return self.now


def test_time_windows_measures_throughput_where_time_fn_measures_latency(monkeypatch):
    dev = _RoundTripDevice(work_s=50e-6, round_trip_s=40e-6)       # a 50 us step, a 40 us round trip
    monkeypatch.setattr(T, "synchronize", dev.sync)
    monkeypatch.setattr(T.time, "perf_counter", dev.clock)
    per_step = T.time_fn(dev.call, warmup=2, repeats=10).median_s
    windowed = T.time_windows(dev.call, warmup=2, windows=5, calls_per_window=100).median_s
    assert per_step == pytest.approx(90e-6, rel=0.01)              # step + a whole round trip: latency
    assert windowed == pytest.approx(50e-6 + 40e-6 / 100, rel=0.01)  # the round trip spread over 100 calls
    assert len(T.time_windows(dev.call, windows=3, calls_per_window=4).times_s) == 3


def test_time_windows_validates():
    with pytest.raises(ValueError):
        T.time_windows(lambda: None, windows=0)
    with pytest.raises(ValueError):
        T.time_windows(lambda: None, calls_per_window=0)
    with pytest.raises(ValueError):
        T.time_windows(lambda: None, warmup=-1)


class _FakeClock:
    """time.perf_counter for utils.timing: each call of a timed function advances it by that function's cost."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_time_alternating_interleaves_and_flips_the_order(monkeypatch):
    clock, calls = _FakeClock(), []
    monkeypatch.setattr(T.time, "perf_counter", clock)
    monkeypatch.setattr(T, "synchronize", lambda dev: None)

    def setting(name: str, cost_s: float):
        def fn():
            calls.append(name)
            clock.now += cost_s
        return fn

    result = T.time_alternating({"a": setting("a", 0.002), "b": setting("b", 0.001)}, rounds=3, repeats=2,
                                warmup=1, rewarm=0)
    # round 0: a (1 warm-up + 2), b (1 + 2); round 1 flipped: b, a (no warm-up); round 2: a, b
    assert calls == ["a"] * 3 + ["b"] * 3 + ["b"] * 2 + ["a"] * 2 + ["a"] * 2 + ["b"] * 2
    assert [len(t.times_s) for t in result["a"]] == [2, 2, 2]
    assert [t.warmup for t in result["a"]] == [1, 0, 0]
    assert T.pooled(result["a"]).median_s == pytest.approx(0.002)
    assert T.pooled(result["b"]).times_s == pytest.approx([0.001] * 6)


def test_time_alternating_spreads_a_burst_of_load_over_both_settings(monkeypatch):
    """A machine that slows down half-way through: timed one after the other, the second setting takes all of the
    slow-down and looks slower although both cost the same; interleaved, both see it alike."""
    clock = _FakeClock()
    monkeypatch.setattr(T.time, "perf_counter", clock)
    monkeypatch.setattr(T, "synchronize", lambda dev: None)
    done = [0]

    def same_cost():
        done[0] += 1
        clock.now += 0.001 if done[0] <= 20 else 0.002      # after 20 calls the machine gets busy

    one_after_other = {name: T.time_fn(same_cost, warmup=0, repeats=20) for name in ("a", "b")}
    assert one_after_other["b"].median_s == pytest.approx(2 * one_after_other["a"].median_s)
    done[0] = 0
    alternating = T.time_alternating({"a": same_cost, "b": same_cost}, rounds=4, repeats=5, warmup=0, rewarm=0)
    assert T.pooled(alternating["a"]).mean_s == pytest.approx(T.pooled(alternating["b"]).mean_s)


def test_time_alternating_validates():
    with pytest.raises(ValueError, match="empty"):
        T.time_alternating({})
    with pytest.raises(ValueError, match="rounds"):
        T.time_alternating({"a": lambda: None}, rounds=0)
    with pytest.raises(ValueError, match="no timings"):
        T.pooled([])

"""utils.async_timing on a CPU: the CUDA paths run against a simulated GPU (a queue with its own clock), with
torch.cuda.Event and current_stream replaced by fakes; the CPU paths run for real."""
from __future__ import annotations

import time

import pytest
import torch

import utils.async_timing as at


class FakeGPU:
    """A stream: launch() queues `work_s` of device time; events take the time at which the GPU reaches them."""

    def __init__(self, work_s: float = 0.004, launch_s: float = 0.00001) -> None:
        self.host_now = 0.0
        self.queue_ends_at = 0.0
        self.work_s, self.launch_s = work_s, launch_s
        self.device_syncs = 0
        self.event_syncs = 0

    def launch(self) -> None:
        self.host_now += self.launch_s
        self.queue_ends_at = max(self.queue_ends_at, self.host_now) + self.work_s

    def event_class(gpu):
        class FakeEvent:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing, "timing events need enable_timing=True"
                self.at = None

            def record(self, stream=None) -> None:
                assert stream == "stream"
                gpu.host_now += gpu.launch_s
                self.at = max(gpu.queue_ends_at, gpu.host_now)   # reached after everything queued before it
                gpu.queue_ends_at = self.at

            def synchronize(self) -> None:
                gpu.event_syncs += 1
                gpu.host_now = max(gpu.host_now, self.at)

            def elapsed_time(self, end) -> float:
                assert gpu.host_now >= end.at, "elapsed_time before the end event completed"
                return (end.at - self.at) * 1e3                   # milliseconds, like torch.cuda.Event
        return FakeEvent


@pytest.fixture
def fake_cuda(monkeypatch):
    gpu = FakeGPU()
    monkeypatch.setattr(torch.cuda, "Event", gpu.event_class())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: "stream")

    def device_sync(device):
        gpu.device_syncs += 1
        gpu.host_now = max(gpu.host_now, gpu.queue_ends_at)
    monkeypatch.setattr(at, "synchronize", device_sync)
    return gpu


def test_event_timer_uses_gpu_time_in_seconds_and_excludes_earlier_queued_work(fake_cuda):
    for _ in range(5):
        fake_cuda.launch()                    # 20 ms queued before the timed block
    with at.cuda_event_timer("cuda:0") as t:
        fake_cuda.launch()
    assert t.method == "CUDA events"
    assert t.elapsed_s == pytest.approx(0.004)            # the block's own work, converted from ms
    assert fake_cuda.device_syncs == 0 and fake_cuda.event_syncs == 1


def test_event_times_never_syncs_the_device_between_calls(fake_cuda):
    times = at.event_times(fake_cuda.launch, device="cuda", warmup=2, repeats=6)
    assert times == pytest.approx([0.004] * 6)
    assert fake_cuda.device_syncs == 0


def test_off_cuda_the_timer_falls_back_to_synchronised_wall_clock(monkeypatch):
    syncs = []
    monkeypatch.setattr(at, "synchronize", lambda d: syncs.append(torch.device(d).type))
    with at.cuda_event_timer("cpu") as t:
        time.sleep(0.01)
    assert t.method == "perf_counter + synchronize" and syncs == ["cpu", "cpu"]
    assert t.elapsed_s >= 0.009                              # seconds, not milliseconds
    times = at.event_times(lambda: None, device="cpu", warmup=0, repeats=3)
    assert len(times) == 3 and all(x >= 0 for x in times)
    with pytest.raises(ValueError):
        at.event_times(lambda: None, device="cpu", repeats=0)
    with pytest.raises(RuntimeError):
        at.EventTimer("cuda").elapsed_s


def test_run_for_never_lets_more_than_one_burst_queue_up(monkeypatch):
    queued, longest, syncs = [], [0], [0]

    def fn():
        queued.append(1)
        longest[0] = max(longest[0], len(queued))

    def sync(device):
        syncs[0] += 1
        queued.clear()
    monkeypatch.setattr(at, "synchronize", sync)
    stats = at.run_for(fn, 0.05, device="cuda", burst_s=0.001)
    assert stats.calls > 0 and stats.calls % stats.burst == 0
    assert longest[0] <= stats.burst, "the queue held more than one burst"
    assert syncs[0] == 2 + stats.calls // stats.burst         # warm-up, calibration, one per burst
    assert stats.calls_per_s == stats.calls / stats.elapsed_s
    with pytest.raises(ValueError):
        at.run_for(fn, 0, device="cpu")


def test_overlap_of_an_async_copy_and_of_a_blocking_one():
    gpu = FakeGPU(work_s=1.0, launch_s=0.0)

    def host_work():
        gpu.host_now += 1.0

    def sync():
        gpu.host_now = max(gpu.host_now, gpu.queue_ends_at)

    def blocking_copy():                        # pageable memory: the host waits for the copy
        gpu.launch()
        sync()

    async_copy = at.measure_overlap(gpu.launch, host_work, sync=sync, repeats=3, clock=lambda: gpu.host_now)
    assert (async_copy.async_s, async_copy.host_s, async_copy.together_s) == (1.0, 1.0, 1.0)
    assert async_copy.hidden_share == 1.0
    serial = at.measure_overlap(blocking_copy, host_work, sync=sync, repeats=3, clock=lambda: gpu.host_now)
    assert serial.together_s == 2.0 and serial.hidden_share == 0.0
    with pytest.raises(ValueError):
        at.measure_overlap(lambda: None, host_work, sync=sync, clock=lambda: gpu.host_now)


def test_host_wait_separates_the_wait_for_the_queue_from_the_copy_itself():
    # Queued device work of 1 s; a copy of 0.2 s. A blocking copy (cudaMemcpyAsync + cudaStreamSynchronize) keeps the
    # host for the queue and the copy; a non_blocking copy from pageable memory only for its staging; from pinned
    # memory only for the launch. The old A/B (pageable + blocking against pinned + non_blocking) mixed the first
    # two effects; host_wait tells them apart.
    gpu = FakeGPU(work_s=1.0, launch_s=0.001)
    sync = lambda: setattr(gpu, "host_now", max(gpu.host_now, gpu.queue_ends_at))

    def copy(non_blocking: bool, pinned: bool) -> None:
        if not non_blocking:                               # the stream synchronisation of a blocking copy
            sync()
            gpu.host_now += 0.2
        elif pinned:                                       # queued: the copy engine does it later
            gpu.host_now += gpu.launch_s
            gpu.queue_ends_at = max(gpu.queue_ends_at, gpu.host_now) + 0.2
        else:                                              # the host stages the bytes, no wait for the queue
            gpu.host_now += 0.2

    waits = {(nb, pin): at.host_wait(lambda: copy(nb, pin), queue_work=gpu.launch, sync=sync, repeats=3,
                                     clock=lambda: gpu.host_now)
             for nb, pin in [(False, False), (True, False), (True, True)]}
    assert waits[(False, False)] == pytest.approx(1.2, abs=1e-9), "blocking: the queued work, then the copy"
    assert waits[(True, False)] == pytest.approx(0.2), "non_blocking from pageable memory: the staging only"
    assert waits[(True, True)] == pytest.approx(0.001), "non_blocking from pinned memory: the launch only"
    with pytest.raises(ValueError):
        at.host_wait(lambda: None, queue_work=gpu.launch, sync=sync, repeats=0)

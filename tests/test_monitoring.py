"""utils.monitoring: the background sampler, its readers and its summaries (no GPU needed)."""
from __future__ import annotations

import threading
import time

import pytest

from utils.monitoring import Monitor, PsutilReader, Sample, make_reader, nvml_available


class FakeReader:
    """Counts its reads and returns a GPU-like reading whose utilisation is the read number."""

    name = "fake"

    def __init__(self) -> None:
        self.reads = 0
        self.closed = False
        self.threads: set[str] = set()

    def read(self) -> dict:
        self.reads += 1
        self.threads.add(threading.current_thread().name)
        return {"gpu_util_pct": float(self.reads), "gpu_mem_used_bytes": 1000 * self.reads}

    def close(self) -> None:
        self.closed = True


def test_psutil_reader_reports_cpu_and_ram_in_sane_units():
    r = PsutilReader().read()
    assert 0.0 <= r["cpu_util_pct"] <= 100.0
    assert r["ram_used_bytes"] > 1_000_000          # bytes, not MiB
    assert r["process_rss_bytes"] > 1_000_000
    assert "gpu_util_pct" not in r


def test_monitor_samples_in_a_background_thread_and_stops():
    reader = FakeReader()
    mon = Monitor(interval_s=0.01, reader=reader)
    mon.start()
    assert mon.running
    time.sleep(0.15)
    samples = mon.stop()
    assert not mon.running
    assert reader.closed
    assert len(samples) >= 5                         # start + several ticks + stop
    assert "utils.monitoring" in reader.threads      # the ticks ran off the main thread
    times = [s.t_s for s in samples]
    assert times == sorted(times) and times[0] >= 0.0
    assert [s.gpu_util_pct for s in samples] == [float(i) for i in range(1, len(samples) + 1)]
    n = len(samples)
    time.sleep(0.05)
    assert len(mon.samples) == n, "no sampling after stop()"


def test_short_run_still_has_two_samples_and_context_manager():
    reader = FakeReader()
    with Monitor(interval_s=10.0, reader=reader) as mon:
        pass
    assert len(mon.samples) == 2
    assert mon.backend == "fake"


def test_summary_and_columns_skip_unmeasured_fields():
    with Monitor(interval_s=10.0, reader=FakeReader()) as mon:
        mon.mark("epoch 1")
    cols = mon.as_dict()
    assert cols["gpu_util_pct"] == [1.0, 2.0]
    assert cols["gpu_temperature_c"] == [None, None]
    s = mon.summary()
    assert s["samples"] == 2.0
    assert s["gpu_util_pct_mean"] == pytest.approx(1.5)
    assert s["gpu_util_pct_max"] == 2.0
    assert s["gpu_mem_used_bytes_max"] == 2000.0
    assert "gpu_temperature_c_mean" not in s
    assert mon.marks and mon.marks[0][1] == "epoch 1"


def test_errors_are_explicit():
    with pytest.raises(ValueError):
        Monitor(interval_s=0)
    with pytest.raises(RuntimeError):
        Monitor(reader=FakeReader()).stop()
    with pytest.raises(ValueError):
        make_reader("tpu")
    mon = Monitor(interval_s=10.0, reader=FakeReader()).start()
    with pytest.raises(RuntimeError):
        mon.start()
    mon.stop()


def test_auto_backend_falls_back_to_psutil_without_nvml():
    reader = make_reader("auto")
    try:
        assert reader.name == ("nvml" if nvml_available() else "psutil")
        assert isinstance(Sample(t_s=0.0, **reader.read()), Sample)
    finally:
        reader.close()

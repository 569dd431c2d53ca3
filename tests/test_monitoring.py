"""utils.monitoring: the background sampler, its readers and its summaries (no GPU needed)."""
from __future__ import annotations

import sys
import threading
import time
import types
from dataclasses import replace

import pytest
import torch

from utils.monitoring import (Monitor, NVMLReader, PsutilReader, Sample, UtilisationTrace, device_utilisation,
                              make_reader, nvml_available, nvml_uuid, pci_bus_id, utilisation_stats)


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
    s = mon.summary(skip_first=False)
    assert s["samples"] == 2.0
    assert s["gpu_util_pct_mean"] == pytest.approx(1.5)
    assert s["gpu_util_pct_max"] == 2.0
    assert s["gpu_mem_used_bytes_max"] == 2000.0
    assert "gpu_temperature_c_mean" not in s
    assert mon.marks and mon.marks[0][1] == "epoch 1"


def test_summary_leaves_out_the_sample_taken_at_start():
    # psutil's first process reading has almost no interval behind it: 0 %, or ~10,000 % when a 10 ms tick lands in it
    with Monitor(interval_s=10.0, reader=FakeReader()) as mon:
        pass
    mon.samples[0] = replace(mon.samples[0], process_cpu_pct=10_000.0)
    mon.samples[1] = replace(mon.samples[1], process_cpu_pct=99.0)
    s = mon.summary()
    assert s["samples"] == 1.0 and s["process_cpu_pct_mean"] == 99.0 and s["process_cpu_pct_max"] == 99.0
    assert mon.summary(skip_first=False)["process_cpu_pct_max"] == 10_000.0


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


def test_auto_backend_falls_back_to_psutil_without_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # "import pynvml" now raises ImportError
    with pytest.raises(RuntimeError):
        make_reader("nvml")
    assert not nvml_available()
    reader = make_reader("auto")
    try:
        assert reader.name == "psutil"
        assert isinstance(Sample(t_s=0.0, **reader.read()), Sample)
    finally:
        reader.close()


# ---------------------------------------------------------------------------------------------- simulated GPUs
class NVMLNotFound(Exception):
    """What pynvml raises for an unknown UUID or bus id (NVMLError_NotFound)."""


def fake_pynvml(gpus: list[dict]) -> types.ModuleType:
    """A pynvml module holding ``gpus`` in NVML's order (PCI bus order); each reads back its own utilisation."""
    nv = types.ModuleType("pynvml")
    nv.NVML_TEMPERATURE_GPU = 0
    nv.calls = []
    nv.nvmlInit = lambda: nv.calls.append("init")
    nv.nvmlShutdown = lambda: nv.calls.append("shutdown")
    nv.nvmlDeviceGetCount = lambda: len(gpus)
    nv.nvmlDeviceGetHandleByIndex = lambda i: gpus[i]

    def by(key):
        def find(value):
            for gpu in gpus:
                if gpu[key] == value:
                    return gpu
            raise NVMLNotFound(f"{key} {value}")
        return find
    nv.nvmlDeviceGetHandleByUUID = by("uuid")
    nv.nvmlDeviceGetHandleByPciBusId = by("bus_id")
    nv.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=h["util"], memory=h["util"] / 2)
    nv.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=h["mem"], total=80 * 2**30)
    nv.nvmlDeviceGetPowerUsage = lambda h: 300_000                       # milliwatts
    nv.nvmlDeviceGetTemperature = lambda h, sensor: 55
    return nv


class TorchUUID:
    """Like torch._C._CUuuid: str() gives the bare 8-4-4-4-12 hex form, without NVML's "GPU-" prefix."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


SLOW = {"uuid": "GPU-11111111-0000-0000-0000-000000000001", "bus_id": "00000000:01:00.0", "util": 7.0, "mem": 1}
FAST = {"uuid": "GPU-22222222-0000-0000-0000-000000000002", "bus_id": "00000000:41:00.0", "util": 93.0, "mem": 2}


def torch_props(uuid: str, bus: int, name: str, with_pci: bool = True):
    props = types.SimpleNamespace(uuid=TorchUUID(uuid), name=name)
    if with_pci:
        props.pci_domain_id, props.pci_bus_id, props.pci_device_id = 0, bus, 0
    return props


@pytest.fixture
def two_gpus(monkeypatch):
    """NVML lists SLOW then FAST (PCI order); CUDA, fastest first, calls FAST cuda:0 and SLOW cuda:1."""
    nv = fake_pynvml([SLOW, FAST])
    props = [torch_props("22222222-0000-0000-0000-000000000002", 0x41, "fast GPU"),
             torch_props("11111111-0000-0000-0000-000000000001", 0x01, "slow GPU")]
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props[i])
    return nv, props


def test_uuid_and_bus_id_in_nvml_spelling():
    assert nvml_uuid(TorchUUID("58e0a0b8-1c2d-3e4f-5a6b-7c8d9e0f1a2b")) == "GPU-58e0a0b8-1c2d-3e4f-5a6b-7c8d9e0f1a2b"
    assert nvml_uuid("GPU-abc") == "GPU-abc" and nvml_uuid("mig-abc") == "MIG-abc"
    assert pci_bus_id(torch_props("x", 0x41, "g")) == "00000000:41:00.0"
    assert pci_bus_id(types.SimpleNamespace(uuid="x")) is None


@pytest.mark.parametrize("device, expected", [("cuda:0", FAST), ("cuda", FAST), (None, FAST), (1, SLOW),
                                              (torch.device("cuda", 1), SLOW)])
def test_nvml_reads_the_gpu_cuda_means_not_the_same_index(two_gpus, device, expected):
    nv, _ = two_gpus
    assert nv.nvmlDeviceGetHandleByIndex(0) is SLOW       # the index trap: NVML's 0 is CUDA's 1 here
    with Monitor(interval_s=10.0, backend="nvml", device=device) as mon:
        pass
    assert mon.backend == "nvml"
    assert [s.gpu_util_pct for s in mon.samples] == [expected["util"]] * 2
    assert mon.samples[0].gpu_mem_used_bytes == expected["mem"] and mon.samples[0].gpu_power_w == 300.0
    assert nv.calls.count("init") == nv.calls.count("shutdown") == 1


def test_falls_back_to_the_pci_bus_id_when_the_uuid_is_unknown(two_gpus):
    nv, props = two_gpus
    props[0].uuid = TorchUUID("99999999-0000-0000-0000-000000000009")   # e.g. a UUID NVML spells differently
    reader = NVMLReader("cuda:0")
    try:
        assert reader.matched_by == "PCI bus id 00000000:41:00.0"
        assert reader.read()["gpu_util_pct"] == FAST["util"]
    finally:
        reader.close()


def test_no_match_is_an_error_and_auto_falls_back_to_psutil(two_gpus):
    nv, props = two_gpus
    props[1] = torch_props("99999999-0000-0000-0000-000000000009", 0x81, "unknown GPU")
    with pytest.raises(RuntimeError, match="unknown GPU"):
        NVMLReader(1)
    assert nv.calls[-1] == "shutdown", "NVML is shut down again after a failed match"
    assert not nvml_available("cuda:1") and nvml_available("cuda:0")
    assert make_reader("auto", device="cuda:1").name == "psutil"
    with pytest.raises(RuntimeError, match="does not exist"):
        NVMLReader("cuda:2")
    with pytest.raises(ValueError, match="CUDA device"):
        NVMLReader("cpu")


def test_without_cuda_in_torch_nvml_is_not_used(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([SLOW, FAST]))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert not nvml_available()
    assert make_reader("auto").name == "psutil"


# ---------------------------------------------------------------------------------------------- MIG slices
class NVMLNotSupported(Exception):
    """What pynvml raises for a field this GPU cannot report (NVMLError_NotSupported), e.g. utilisation on MIG."""


@pytest.fixture
def mig_slice(monkeypatch):
    """One MIG slice: NVML finds it by its MIG- UUID but refuses every utilisation read; memory still reads."""
    mig = {"uuid": "MIG-33333333-0000-0000-0000-000000000003", "bus_id": "00000000:41:00.0", "util": 0.0, "mem": 5}
    nv = fake_pynvml([mig])

    def not_supported(handle):
        raise NVMLNotSupported("Not Supported")
    nv.nvmlDeviceGetUtilizationRates = not_supported
    props = [torch_props("MIG-33333333-0000-0000-0000-000000000003", 0x41, "H100 MIG 1g.10gb")]
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props[i])
    return nv


def test_a_mig_slice_gives_no_utilisation_and_the_summary_says_so_instead_of_dividing_by_zero(mig_slice):
    mon = Monitor(interval_s=0.01, backend="nvml", device="cuda:0")
    with mon:
        time.sleep(0.05)
    assert mon.backend == "nvml" and len(mon.samples) >= 3
    assert all(s.gpu_util_pct is None for s in mon.samples) and mon.samples[0].gpu_mem_used_bytes == 5
    trace = device_utilisation(mon)
    assert trace.label == "GPU-Util" and trace.util_pct == [] and trace.dropped == len(mon.samples) - 1
    assert utilisation_stats(trace) is None
    # The method it replaces: the mean of the non-None readings, which divides by zero on a MIG slice.
    readings = [u for u in mon.as_dict()["gpu_util_pct"][1:] if u is not None]
    with pytest.raises(ZeroDivisionError):
        sum(readings) / len(readings)


def test_device_utilisation_keeps_time_and_value_together_and_divides_cpu_by_threads():
    class Psutilish(FakeReader):
        name = "psutil"

        def read(self) -> dict:
            self.reads += 1
            return {"process_cpu_pct": None if self.reads == 3 else 50.0 * self.reads}

    mon = Monitor(interval_s=10.0, reader=Psutilish())
    mon.samples = [Sample(t_s=t, process_cpu_pct=p) for t, p in [(0.0, 0.0), (1.0, 100.0), (2.0, None), (3.0, 300.0)]]
    mon._reader = Psutilish()
    trace = device_utilisation(mon, threads=2)
    assert trace == UtilisationTrace([1.0, 3.0], [50.0, 150.0], "process CPU % per torch thread", 1)
    assert utilisation_stats(trace, low_pct=60.0) == (100.0, 0.5)
    assert device_utilisation(mon, threads=2, skip_first=False).util_pct == [0.0, 50.0, 150.0]


def test_nvml_memory_info_prefers_version_2_which_leaves_out_the_driver_reserve():
    # NVML version 1's `used` is total - free and includes the driver's reserve; version 2 reports the reserve apart,
    # and its `used` is what nvidia-smi's Memory-Usage shows.
    from utils.monitoring import nvml_memory_info
    reserve, used = 400 * 2**20, 3 * 2**30
    calls = []

    def get_memory_info(handle, version=None):
        calls.append(version)
        if version is None:
            return types.SimpleNamespace(used=used + reserve, total=80 * 2**30)
        if version == "v2":
            return types.SimpleNamespace(used=used, reserved=reserve, total=80 * 2**30)
        raise AssertionError(version)

    nv = types.SimpleNamespace(nvmlMemory_v2="v2", nvmlDeviceGetMemoryInfo=get_memory_info)
    assert nvml_memory_info(nv, "gpu0").used == used and calls == ["v2"]

    def driver_without_v2(handle, version=None):
        if version is not None:
            raise RuntimeError("NVML_ERROR_FUNCTION_NOT_FOUND")
        return get_memory_info(handle)
    nv.nvmlDeviceGetMemoryInfo = driver_without_v2
    assert nvml_memory_info(nv, "gpu0").used == used + reserve             # version 1, all it can have
    old_bindings = types.SimpleNamespace(nvmlDeviceGetMemoryInfo=lambda handle: get_memory_info(handle))
    assert nvml_memory_info(old_bindings, "gpu0").used == used + reserve   # no nvmlMemory_v2 constant at all


def test_temperature_uses_the_versioned_call_and_falls_back_to_the_deprecated_one():
    from utils.monitoring import nvml_temperature_c

    nv = types.SimpleNamespace(NVML_TEMPERATURE_GPU=0, nvmlDeviceGetTemperature=lambda h, sensor: 55)
    assert nvml_temperature_c(nv, "h") == 55.0                          # nvidia-ml-py without the V call
    nv.nvmlDeviceGetTemperatureV = lambda h, sensor: 61
    assert nvml_temperature_c(nv, "h") == 61.0                          # NVML 13: the versioned call

    def no_such_function(h, sensor):
        raise RuntimeError("NVML_ERROR_FUNCTION_NOT_FOUND")              # a driver older than the bindings
    nv.nvmlDeviceGetTemperatureV = no_such_function
    assert nvml_temperature_c(nv, "h") == 55.0

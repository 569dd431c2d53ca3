"""Monitoring: sample GPU (NVML) or CPU/RAM (psutil) usage in a background thread while code runs.

    from utils.monitoring import Monitor
    with Monitor(interval_s=0.1) as mon:
        fit(...)
    df = mon.as_dict()            # columns: t_s, gpu_util_pct, gpu_mem_used_bytes, ... per sample

On a machine with an NVIDIA driver the monitor reads NVML (the library behind ``nvidia-smi``, through the
``nvidia-ml-py`` package, imported as ``pynvml``): GPU utilisation, memory, temperature and power. Without one it
falls back to psutil and records only CPU and RAM, so the same notebook runs everywhere.

NVML and CUDA number GPUs differently. NVML counts every GPU (it ignores ``CUDA_VISIBLE_DEVICES``), usually in PCI bus order but without a guarantee; CUDA counts only the GPUs listed
in ``CUDA_VISIBLE_DEVICES`` and, unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` is set, puts the fastest first. So
``cuda:0`` is not necessarily NVML's GPU 0. The monitor therefore finds the NVML device of a CUDA device by its
UUID (``torch.cuda.get_device_properties(i).uuid``; NVML writes the same UUID with a ``GPU-`` prefix) and, failing
that, by its PCI bus id; never by index.

Units: seconds, percent (0-100), bytes, degrees Celsius, watts. ``None`` means "not measured by this backend", or a
reading the hardware refused: NVML reports no utilisation for MIG slices (``NVMLError_NotSupported``), so there every
``gpu_util_pct`` is ``None``. :func:`device_utilisation` and :func:`utilisation_stats` summarise the compute device's
utilisation with that in mind: they leave failed readings out and say when nothing is left.
"""
from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable, Protocol

import psutil
import torch


@dataclass
class Sample:
    """One reading. ``t_s`` counts seconds since the monitor started; GPU fields are ``None`` on the CPU backend."""

    t_s: float
    cpu_util_pct: float | None = None          # whole machine, average over all cores, 0-100
    process_cpu_pct: float | None = None       # this Python process; can exceed 100 with several threads
    ram_used_bytes: int | None = None          # whole machine
    process_rss_bytes: int | None = None       # resident memory of this process
    gpu_util_pct: float | None = None          # NVML "GPU-Util": % of the sample period in which a kernel ran
    gpu_mem_util_pct: float | None = None      # NVML: % of the period in which device memory was read/written
    gpu_mem_used_bytes: int | None = None      # device memory in use by all processes (what nvidia-smi shows)
    gpu_mem_total_bytes: int | None = None
    gpu_temperature_c: float | None = None
    gpu_power_w: float | None = None


class Reader(Protocol):
    """A source of readings: returns the non-time fields of a :class:`Sample` as a dict."""

    name: str

    def read(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class PsutilReader:
    """CPU and RAM through psutil: works on every OS, needs no GPU."""

    name = "psutil"

    def __init__(self) -> None:
        self._proc = psutil.Process()
        psutil.cpu_percent(interval=None)          # the first call only primes the counters
        self._proc.cpu_percent(interval=None)

    def read(self) -> dict[str, Any]:
        vm = psutil.virtual_memory()
        return {"cpu_util_pct": psutil.cpu_percent(interval=None),
                "process_cpu_pct": self._proc.cpu_percent(interval=None),
                "ram_used_bytes": int(vm.total - vm.available),
                "process_rss_bytes": int(self._proc.memory_info().rss)}

    def close(self) -> None:
        pass


def cuda_index(device: int | str | torch.device | None = None) -> int:
    """The CUDA ordinal of ``device`` (``None`` or ``"cuda"``: the current CUDA device). Raises ``RuntimeError``
    when PyTorch sees no such CUDA device, ``ValueError`` for a non-CUDA device."""
    if isinstance(device, int) and not isinstance(device, bool):
        index = device
    else:
        dev = torch.device("cuda" if device is None else device)
        if dev.type != "cuda":
            raise ValueError(f"NVML watches NVIDIA GPUs: pass a CUDA device such as 'cuda:0', got {dev}")
        index = dev.index
    if not torch.cuda.is_available():
        raise RuntimeError("PyTorch sees no CUDA device here, so there is no GPU for NVML to watch")
    if index is None:
        index = torch.cuda.current_device()
    if not 0 <= index < torch.cuda.device_count():
        raise RuntimeError(f"cuda:{index} does not exist: PyTorch sees {torch.cuda.device_count()} CUDA device(s)"
                           " (CUDA_VISIBLE_DEVICES limits which ones)")
    return index


def nvml_uuid(torch_uuid: object) -> str:
    """NVML's spelling of a CUDA device UUID: PyTorch prints ``"58e0a0b8-..."``, NVML ``"GPU-58e0a0b8-..."``."""
    text = str(torch_uuid).strip()
    if text[:4].upper() in ("GPU-", "MIG-"):
        return text[:4].upper() + text[4:]
    return "GPU-" + text


def pci_bus_id(props: object) -> str | None:
    """NVML's PCI bus id (``"00000000:41:00.0"``, domain:bus:device.function in hex) from torch's device properties,
    or ``None`` when this PyTorch does not expose the PCI fields."""
    try:
        domain, bus, slot = (int(getattr(props, f"pci_{k}_id")) for k in ("domain", "bus", "device"))
    except AttributeError:
        return None
    return f"{domain:08X}:{bus:02X}:{slot:02X}.0"


def nvml_handle_for_cuda_device(nvml: Any, index: int) -> tuple[Any, str]:
    """``(handle, how)``: the NVML handle of CUDA device ``index``, matched by UUID (a whole GPU, ``GPU-...``, or
    a MIG slice, ``MIG-...``), else by PCI bus id (``how`` says which). Raises ``RuntimeError`` when nothing
    matches."""
    props = torch.cuda.get_device_properties(index)
    uuid = nvml_uuid(props.uuid)
    uuid_error: Exception | None = None
    for candidate in dict.fromkeys([uuid, "MIG-" + uuid[4:]]):
        try:
            return nvml.nvmlDeviceGetHandleByUUID(candidate), f"UUID {candidate}"
        except Exception as e:
            uuid_error = uuid_error or e
    bus_id = pci_bus_id(props)
    if bus_id is not None:
        try:
            return nvml.nvmlDeviceGetHandleByPciBusId(bus_id), f"PCI bus id {bus_id}"
        except Exception:
            pass
    raise RuntimeError(f"NVML knows no GPU with UUID {uuid} or PCI bus id {bus_id} (cuda:{index}, {props.name}): "
                       f"{uuid_error}")


def nvml_memory_info(nvml: Any, handle: Any) -> Any:
    """NVML's memory figures for ``handle``, in bytes: version 2 where the driver and nvidia-ml-py have it, else
    version 1. Version 2's ``used`` leaves out the memory the driver reserves for itself (``reserved``), as
    nvidia-smi's Memory-Usage does; version 1's ``used`` is ``total - free`` and includes that reserve."""
    version_2 = getattr(nvml, "nvmlMemory_v2", None)
    if version_2 is not None:
        try:
            return nvml.nvmlDeviceGetMemoryInfo(handle, version=version_2)
        except Exception:  # an older driver without nvmlDeviceGetMemoryInfo_v2
            pass
    return nvml.nvmlDeviceGetMemoryInfo(handle)


def nvml_temperature_c(nvml: Any, handle: Any) -> float:
    """The GPU's temperature in degrees Celsius: ``nvmlDeviceGetTemperatureV`` where the driver and nvidia-ml-py
    have it, else ``nvmlDeviceGetTemperature``, which NVML deprecated in CUDA 13.0 and plans to remove in 14.0."""
    versioned = getattr(nvml, "nvmlDeviceGetTemperatureV", None)
    if versioned is not None:
        try:
            return float(versioned(handle, nvml.NVML_TEMPERATURE_GPU))
        except Exception:  # an older driver without nvmlDeviceGetTemperatureV
            pass
    return float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))


class NVMLReader(PsutilReader):
    """NVML (``pynvml``) for the GPU behind one CUDA device, plus the psutil CPU/RAM fields.

    ``device``: a CUDA device (``"cuda:1"``, ``torch.device``, or its index); ``None`` is the current one. Raises
    ``RuntimeError`` without a driver, without CUDA in PyTorch, or when NVML has no GPU matching the device.
    After construction, ``matched_by`` says how the GPU was found (``"UUID GPU-..."`` or ``"PCI bus id ..."``).
    """

    name = "nvml"

    def __init__(self, device: int | str | torch.device | None = None) -> None:
        super().__init__()
        self.cuda_index = cuda_index(device)
        try:
            import pynvml
        except ImportError as e:  # pragma: no cover - nvidia-ml-py is in the course's requirements
            raise RuntimeError("nvidia-ml-py is not installed: pip install nvidia-ml-py") from e
        try:
            pynvml.nvmlInit()
        except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            raise RuntimeError(f"NVML is not usable here (no NVIDIA driver?): {e}") from e
        self._nvml = pynvml
        try:
            self._handle, self.matched_by = nvml_handle_for_cuda_device(pynvml, self.cuda_index)
        except Exception:
            pynvml.nvmlShutdown()
            raise

    def _try(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception:  # a field not supported on this GPU (e.g. power on some laptop GPUs)
            return None

    def read(self) -> dict[str, Any]:
        nv, h = self._nvml, self._handle
        out = super().read()
        util = self._try(lambda: nv.nvmlDeviceGetUtilizationRates(h))
        mem = self._try(lambda: nvml_memory_info(nv, h))
        power_mw = self._try(lambda: nv.nvmlDeviceGetPowerUsage(h))
        out.update(
            gpu_util_pct=None if util is None else float(util.gpu),
            gpu_mem_util_pct=None if util is None else float(util.memory),
            gpu_mem_used_bytes=None if mem is None else int(mem.used),
            gpu_mem_total_bytes=None if mem is None else int(mem.total),
            gpu_temperature_c=self._try(lambda: nvml_temperature_c(nv, h)),
            gpu_power_w=None if power_mw is None else power_mw / 1000.0,   # NVML reports milliwatts
        )
        return out

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            pass


def nvml_available(device: int | str | torch.device | None = None) -> bool:
    """True when NVML can watch CUDA device ``device`` (``None``: the current one): a driver is loaded, PyTorch
    sees the device, and NVML has the same GPU."""
    try:
        NVMLReader(device).close()
        return True
    except (RuntimeError, ValueError):
        return False


def make_reader(backend: str = "auto", device: int | str | torch.device | None = None) -> Reader:
    """``"nvml"`` (for CUDA device ``device``), ``"psutil"``, or ``"auto"`` (NVML when it works, else psutil)."""
    key = backend.strip().lower()
    if key == "psutil":
        return PsutilReader()
    if key == "nvml":
        return NVMLReader(device)
    if key == "auto":
        try:
            return NVMLReader(device)
        except (RuntimeError, ValueError):
            return PsutilReader()
    raise ValueError(f"backend must be 'auto', 'nvml' or 'psutil', got {backend!r}")


class Monitor:
    """Sample a :class:`Reader` every ``interval_s`` seconds in a daemon thread between :meth:`start` and
    :meth:`stop` (or inside ``with Monitor() as mon:``). One sample is also taken at start and at stop, so even a
    run shorter than the interval has two points.

    Sampling costs a few hundred microseconds of CPU per reading; 0.05-1 s intervals are cheap. Note that NVML
    itself averages utilisation over its own window (1/6 s to 1 s depending on the GPU), so sampling faster than
    that window (1/6 s on the fastest-updating GPUs, up to 1 s on others: the default 0.1 s is already faster) repeats
    values rather than resolving finer detail.
    """

    def __init__(self, interval_s: float = 0.1, backend: str = "auto",
                 device: int | str | torch.device | None = None, reader: Reader | None = None) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0 seconds, got {interval_s}")
        self.interval_s = float(interval_s)
        self._backend, self._device = backend, device
        self._reader = reader
        self.samples: list[Sample] = []
        self.marks: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._lock = threading.Lock()

    @property
    def backend(self) -> str:
        """``"nvml"`` or ``"psutil"`` once started (``"not started"`` before)."""
        return self._reader.name if self._reader is not None else "not started"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _take(self) -> None:
        values = self._reader.read()  # type: ignore[union-attr]
        with self._lock:
            self.samples.append(Sample(t_s=time.perf_counter() - self._t0, **values))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def start(self) -> "Monitor":
        if self.running:
            raise RuntimeError("the monitor is already running")
        if self._reader is None:
            self._reader = make_reader(self._backend, self._device)
        self.samples, self.marks = [], []
        self._stop.clear()
        self._t0 = time.perf_counter()
        self._take()
        self._thread = threading.Thread(target=self._loop, name="utils.monitoring", daemon=True)
        self._thread.start()
        return self

    def mark(self, label: str) -> None:
        """Record an event (e.g. ``"epoch 2"``) at the current time, to annotate plots."""
        self.marks.append((time.perf_counter() - self._t0, label))

    def stop(self) -> list[Sample]:
        """Stop sampling (takes a last sample) and return the samples."""
        if self._thread is None:
            raise RuntimeError("the monitor was not started")
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._take()
        if self._reader is not None:
            self._reader.close()
        return self.samples

    def __enter__(self) -> "Monitor":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self.stop()

    def as_dict(self) -> dict[str, list]:
        """Column-wise samples: ``{"t_s": [...], "cpu_util_pct": [...], ...}`` (ready for ``pandas.DataFrame``)."""
        with self._lock:
            rows = [asdict(s) for s in self.samples]
        return {f.name: [r[f.name] for r in rows] for f in fields(Sample)}

    def summary(self, skip_first: bool = True) -> dict[str, float]:
        """Mean and max of every field that was measured (``None`` fields are skipped), e.g. ``gpu_util_pct_mean``,
        and ``samples``, how many samples they are over.

        ``skip_first`` leaves out the sample taken at start (when there are others), as :func:`device_utilisation`
        does: psutil's first process reading covers only the microseconds since it was primed, and reads 0 % or, when
        the process's CPU time (counted in 10 ms steps on Linux) ticks inside them, thousands of per cent.
        """
        start = 1 if skip_first and len(self.samples) > 1 else 0
        out: dict[str, float] = {"samples": float(len(self.samples) - start),
                                 "duration_s": self.samples[-1].t_s if self.samples else 0.0}
        for name, values in self.as_dict().items():
            if name == "t_s":
                continue
            measured = [float(v) for v in values[start:] if v is not None]
            if measured:
                out[f"{name}_mean"] = sum(measured) / len(measured)
                out[f"{name}_max"] = max(measured)
        return out


@dataclass(frozen=True)
class UtilisationTrace:
    """The compute device's utilisation during a monitored run, failed readings left out.

    ``t_s``: seconds since the monitor started; ``util_pct``: GPU-Util in % with the NVML backend, else this process's
    CPU % per torch thread (so that 100 means every thread busy); ``label`` says which; ``dropped``: samples whose
    reading was missing (``None``), e.g. every sample on a MIG slice, where NVML reports no utilisation.
    """

    t_s: list[float]
    util_pct: list[float]
    label: str
    dropped: int


def device_utilisation(monitor: Monitor, threads: int | None = None, skip_first: bool = True) -> UtilisationTrace:
    """The utilisation of the device that does the work, from ``monitor``'s samples.

    ``threads``: torch threads to divide the process CPU % by on the psutil backend (default
    ``torch.get_num_threads()``). ``skip_first`` drops the sample taken at start: psutil's first process reading has
    no interval behind it, and NVML's predates the work.
    """
    cols = monitor.as_dict()
    start = 1 if skip_first else 0
    if monitor.backend == "nvml":
        label, values = "GPU-Util", cols["gpu_util_pct"]
    else:
        per = max(1, threads if threads is not None else torch.get_num_threads())
        label = "process CPU % per torch thread"
        values = [None if p is None else p / per for p in cols["process_cpu_pct"]]
    pairs = list(zip(cols["t_s"][start:], values[start:]))
    kept = [(t, float(u)) for t, u in pairs if u is not None]
    return UtilisationTrace([t for t, _ in kept], [u for _, u in kept], label, len(pairs) - len(kept))


def utilisation_stats(trace: UtilisationTrace, low_pct: float = 20.0) -> tuple[float, float] | None:
    """``(mean utilisation in %, share of readings below low_pct)`` of ``trace``, or ``None`` when it holds no
    reading at all (a MIG slice, where NVML reports no utilisation): a summary of nothing is not 0 %. A run shorter
    than one interval is not empty: it keeps the sample taken at stop, one reading with little time behind it."""
    if not trace.util_pct:
        return None
    n = len(trace.util_pct)
    return sum(trace.util_pct) / n, sum(u < low_pct for u in trace.util_pct) / n

"""How long a GPU was busy while a block of code ran, from the kernels the profiler recorded.

A wall clock around GPU work measures the host's view: launch, wait, read back. The device's own view is its busy
time: the share of time during which *at least one* kernel, copy or memset ran on it. The profiler records each of
those (CUPTI activity records: start and end on the GPU's clock), so their union over a block of code is the
device's busy time, and the rest of the block is idle time. nvidia-smi's "GPU-Util" counts kernels only
(``torch.cuda.utilization``), so where copies run with no kernel beside them (a data-bound loop) this busy time reads
higher than GPU-Util. :func:`device_busy` measures it on CUDA; :func:`busy_us_of_events` is
the arithmetic, on the profiler's ``FunctionEvent`` list, and is what the CPU tests exercise with simulated events.

The GPU mirrors of ``record_function`` ranges (device type CUDA, ``is_user_annotation``) span the kernels of a range
including its gaps, so they are not device work and are left out.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import torch
from torch.autograd import DeviceType

from .device import synchronize
from .stderr_capture import capture_stderr

__all__ = ["DeviceBusy", "busy_us_of_events", "device_busy", "union_length"]


def _is_device_work(event: Any) -> bool:
    return getattr(event, "device_type", DeviceType.CPU) != DeviceType.CPU and not getattr(
        event, "is_user_annotation", False)


def union_length(spans: Iterable[tuple[float, float]]) -> float:
    """Total length covered by ``(start, end)`` intervals, overlaps counted once (empty intervals add nothing); in
    the intervals' own unit."""
    busy, cur_start, cur_end = 0.0, None, None
    for s, t in sorted(spans):
        if t <= s:
            continue
        if cur_end is None or s > cur_end:
            if cur_end is not None:
                busy += cur_end - cur_start
            cur_start, cur_end = s, t
        else:
            cur_end = max(cur_end, t)
    if cur_end is not None:
        busy += cur_end - cur_start
    return busy


def busy_us_of_events(events: Iterable[Any]) -> tuple[float, int]:
    """(microseconds covered by at least one device activity, number of device activities) for the profiler's
    ``FunctionEvent`` objects: kernels, copies and memsets on any non-CPU device; GPU mirrors of ranges are skipped.
    Overlapping activities (two streams, a copy beside a kernel) count once."""
    spans = [(float(e.time_range.start), float(e.time_range.end)) for e in events if _is_device_work(e)]
    return union_length(spans), len(spans)


@dataclass
class DeviceBusy:
    """Filled when the ``with device_busy(...)`` block ends: ``busy_s`` (device busy, seconds), ``window_s`` (the
    block's wall-clock seconds, synchronised at both ends), ``activities`` (kernels, copies, memsets recorded),
    ``profiler`` (the profiler object: its ``key_averages()`` also hold the host's ranges when ``with_cpu``)."""

    busy_s: float = float("nan")
    window_s: float = float("nan")
    activities: int = 0
    profiler: Any = field(default=None, repr=False)

    @property
    def utilisation(self) -> float:
        return self.busy_s / self.window_s


@contextlib.contextmanager
def device_busy(device: torch.device | str, *, with_cpu: bool = False,
                profile_factory: Callable[..., Any] | None = None) -> Iterator[DeviceBusy]:
    """Measure the CUDA device's busy time during the block (see the module docstring).

    Records CUDA activity only unless ``with_cpu`` (then the host's operators and ranges too, at a few microseconds
    of host overhead per operator). The profiler's log lines on standard error are captured. ``profile_factory``
    replaces ``torch.profiler.profile`` (tests pass a fake one). Raises ``ValueError`` on a device that is not CUDA:
    there is no kernel record to read there.
    """
    dev = torch.device(device)
    if dev.type != "cuda" and profile_factory is None:
        raise ValueError(f"device_busy reads CUDA kernel records; {dev} has none (time the work instead)")
    from torch.profiler import ProfilerActivity, profile

    factory = profile_factory or profile
    activities = [ProfilerActivity.CUDA] + ([ProfilerActivity.CPU] if with_cpu else [])
    result = DeviceBusy()
    with capture_stderr():
        prof = factory(activities=activities)
        synchronize(dev)
        with prof:
            start = time.perf_counter()
            yield result
            synchronize(dev)
            result.window_s = time.perf_counter() - start
    busy_us, n = busy_us_of_events(prof.events())
    result.busy_s, result.activities, result.profiler = busy_us / 1e6, n, prof

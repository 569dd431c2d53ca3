"""utils.device_busy on the CPU: the CUDA branch of Day 23's pipeline, simulated with the profiler's own events."""
import pytest
import torch
from torch.autograd import DeviceType
from torch.autograd.profiler_util import FunctionEvent

from utils.device_busy import busy_us_of_events, device_busy


def _event(i, name, start, end, device=DeviceType.CUDA, annotation=False):
    return FunctionEvent(id=i, name=name, thread=0, start_us=start, end_us=end, device_type=device,
                         is_user_annotation=annotation, use_device="cuda", stack=[])


# A launch-bound step as a CUDA trace shows it: 40 tiny kernels of 3 us, launched every 10 us (the host is the
# limit), the step's GPU mirror spanning all of them, and the host's own operators.
LAUNCH_BOUND = ([_event(i, "void gemv_kernel<...>", 10.0 * i, 10.0 * i + 3.0) for i in range(40)]
                + [_event(100, "ProfilerStep#1", 0.0, 393.0, annotation=True),
                   _event(101, "aten::linear", 0.0, 400.0, device=DeviceType.CPU)])


def test_busy_time_is_the_union_of_device_work_without_range_mirrors():
    busy_us, n = busy_us_of_events(LAUNCH_BOUND)
    assert (busy_us, n) == (120.0, 40)                 # 40 x 3 us; not the mirror's 393 us, not the CPU op
    overlapping = [_event(1, "a", 0, 50), _event(2, "copy", 20, 80), _event(3, "b", 30, 40), _event(4, "c", 100, 110)]
    assert busy_us_of_events(overlapping) == (90.0, 4)
    assert busy_us_of_events([]) == (0.0, 0)


class FakeProfiler:
    """Stands in for torch.profiler.profile on a machine without CUDA: records its arguments, returns events."""

    def __init__(self, events):
        self._events, self.kwargs, self.entered = events, None, False

    def __call__(self, **kwargs):
        self.kwargs = kwargs
        return self

    def __enter__(self):
        self.entered = True
        return self

    def __exit__(self, *exc):
        return False

    def events(self):
        return self._events


def test_device_busy_reads_the_profile_of_the_block():
    fake = FakeProfiler(LAUNCH_BOUND)
    with device_busy("cpu", profile_factory=fake) as meter:
        torch.ones(3).sum()
    assert fake.entered and [a.name for a in fake.kwargs["activities"]] == ["CUDA"]
    assert meter.busy_s == pytest.approx(120e-6) and meter.activities == 40 and meter.window_s > 0
    assert meter.profiler is fake
    with device_busy("cpu", with_cpu=True, profile_factory=fake):
        pass
    assert sorted(a.name for a in fake.kwargs["activities"]) == ["CPU", "CUDA"]


def test_device_busy_refuses_a_device_without_kernel_records():
    with pytest.raises(ValueError, match="CUDA kernel records"):
        with device_busy("cpu"):
            pass

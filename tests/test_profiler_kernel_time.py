"""The GPU time of the kernels launched inside a ``record_function`` range, read from ``key_averages()``.

Day 22's zero_grad cell (day22-code-031) reads it on a CUDA run as the range's host row ``device_total_us`` less its
``self_device_us``: torch's ``FunctionEvent.device_time_total`` sums a CPU event's own kernels and its children's
(``torch/autograd/profiler_util.py``), and a range launches no kernel itself, so what it owns can only be its GPU
mirror. No GPU is needed: the tests build the event tree that ``_parse_kineto_results`` builds on a GPU run
(kernels attached to the op that launched them with ``append_kernel``).
"""
from __future__ import annotations

from torch.autograd.profiler_util import EventList, FunctionEvent

from utils.profiling import profile_records, rows_by_name

_KW = dict(use_device="cuda", stack=[], input_shapes=[])


def _zero_grad_calls(calls: int, kernel_us: float, mirror_us: float | None) -> EventList:
    # `calls` zero_grad ranges of 100 us on the host, each with aten::zero_ -> aten::fill_, whose kernel ran
    # kernel_us on the GPU; mirror_us (if given) is attached to the range itself, as a linked GPU mirror would be.
    events = []
    for i in range(calls):
        base = 1000 * i
        rng = FunctionEvent(3 * i + 1, "zero_grad", 1, base, base + 100, is_user_annotation=True, **_KW)
        zero = FunctionEvent(3 * i + 2, "aten::zero_", 1, base + 10, base + 40, **_KW)
        fill = FunctionEvent(3 * i + 3, "aten::fill_", 1, base + 12, base + 38, **_KW)
        fill.append_kernel("vectorized_elementwise_kernel<FillFunctor>", 0, kernel_us)
        if mirror_us is not None:
            rng.append_kernel("zero_grad", 0, mirror_us)
        for parent, child in ((rng, zero), (zero, fill)):
            parent.append_cpu_child(child)
            child.set_cpu_parent(parent)
        events += [rng, zero, fill]
    out = EventList(events, use_device="cuda")
    out._tree_built = True
    return out


def _kernel_us(events: EventList) -> float:
    row = rows_by_name(profile_records(events.key_averages()), "CPU")["zero_grad"]
    return row["device_total_us"] - row["self_device_us"]


def test_kernels_inside_the_range_not_its_host_time():
    events = _zero_grad_calls(calls=3, kernel_us=7.0, mirror_us=None)
    row = rows_by_name(profile_records(events.key_averages()), "CPU")["zero_grad"]
    assert _kernel_us(events) == 21.0
    assert row["cpu_total_us"] == 300.0       # the host time (launches on a GPU) is a different number


def test_a_mirror_attached_to_the_range_is_left_out():
    events = _zero_grad_calls(calls=2, kernel_us=7.0, mirror_us=50.0)
    row = rows_by_name(profile_records(events.key_averages()), "CPU")["zero_grad"]
    assert row["device_total_us"] == 114.0    # the plain device total would count the mirror's span too
    assert _kernel_us(events) == 14.0

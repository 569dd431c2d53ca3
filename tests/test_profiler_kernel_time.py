"""The GPU time of the kernels launched inside a ``record_function`` range, read from ``key_averages()``.

Day 22's zero_grad cell (day22-code-031) reads it on a CUDA run as the range's host row ``device_total_us`` less its
``self_device_us``: torch's ``FunctionEvent.device_time_total`` sums a CPU event's own kernels and its children's
(``torch/autograd/profiler_util.py``), and a range launches no kernel itself, so what it owns can only be its GPU
mirror. No GPU is needed: the tests build the event tree that ``_parse_kineto_results`` builds on a GPU run
(kernels attached to the op that launched them with ``append_kernel``).

Day 22's per-range GPU times (day22-code-011) read the kernels launched while each host range was open, on any
thread, because a range's GPU mirror misses backward's kernels and those inside a nested range (tests at the end).
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


# ------------------------------------------------------------------------------------------------------------------
# Day 22's per-range GPU times (day22-code-011). On a CUDA run a range's GPU mirror (a CUDA event with the range's
# name) holds only the kernels launched on the range's own thread and outside every nested range: kineto tags each
# kernel with the innermost user range of the launching thread. backward's kernels come from the autograd engine's
# thread, optimizer.step() opens `Optimizer.step#SGD.step`. The notebook reads the kernels themselves instead; the
# test takes its function from the notebook and feeds it the events such a run produces.

def _notebook_function(name: str, cell_id: str = "day22-code-011"):
    import ast
    import json
    from pathlib import Path

    from torch.autograd import DeviceType

    nb = Path(__file__).resolve().parents[1] / "solutions" / "day22" / "day22_pytorch_profiler.ipynb"
    cell = next(c for c in json.loads(nb.read_text())["cells"] if c["id"] == cell_id)
    tree = ast.parse("".join(cell["source"]))
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    namespace = {"DeviceType": DeviceType}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(nb), "exec"), namespace)
    return namespace[name]


def _one_cuda_step() -> EventList:
    from torch.autograd import DeviceType

    main, autograd_thread = 1, 2
    ids = iter(range(1, 100))

    def host(name, start, end, thread=main, kernel_us=None, annotation=False):
        e = FunctionEvent(next(ids), name, thread, start, end, is_user_annotation=annotation, **_KW)
        if kernel_us is not None:
            e.append_kernel(f"kernel of {name}", 0, kernel_us)
        return e

    def mirror(name, start, end):       # a range's GPU mirror: its own CUDA event, linked to nothing
        return FunctionEvent(next(ids), name, main, start, end, device_type=DeviceType.CUDA,
                             is_user_annotation=True, **_KW)

    events = [
        host("forward", 0, 100, annotation=True), host("aten::addmm", 10, 40, kernel_us=30.0),
        mirror("forward", 50, 80),
        host("backward", 100, 300, annotation=True), host("aten::ones_like", 105, 110, kernel_us=1.0),
        mirror("backward", 120, 121),    # only the grad seed: the main thread's one kernel inside the range
        host("autograd::engine::evaluate_function: AddmmBackward0", 120, 280, thread=autograd_thread),
        host("aten::mm", 130, 200, thread=autograd_thread, kernel_us=50.0),
        host("aten::mm", 200, 270, thread=autograd_thread, kernel_us=40.0),
        host("optimizer", 300, 400, annotation=True),
        host("Optimizer.step#SGD.step", 305, 395, annotation=True),
        host("aten::_foreach_add_", 310, 390, kernel_us=20.0),
        mirror("Optimizer.step#SGD.step", 400, 420),   # the kernels belong to the inner range: no `optimizer` mirror
    ]
    out = EventList(sorted(events, key=lambda e: (e.time_range.start, -e.time_range.end)), use_device="cuda")
    out._build_tree()
    return out


def test_range_mirrors_miss_backward_and_nested_kernels():
    # What the mirror rows and the host rows say for this step: the reason the notebook does not read them.
    records = profile_records(_one_cuda_step().key_averages())
    mirrors, hosts = rows_by_name(records, "CUDA"), rows_by_name(records, "CPU")
    assert mirrors["forward"]["device_total_us"] == 30.0
    assert mirrors["backward"]["device_total_us"] == 1.0       # 91 us of backward kernels ran
    assert "optimizer" not in mirrors
    assert hosts["backward"]["device_total_us"] == 1.0         # the host row's tree is per thread too
    assert hosts["optimizer"]["device_total_us"] == 20.0


def test_kernel_time_by_range_counts_every_thread_and_nested_range():
    kernel_us_by_range = _notebook_function("kernel_us_by_range")
    got = kernel_us_by_range(_one_cuda_step(), ["forward", "backward", "optimizer"])
    assert got == {"forward": 30.0, "backward": 91.0, "optimizer": 20.0}


def test_kernel_time_by_range_on_a_cpu_profile_is_zero():
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from utils.stderr_capture import capture_stderr

    kernel_us_by_range = _notebook_function("kernel_us_by_range")
    layer = torch.nn.Linear(4, 4)
    with capture_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("backward"):
            layer(torch.randn(2, 4)).sum().backward()
    assert kernel_us_by_range(prof.events(), ["backward", "optimizer"]) == {"backward": 0.0, "optimizer": 0.0}

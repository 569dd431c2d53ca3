"""Tests for utils.fast_path (no GPU needed: the CUDA branches are exercised through plan_fast_path)."""
import pytest
import torch

from utils.fast_path import apply_fast_path, fast_path_flags, plan_fast_path, restore_fast_path_flags
from utils.tf32 import tf32_in_use


def values(plan):
    return {k: d.value for k, d in plan.items()}


def test_cpu_plan_turns_on_no_gpu_knob():
    v = values(plan_fast_path("cpu"))
    assert v["cudnn_benchmark"] is False and v["tf32"] is False and v["pin_memory"] is False
    assert v["channels_last"] is False and v["optimizer_impl"] == "fused" and v["set_to_none"] is True
    assert values(plan_fast_path("mps"))["optimizer_impl"] == "foreach"


def test_ampere_fixed_shapes_gets_everything():
    v = values(plan_fast_path("cuda", (8, 0)))
    assert v == {"cudnn_benchmark": True, "tf32": True, "channels_last": True, "optimizer_impl": "fused",
                 "pin_memory": True, "set_to_none": True}


def test_volta_has_tensor_cores_but_no_tf32():
    v = values(plan_fast_path("cuda", (7, 0)))
    assert v["tf32"] is False and v["channels_last"] is True and v["cudnn_benchmark"] is True


def test_pascal_and_unknown_capability():
    assert values(plan_fast_path("cuda", (6, 1)))["channels_last"] is False
    v = values(plan_fast_path("cuda", None))
    assert v["tf32"] is False and v["channels_last"] is False and v["optimizer_impl"] == "fused"


def test_unknown_capability_is_called_unknown():
    plan = plan_fast_path("cuda", None)
    assert "unknown" in plan["tf32"].why and "unknown" in plan["channels_last"].why and "None" not in plan["tf32"].why


def test_the_fresh_process_keeps_deterministic_warn_only():
    # A warn-only parent (Day 06) must not get a child that raises where the parent only warns.
    import pickle
    from utils.fast_path import _backend_flags, _call_with_flags
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
        flags = _backend_flags()
        torch.use_deterministic_algorithms(False)
        job = pickle.dumps((torch.is_deterministic_algorithms_warn_only_enabled, (), {}))
        status, value, _ = _call_with_flags(0, 1, job, flags)
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    assert status == "ok" and value is True


def test_variable_shapes_and_non_conv_models_skip_benchmark():
    assert values(plan_fast_path("cuda", (9, 0), variable_input_shapes=True))["cudnn_benchmark"] is False
    v = values(plan_fast_path("cuda", (9, 0), conv_model=False))
    assert v["cudnn_benchmark"] is False and v["channels_last"] is False and v["tf32"] is True


def test_every_decision_has_a_reason_and_bad_device_raises():
    for d in plan_fast_path("mps").values():
        assert isinstance(d.why, str) and len(d.why) > 10
    with pytest.raises(ValueError):
        plan_fast_path("tpu")


def test_apply_on_cpu_changes_no_global_flag():
    before = fast_path_flags()
    report = apply_fast_path("cpu")
    assert fast_path_flags() == before
    assert not any(r["applied"] for r in report.values())
    assert report["tf32"]["value"] is False


def test_snapshot_restore_round_trip():
    before = fast_path_flags()
    try:
        torch.backends.cudnn.benchmark = not before["cudnn.benchmark"]
        torch.set_float32_matmul_precision("high")
        assert fast_path_flags() != before
    finally:
        restore_fast_path_flags(before)
    assert fast_path_flags() == before


@pytest.mark.parametrize("capability, tf32", [((8, 0), True), ((9, 0), True), ((7, 5), False)])
def test_apply_on_a_simulated_cuda_device_sets_benchmark_and_tf32(monkeypatch, capability, tf32):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    before = fast_path_flags()
    try:
        report = apply_fast_path("cuda:0")
        assert report["cudnn_benchmark"]["applied"] and torch.backends.cudnn.benchmark is True
        assert report["tf32"] == {"value": tf32, "applied": True, "why": report["tf32"]["why"]}
        assert tf32_in_use() == {"matmul": tf32, "conv": tf32}
        # Both APIs agree afterwards: the legacy getters (read by torch.compile) do not raise.
        assert torch.backends.cuda.matmul.allow_tf32 is tf32 and torch.backends.cudnn.allow_tf32 is tf32
        assert (torch.get_float32_matmul_precision() == "high") is tf32
        off = apply_fast_path("cuda:0", tf32=False)
        assert off["tf32"]["value"] is False and tf32_in_use() == {"matmul": False, "conv": False}
    finally:
        restore_fast_path_flags(before)
    assert fast_path_flags() == before


def test_multi_tensor_apply_launches_replays_the_chunking():
    from utils.fast_path import multi_tensor_apply_launches as launches
    # Small tensors: the tensor limit decides (110 per launch for one list with CUDA 12, 64 for two, 770 with 13).
    assert launches([10] * 110, depth=1, cuda_major=12) == 1
    assert launches([10] * 111, depth=1, cuda_major=12) == 2
    assert launches([10] * 200, depth=2, cuda_major=12) == 4
    assert launches([10] * 200, depth=1, cuda_major=13) == 1
    # One big tensor: the block limit decides (320 chunks of 65,536 elements per launch with CUDA 12).
    assert launches([320 * 65_536], depth=1, cuda_major=12) == 1
    assert launches([320 * 65_536 + 1], depth=1, cuda_major=12) == 2
    # Empty tensors are skipped; no tensors, no launch.
    assert launches([0, 0], depth=1, cuda_major=12) == 0 and launches([], depth=3, cuda_major=12) == 0
    with pytest.raises(ValueError):
        launches([1], depth=6)


def test_multi_tensor_apply_launches_for_resnet50_is_a_few_not_one_per_tensor():
    # 161 tensors, 25.6 M elements: with CUDA 12 limits the tensor and block limits split each op into a few
    # launches; CUDA 13's larger kernel arguments hold the whole list in one.
    import torchvision
    from utils.fast_path import multi_tensor_apply_launches as launches
    with torch.device("meta"):
        numels = [p.numel() for p in torchvision.models.resnet50().parameters()]
    assert len(numels) == 161
    assert [launches(numels, depth=d, cuda_major=12) for d in (1, 2, 3)] == [3, 3, 4]
    assert [launches(numels, depth=d, cuda_major=13) for d in (1, 2, 3)] == [1, 1, 1]


# cudnn.benchmark only acts on shapes the process has not planned yet (cuDNN's plan cache, keyed without the flag,
# lives as long as the process): a measurement with the flag on must be planned in a fresh process on CUDA.

def test_only_a_cuda_run_with_the_flag_on_needs_a_fresh_process():
    from utils.fast_path import needs_fresh_process
    assert needs_fresh_process("cuda", True) and needs_fresh_process(torch.device("cuda:1"), True)
    assert not needs_fresh_process("cuda", False)
    assert not needs_fresh_process("cpu", True) and not needs_fresh_process("mps", True)
    before = fast_path_flags()
    try:
        for flag in (True, False):                     # None: the flag as it is now
            torch.backends.cudnn.benchmark = flag
            assert needs_fresh_process("cuda", None) is flag
    finally:
        restore_fast_path_flags(before)


def test_off_cuda_the_call_is_a_plain_call_in_this_process():
    import os
    from utils.fast_path import run_with_fresh_plans
    here = run_with_fresh_plans(os.getpid, device="cpu", benchmark=True)
    assert here.value == os.getpid() and not here.fresh_process and here.note == ""
    assert run_with_fresh_plans(lambda a, b=0: a + b, (2,), {"b": 3}, device="cuda", benchmark=False).value == 5


@pytest.mark.slow
def test_a_simulated_cuda_run_with_the_flag_on_is_planned_in_a_fresh_process_with_this_process_flags(monkeypatch):
    # The CPU is treated as a device that caches plans (the fresh process would open a real CUDA device, which this
    # machine may not have). The old way (time both settings in this process) returns this process's id and fails
    # the first assert.
    import os
    import utils.fast_path as FP
    from utils.fast_path import run_with_fresh_plans

    monkeypatch.setattr(FP, "needs_fresh_process", lambda device, benchmark: bool(benchmark))

    def where_and_flags(extra):
        # Reads torch.backends.cudnn, as a notebook's timing function sets it: that module object is a ModuleType
        # subclass (CudnnModule), which plain cloudpickle cannot send.
        import os as os_
        from utils.fast_path import fast_path_flags as flags_now
        assert torch.backends.cudnn.benchmark is True
        return os_.getpid(), flags_now(), torch.get_num_threads(), extra

    before = fast_path_flags()
    try:
        torch.backends.cudnn.benchmark = True
        torch.set_float32_matmul_precision("high")
        parent_flags = fast_path_flags()
        run = run_with_fresh_plans(where_and_flags, ({"x": 1},), device="cpu", benchmark=True)
        pid, flags, threads, extra = run.value
    finally:
        restore_fast_path_flags(before)
    assert pid != os.getpid() and run.fresh_process, "the flag-on run must plan its convolutions in a process of its own"
    assert flags == parent_flags and threads == torch.get_num_threads() and extra == {"x": 1}


@pytest.mark.slow
def test_an_error_in_the_fresh_process_raises_here_with_its_traceback():
    from utils.fast_path import call_in_fresh_process

    def fails():
        raise torch.OutOfMemoryError("no room for the trial workspaces")

    def dies():
        import os as os_
        os_._exit(3)

    with pytest.raises(torch.OutOfMemoryError, match="no room") as err:   # the same type: callers catch OOM as usual
        call_in_fresh_process(fails, timeout_s=120)
    assert any("in its fresh process" in note and "fails" in note for note in err.value.__notes__)
    with pytest.raises(RuntimeError, match="(?s)dies failed in its fresh process.*exited with code 3"):
        call_in_fresh_process(dies, timeout_s=120)


# A GPU in exclusive-process compute mode admits one CUDA context, and this process holds it: a fresh process fails
# at its first CUDA call ("CUDA-capable device(s) is/are busy or unavailable"). The flag-on arm then runs here,
# labelled, instead of stopping the notebook with a RuntimeError.

class _FakeNVML:
    """The part of pynvml that reads a GPU's compute mode."""
    NVML_COMPUTEMODE_DEFAULT, NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 0, 1
    NVML_COMPUTEMODE_PROHIBITED, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 2, 3

    def __init__(self, mode):
        self.mode = mode

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetComputeMode(self, handle):
        assert handle == "handle of cuda:0"
        return self.mode


def _pretend_this_process_holds_a_cuda_context(monkeypatch, mode):
    import sys
    import utils.monitoring
    monkeypatch.setitem(sys.modules, "pynvml", _FakeNVML(mode))
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(utils.monitoring, "nvml_handle_for_cuda_device",
                        lambda nvml, index: (f"handle of cuda:{index}", "UUID GPU-fake"))


def test_nvml_tells_when_a_gpu_admits_no_second_process(monkeypatch):
    from utils.fast_path import _second_context_refused
    _pretend_this_process_holds_a_cuda_context(monkeypatch, mode=3)
    assert "exclusive-process compute mode" in _second_context_refused(torch.device("cuda"))
    _pretend_this_process_holds_a_cuda_context(monkeypatch, mode=0)
    assert _second_context_refused(torch.device("cuda")) is None
    _pretend_this_process_holds_a_cuda_context(monkeypatch, mode=3)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)       # no context here yet: the GPU is free
    assert _second_context_refused(torch.device("cuda")) is None


def test_on_an_exclusive_process_gpu_the_flag_on_arm_runs_here_and_says_plans_were_reused(monkeypatch):
    # The old helper started a fresh process anyway (here: synchronize() on a CPU build raises; on such a GPU the
    # child's RuntimeError stopped the cell).
    import os
    import utils.processes
    from utils.fast_path import (PLANS_REUSED, FreshProcessUnavailable, call_in_fresh_process,
                                 run_with_fresh_plans)

    _pretend_this_process_holds_a_cuda_context(monkeypatch, mode=3)

    def no_process(*args, **kwargs):
        raise AssertionError("no process may start: the GPU would refuse it")

    monkeypatch.setattr(utils.processes, "run_processes", no_process)
    arm = run_with_fresh_plans(os.getpid, device="cuda", benchmark=True)
    assert arm.value == os.getpid() and not arm.fresh_process
    assert arm.note.startswith(PLANS_REUSED) and "exclusive-process" in arm.note
    with pytest.raises(FreshProcessUnavailable):
        call_in_fresh_process(os.getpid, device="cuda")
    flag_off = run_with_fresh_plans(os.getpid, device="cuda", benchmark=False)    # nothing to label
    assert flag_off.value == os.getpid() and flag_off.note == "" and not flag_off.fresh_process


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where a fresh process cannot open CUDA")
def test_when_the_fresh_process_cannot_open_the_gpu_the_arm_runs_here_before_fn_ran_there(tmp_path):
    # NVML cannot tell here (no driver), so the fresh process starts and fails to open "cuda" before fn runs, as a
    # second process does on an exclusive-process GPU. The old helper raised RuntimeError from fn's first CUDA call.
    import os
    from utils.fast_path import PLANS_REUSED, FreshProcessUnavailable, call_in_fresh_process, run_with_fresh_plans

    def leaves_a_trace(folder):
        import os as os_
        open(os_.path.join(folder, f"{os_.getpid()}.ran"), "w").close()
        return os_.getpid()

    with pytest.raises(FreshProcessUnavailable, match="could not open cuda"):
        call_in_fresh_process(leaves_a_trace, (str(tmp_path),), device="cuda", timeout_s=120)
    assert list(tmp_path.iterdir()) == [], "fn must not run in a process that could not open the device"
    arm = run_with_fresh_plans(leaves_a_trace, (str(tmp_path),), device="cuda", benchmark=True, timeout_s=120)
    assert arm.value == os.getpid() and not arm.fresh_process and arm.note.startswith(PLANS_REUSED)
    assert [p.name for p in tmp_path.iterdir()] == [f"{os.getpid()}.ran"]


@pytest.mark.slow
def test_the_fresh_process_may_start_dataloader_workers():
    # A daemonic process may not have children: the old fresh process raised "daemonic processes are not allowed to
    # have children" at the loader's first batch (full_scale_section with input_path="dataloader" on CUDA).
    from utils.fast_path import call_in_fresh_process

    def batch_sums():
        from torch.utils.data import DataLoader
        return [int(b.sum()) for b in DataLoader(list(range(8)), batch_size=4, num_workers=1)]

    assert call_in_fresh_process(batch_sums, timeout_s=120) == [6, 22]


def test_multi_tensor_apply_table_follows_the_compiled_header(monkeypatch, tmp_path):
    # PyTorch 2.11's cu130 wheel has no CUDA 13 branch in MultiTensorApply.cuh; 2.14's has (both read on 2026-12-04).
    from utils.fast_path import multi_tensor_apply_table
    with_branch = tmp_path / "new.cuh"
    with_branch.write_text("#if defined(CUDART_VERSION) && CUDART_VERSION >= 13000\nstatic constexpr int x[5] = {770};")
    without = tmp_path / "old.cuh"
    without.write_text("static constexpr int depth_to_max_tensors[5] = {110, 64, 48, 36, 30};")
    for cuda in (None, "12.6"):
        monkeypatch.setattr(torch.version, "cuda", cuda)
        assert multi_tensor_apply_table(with_branch) == 12, "a CUDA 12 (or CPU) build has the CUDA 12 limits"
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    assert multi_tensor_apply_table(with_branch) == 13
    assert multi_tensor_apply_table(without) == 12, "a CUDA 13 build of an older torch keeps the CUDA 12 limits"
    monkeypatch.setattr(torch, "__version__", "2.11.0+cu130")
    assert multi_tensor_apply_table(tmp_path / "missing.cuh") == 12
    monkeypatch.setattr(torch, "__version__", "2.14.1+cu130")
    assert multi_tensor_apply_table(tmp_path / "missing.cuh") == 13

"""utils.distributed, utils.launch, utils.processes and utils.dist_tools.

Real process groups run on the CPU with gloo, each bounded by a timeout. The GPU paths (cuda:LOCAL_RANK, NCCL,
spawn after CUDA was initialised, SLURM without torchrun) are simulated with monkeypatch.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import torch
import torch.distributed as dist
from torch import nn

import utils.distributed as ud
from utils.device import DeviceUnavailableError
from utils.dist_tools import CommCounter, shard_range, time_to_error, torchfrtrace
from utils.distributed import (backend_for, cleanup, get_local_rank, get_rank, get_world_size, init_from_env,
                               is_main_process, rendezvous_env, worker_device)
from utils.launch import run_script_ranks, run_torchrun, torchrun_command
from utils.processes import DistributedRunError, run_processes, run_script, start_method_for

JOB_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID",
            "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NNODES")
SCALE = 10.0  # a module global that a spawned worker must receive by value


@pytest.fixture
def job_env(monkeypatch):
    """A private ``os.environ`` without any launcher's variables; returns a setter for some of them."""
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items() if k not in JOB_VARS})

    def set_vars(**values) -> None:
        os.environ.update({k: str(v) for k, v in values.items()})
    return set_vars


@pytest.fixture
def fake_gpus(monkeypatch):
    """Four visible CUDA GPUs as far as torch's Python API is concerned; records ``set_device`` calls."""
    current: list[torch.device] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "set_device", lambda dev: current.append(torch.device(dev)))
    return current


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))


def _batch(n: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 8, generator=g), torch.randint(0, 3, (n,), generator=g)


def _train(model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int = 3) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def _ddp_worker(rank: int, world_size: int) -> dict[str, torch.Tensor]:
    from torch.nn.parallel import DistributedDataParallel as DDP

    x, y = _batch()
    per = len(x) // world_size
    model = DDP(_model(), gradient_as_bucket_view=True)
    _train(model, x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per])
    return {k: v.detach().clone() for k, v in model.module.state_dict().items()}


# --------------------------------------------------------------------------------------------------- identity
def test_identity_comes_from_the_launcher_variables(job_env):
    assert (get_rank(), get_world_size(), get_local_rank(), is_main_process()) == (0, 1, 0, True)
    job_env(RANK=3, WORLD_SIZE=4, LOCAL_RANK=1)
    assert (get_rank(), get_world_size(), get_local_rank(), is_main_process()) == (3, 4, 1, False)
    assert backend_for("cpu") == "gloo" and backend_for(torch.device("cuda", 1)) == "nccl"


def test_srun_tasks_without_torchrun_form_one_job(job_env):
    job_env(SLURM_PROCID=5, SLURM_NTASKS=8, SLURM_LOCALID=1, SLURM_NNODES=2, MASTER_ADDR="node0", MASTER_PORT=29555)
    rdzv = rendezvous_env()
    assert (rdzv.rank, rdzv.world_size, rdzv.local_rank, rdzv.source) == (5, 8, 1, "slurm")
    assert (get_rank(), get_world_size(), get_local_rank()) == (5, 8, 1)
    job_env(RANK=2, WORLD_SIZE=16, LOCAL_RANK=2)                  # srun torchrun ...: torchrun's variables win
    assert (get_rank(), get_world_size(), rendezvous_env().source) == (2, 16, "torchrun/env")


def test_srun_tasks_without_a_rendezvous_address_say_what_to_export(job_env):
    job_env(SLURM_PROCID=1, SLURM_NTASKS=2, SLURM_LOCALID=1, SLURM_NNODES=1)
    with pytest.raises(RuntimeError, match="export MASTER_PORT"):
        rendezvous_env()
    job_env(MASTER_PORT=29555)
    assert rendezvous_env().master_addr == "127.0.0.1"            # one node: the loopback address works
    job_env(SLURM_NNODES=2)
    with pytest.raises(RuntimeError, match="export MASTER_ADDR"):
        init_from_env("cpu")                                      # refuses before starting a group
    assert not dist.is_initialized()


def test_worker_device_is_cuda_local_rank_on_gpus(job_env, fake_gpus, monkeypatch):
    job_env(RANK=3, WORLD_SIZE=4, LOCAL_RANK=2)
    assert worker_device("auto") == torch.device("cuda", 2) and fake_gpus[-1] == torch.device("cuda", 2)
    assert worker_device("cuda") == torch.device("cuda", 2)
    assert worker_device("cpu") == torch.device("cpu") and len(fake_gpus) == 2
    # inside a running group the backend decides: the same worker code under gloo and under NCCL
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_backend", lambda group=None: "gloo")
    assert worker_device() == torch.device("cpu")
    monkeypatch.setattr(dist, "get_backend", lambda group=None: "nccl")
    assert worker_device() == torch.device("cuda", 2)
    job_env(LOCAL_RANK=4)                                         # 5 processes on a 4-GPU node
    with pytest.raises(DeviceUnavailableError, match="only 4 GPU"):
        worker_device("auto")


def test_init_from_env_under_srun_joins_one_nccl_job_on_the_local_gpu(job_env, fake_gpus, monkeypatch):
    calls = []
    monkeypatch.setattr(dist, "init_process_group", lambda **kw: calls.append(kw))
    job_env(SLURM_PROCID=3, SLURM_NTASKS=4, SLURM_LOCALID=1, SLURM_NNODES=2, MASTER_ADDR="node0", MASTER_PORT=29555)
    device = init_from_env("auto", timeout_s=7)
    assert device == torch.device("cuda", 1) and fake_gpus == [torch.device("cuda", 1)]
    (kw,) = calls
    assert kw["backend"] == "nccl" and kw["device_id"] == torch.device("cuda", 1)
    assert kw["timeout"].total_seconds() == 7 and "store" not in kw             # env:// rendezvous
    assert [os.environ[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")] == \
        ["3", "4", "1", "node0", "29555"]


def test_demo_world_picks_nccl_gpus_only_with_two_or_more(monkeypatch):
    assert ud.demo_world(2, gpu_count=0) == (2, "cpu")
    assert ud.demo_world(2, gpu_count=1) == (2, "cpu"), "one GPU: gloo CPU processes, not NCCL on one card"
    assert ud.demo_world(2, gpu_count=8) == (2, "auto") and ud.demo_world(4, gpu_count=2) == (2, "auto")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    world, device = ud.demo_world(3)
    assert (world, device) == (3, "auto") and backend_for(torch.device("cuda", 0)) == "nccl"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert ud.demo_world(3) == (3, "cpu")


class _DDPBefore213:                 # torch 2.11's signature: the switch is broadcast_buffers
    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True, init_sync=True,
                 process_group=None, bucket_cap_mb=None, gradient_as_bucket_view=False):
        self.broadcast_buffers = broadcast_buffers


class _DDPFrom213:                   # torch 2.14's: broadcast_buffers deprecated, forward_sync_buffers added
    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=None, init_sync=True,
                 process_group=None, bucket_cap_mb=None, gradient_as_bucket_view=False, batched_grad_copy=False,
                 forward_sync_buffers: bool | None = None):
        self.forward_sync_buffers = True if forward_sync_buffers is None else forward_sync_buffers


def test_ddp_buffer_sync_uses_the_name_the_installed_ddp_takes():
    assert ud.ddp_buffer_sync_argument(_DDPBefore213) == "broadcast_buffers"
    assert ud.ddp_buffer_sync_argument(_DDPFrom213) == "forward_sync_buffers"
    assert ud.ddp_buffer_sync(True, _DDPBefore213) == {"broadcast_buffers": True}
    assert ud.ddp_buffer_sync(False, _DDPFrom213) == {"forward_sync_buffers": False}
    for cls in (_DDPBefore213, _DDPFrom213):         # the keyword is accepted, and read back under the same name
        for enabled in (True, False):
            ddp = cls(nn.Linear(2, 2), **ud.ddp_buffer_sync(enabled, cls))
            assert getattr(ddp, ud.ddp_buffer_sync_argument(cls)) is enabled


def test_ddp_buffer_sync_builds_the_installed_ddp_without_a_warning(job_env):
    import warnings

    from torch.nn.parallel import DistributedDataParallel as DDP
    name = ud.ddp_buffer_sync_argument()
    assert name in ("broadcast_buffers", "forward_sync_buffers")
    init_from_env("cpu", timeout_s=10)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")                 # a deprecated name would raise here
            for enabled in (True, False):
                ddp = DDP(nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)), **ud.ddp_buffer_sync(enabled))
                assert getattr(ddp, name) is enabled
    finally:
        cleanup()


def test_init_from_env_without_a_launcher_starts_a_one_process_group(job_env):
    device = init_from_env("cpu", timeout_s=10)
    try:
        assert device == torch.device("cpu")
        assert dist.is_initialized() and dist.get_backend() == "gloo"
        assert get_world_size() == 1 and get_rank() == 0
        t = torch.tensor([2.0])
        dist.all_reduce(t)
        assert t.item() == 2.0
    finally:
        cleanup()
        cleanup()  # safe twice
    assert not dist.is_initialized()


CYCLE_SCRIPT = r"""
import gc, json, weakref
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from utils.distributed import cleanup, init_from_env

init_from_env("cpu", timeout_s=10)
gc.disable()                          # so that only cleanup() can free the cycle
model = DDP(nn.Linear(3, 2))
model(torch.randn(4, 3)).sum().backward()
ref = weakref.ref(model)
del model
alive_after_del = ref() is not None
cleanup()
print(json.dumps({"alive_after_del": alive_after_del, "alive_after_cleanup": ref() is not None}))
"""


@pytest.mark.slow
def test_cleanup_frees_a_ddp_module_left_in_a_reference_cycle():
    # In a fresh interpreter, as in a worker script: the first DDP module's constructor imports torch._dynamo
    # lazily, and that import leaves the module in a reference cycle (not when torch._dynamo was imported before,
    # which is why this runs in its own process). With automatic collection off (as in CYCLE_SCRIPT), `del` leaves
    # it alive; with it on, a collection during the import usually frees it. One collected only at interpreter
    # shutdown aborted 8 of 20 gloo runs. cleanup() must collect it first.
    env = {k: v for k, v in os.environ.items() if k not in JOB_VARS}
    done = subprocess.run([sys.executable, "-c", CYCLE_SCRIPT], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    state = json.loads(done.stdout.strip().splitlines()[-1])
    assert state["alive_after_del"], "no reference cycle after del: the case this test covers is gone, review it"
    assert not state["alive_after_cleanup"], "cleanup() left the DDP module for the interpreter's shutdown"


# An FSDP2 run as Day 20's script makes it: the training in a function, cleanup() after it returns. It prints the
# names of this process's OS threads after cleanup(), and whether the DTensor caches were empty before it.
FSDP_EXIT_SCRIPT = r"""
import json, os
import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from utils.distributed import cleanup, get_world_size, init_from_env

def main():
    init_from_env("cpu", timeout_s=30)
    mesh = init_device_mesh("cpu", (get_world_size(),))
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()

def threads():
    return sorted(open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task"))

main()
before = threads()
cleanup()
print(json.dumps({"before": before, "after": threads()}))
"""
GROUP_THREADS = ("pt_gloo_runloop", "gloo_tcp_loop", "pt_tcpstore_uv")    # gloo's workers and rank 0's store


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads thread names from /proc (Linux)")
def test_cleanup_frees_an_fsdp2_process_group_and_its_threads(tmp_path):
    # Each FSDP2 parameter is a DTensor, which holds its DeviceMesh, which holds its process groups; DTensor's
    # sharding caches keep the mesh after the model is gone. destroy_process_group() alone then leaves the group and
    # its threads to the interpreter's shutdown, where CI once saw Day 20's script abort (SIGABRT, "terminate called
    # without an active exception") after its work was done. cleanup() must free them while Python is alive.
    script = tmp_path / "fsdp_exit.py"
    script.write_text(FSDP_EXIT_SCRIPT)
    res = run_script_ranks(script, 2, timeout_s=120, cwd=Path(__file__).resolve().parents[1])
    assert res.ok, res.rank_stderr
    for rank in (0, 1):
        state = json.loads(res.rank_stdout[rank].strip().splitlines()[-1])
        assert "pt_gloo_runloop" in state["before"], "no gloo worker threads before cleanup(): review this test"
        left = sorted(set(state["after"]) & set(GROUP_THREADS))
        assert not left, f"rank {rank}: cleanup() left the process group's threads alive: {left}"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads thread names from /proc (Linux)")
def test_cleanup_does_not_import_what_would_keep_the_group_alive(tmp_path):
    # The first import of torch.distributed._shard (torch._dynamo imports it, and so does DTensor's debug module)
    # pins a live process group until the process ends. cleanup() clears DTensor's caches; it must not be the one
    # that imports those modules.
    script = tmp_path / "dtensor_loaded.py"
    script.write_text("import json, os, sys\n"
                      "import torch.distributed.tensor\n"
                      "from utils.distributed import cleanup, init_from_env\n"
                      "init_from_env('cpu', timeout_s=30)\n"
                      "cleanup()\n"
                      "names = [open(f'/proc/self/task/{t}/comm').read().strip() for t in os.listdir('/proc/self/task')]\n"
                      "print(json.dumps({'dynamo': 'torch._dynamo' in sys.modules, 'threads': names}))\n")
    env = {k: v for k, v in os.environ.items() if k not in JOB_VARS}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-2000:]
    state = json.loads(done.stdout.strip().splitlines()[-1])
    assert not state["dynamo"], "cleanup() imported torch._dynamo"
    assert not set(state["threads"]) & set(GROUP_THREADS), f"the group outlived cleanup(): {state['threads']}"


def test_init_from_env_registers_the_collection_at_exit(job_env, monkeypatch):
    registered = []
    monkeypatch.setattr(ud, "_EXIT_HOOK_REGISTERED", False)
    monkeypatch.setattr(ud.atexit, "register", registered.append)
    init_from_env("cpu", timeout_s=10)
    try:
        assert [f.__qualname__ for f in registered].count("collect_before_exit") == 1, \
            "init_from_env must collect at exit, for scripts whose DDP module is still alive at cleanup()"
    finally:
        cleanup()


# --------------------------------------------------------------------------------------------------- processes
def test_start_method_follows_cuda_state(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert start_method_for("cpu") == "fork" and start_method_for("auto") == "fork"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert start_method_for("cpu") == "fork" and start_method_for("auto") == "spawn"
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert start_method_for("cpu") == "spawn"
    with pytest.raises(RuntimeError, match="Cannot re-initialize CUDA in forked subprocess"):
        run_processes(lambda r, w: r, 2, start_method="fork")


def test_spawn_refuses_an_unpicklable_worker_with_advice():
    lock = threading.Lock()

    def worker(rank: int, world_size: int) -> int:
        with lock:
            return rank

    with pytest.raises(TypeError, match="cannot pickle.*run_torchrun"):
        run_processes(worker, 2, start_method="spawn")


@pytest.mark.slow
def test_run_processes_all_reduce_and_identity():
    def fn(rank: int, world_size: int):
        t = torch.tensor([float(rank + 1)])
        dist.all_reduce(t)
        return rank, world_size, get_rank(), is_main_process(), t.item(), str(worker_device())

    out = run_processes(fn, 2, timeout_s=30)
    assert out == [(0, 2, 0, True, 3.0, "cpu"), (1, 2, 1, False, 3.0, "cpu")]


@pytest.mark.slow
def test_worker_stderr_is_kept_per_rank_and_never_reaches_the_caller(capfd):
    def fn(rank: int, world_size: int):
        os.write(2, f"C++ log of rank {rank}\n".encode())        # what gloo and other libraries do
        print(f"python warning of rank {rank}", file=sys.stderr, flush=True)   # warnings, tracebacks
        if rank == 1:
            raise ValueError("rank 1 gives up")
        return rank

    outcomes = run_processes(fn, 2, timeout_s=60, raise_on_error=False)
    assert capfd.readouterr().err == "", "a worker's stderr reached the caller's descriptor 2"
    for rank, o in enumerate(outcomes):
        assert f"C++ log of rank {rank}" in o.stderr and f"python warning of rank {rank}" in o.stderr
    assert outcomes[0].value == 0 and "rank 1 gives up" in outcomes[1].error.splitlines()[-1]
    with pytest.raises(DistributedRunError, match=r"its last standard-error lines:\nC\+\+ log of rank 1"):
        run_processes(fn, 2, timeout_s=60)
    loud = run_processes(fn, 2, timeout_s=60, raise_on_error=False, keep_stderr=False)
    assert loud[0].stderr == "" and "C++ log of rank 0" in capfd.readouterr().err


@pytest.mark.slow
def test_after_cuda_init_workers_are_spawned_and_get_notebook_functions_by_value(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)   # as after course_setup on a GPU
    offset = 5.0                                                       # a closure, like a notebook global

    def fn(rank: int, world_size: int, extra: float):
        t = torch.tensor([rank * SCALE + offset + extra])
        dist.all_reduce(t)
        # a forked child would inherit the monkeypatch and say True; a spawned one imported torch afresh
        return t.item(), torch.cuda.is_initialized()

    assert run_processes(fn, 2, (1.0,), timeout_s=120) == [(22.0, False), (22.0, False)]  # (0 + 6) + (10 + 6)


@pytest.mark.slow
def test_a_spawned_worker_may_use_torch_backends_cudnn(monkeypatch):
    # torch.backends.cudnn is a ModuleType subclass (CudnnModule) that plain cloudpickle cannot pickle; a notebook
    # worker that sets cudnn.benchmark must still reach spawned workers (it goes by name).
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    cudnn = torch.backends.cudnn

    def fn(rank: int, world_size: int):
        cudnn.benchmark = True
        return cudnn.benchmark

    assert run_processes(fn, 1, timeout_s=120) == [True]


@pytest.mark.slow
def test_ddp_two_processes_match_one_process_on_the_global_batch():
    ddp = run_processes(_ddp_worker, 2, timeout_s=60)
    single = _model()
    _train(single, *_batch())
    for rank_state in ddp:
        for name, ref in single.state_dict().items():
            assert torch.allclose(rank_state[name], ref, atol=1e-5, rtol=0), name
    assert all(torch.equal(ddp[0][k], ddp[1][k]) for k in ddp[0])


@pytest.mark.slow
def test_mismatched_collective_raises_in_the_worker_instead_of_hanging():
    def fn(rank: int, world_size: int):
        if rank == 0:  # rank 1 skips the collective: the classic hang
            dist.all_reduce(torch.ones(2))
        else:
            time.sleep(1.0)
        return rank

    with pytest.raises(DistributedRunError) as info:
        run_processes(fn, 2, timeout_s=30, collective_timeout_s=0.5)
    rank0, rank1 = info.value.outcomes
    assert "Timed out" in rank0.error and "did not report" not in rank0.error  # the group's timeout, not the kill
    assert rank1.ok


def _slow_start_then_skip(rank: int, world_size: int, start_up_s: float) -> dict:
    time.sleep(start_up_s)              # a slow start-up (imports, data): not part of the time to the error
    dist.barrier()                      # both ranks are here

    def body():
        if rank == 0:                   # the classic hang: only rank 0 enters the collective
            dist.all_reduce(torch.ones(2))
        time.sleep(0.2)
        return "finished"
    result = time_to_error(body)
    if rank == 1:
        time.sleep(3.0)                 # stay connected past rank 0's timeout: a peer that exits closes the socket, and
    return result                       # gloo then reports "Connection closed by peer" before the timeout


@pytest.mark.slow
def test_time_to_error_starts_at_the_collective_not_at_the_launch():
    """Day 19's method: a wall clock around the launch (the old method) adds the workers' start-up to the wait for the
    timeout and can never read below it; time_to_error reads the timeout itself."""
    timeout, start_up = 1.0, 2.0
    t0 = time.perf_counter()
    out = run_processes(_slow_start_then_skip, 2, (start_up,), timeout_s=60, collective_timeout_s=timeout)
    launch_wall = time.perf_counter() - t0
    rank0 = out[0]
    assert rank0["error"] and "Timed out" in rank0["error"], rank0
    assert timeout <= rank0["seconds"] < timeout + 1.0, rank0["seconds"]
    assert launch_wall >= timeout + start_up, "the old method's number includes the start-up"
    assert out[1]["error"] is None and out[1]["seconds"] < timeout


@pytest.mark.slow
def test_a_failed_rank_dumps_a_flight_recorder_torchfrtrace_reads(tmp_path, capfd):
    def fn(rank: int, world_size: int):
        def body():
            dist.all_reduce(torch.ones(4))
            if rank == 0:
                dist.all_reduce(torch.ones(4))
            dist.barrier()
        return time_to_error(body, dump_dir=tmp_path)

    run_processes(fn, 2, timeout_s=60, collective_timeout_s=1.0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank_0", "rank_1"]
    report = torchfrtrace(tmp_path)
    assert "Culprit rank 1" in report and "COLLECTIVE_TYPE_MISMATCH" in report, report
    assert capfd.readouterr().err == "", "the report comes back as text, nothing goes to stderr"


@pytest.mark.slow
def test_comm_counter_sees_fewer_all_reduces_with_no_sync():
    def fn(rank: int, world_size: int):
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(_model())
        counter = CommCounter()
        model.register_comm_hook(state=None, hook=counter.hook)
        x, y = _batch(8)
        for _ in range(2):  # two micro-batches without sync, then one with
            with model.no_sync():
                nn.functional.cross_entropy(model(x), y).backward()
        nn.functional.cross_entropy(model(x), y).backward()
        return counter.calls, counter.bytes

    (calls, nbytes), _ = run_processes(fn, 2, timeout_s=30)
    n_params = sum(p.numel() for p in _model().parameters())
    assert calls >= 1 and nbytes == 4 * n_params  # one synchronised backward: every gradient once, in fp32


def test_shard_range_covers_every_element_once():
    for numel, world in [(10, 3), (8, 4), (5, 8), (1, 2)]:
        covered = []
        for r in range(world):
            a, b = shard_range(numel, r, world)
            covered.extend(range(a, b))
        assert covered == list(range(numel))
    assert shard_range(10, 0, 3) == (0, 4) and shard_range(10, 2, 3) == (8, 10)
    with pytest.raises(ValueError):
        shard_range(10, 3, 3)


# --------------------------------------------------------------------------------------------------- launchers
REPORTER = """
import json, os, sys
rank = int(os.environ["RANK"])
for i in range(200):  # many small writes: on one shared pipe these would interleave with the other rank's
    print(f"rank {rank} line {i}", flush=True)
print(json.dumps({k: os.environ[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}))
if rank == int(sys.argv[1]):
    print("giving up", file=sys.stderr)
    sys.exit(3)
"""


@pytest.mark.slow
def test_script_ranks_get_torchrun_variables_and_their_own_output(tmp_path):
    script = tmp_path / "reporter.py"
    script.write_text(REPORTER)
    res = run_script_ranks(script, 2, ["-1"], timeout_s=60, env={"PYTHONUNBUFFERED": "1"})
    assert res.ok and sorted(res.rank_stdout) == [0, 1]
    envs = [json.loads(res.rank_stdout[r].splitlines()[-1]) for r in (0, 1)]
    assert [(e["RANK"], e["LOCAL_RANK"], e["WORLD_SIZE"]) for e in envs] == [("0", "0", "2"), ("1", "1", "2")]
    assert envs[0]["MASTER_PORT"] == envs[1]["MASTER_PORT"]
    for r in (0, 1):
        assert res.rank_stdout[r].splitlines()[:-1] == [f"rank {r} line {i}" for i in range(200)]
    failed = run_script_ranks(script, 2, ["1"], timeout_s=60)
    assert failed.returncode == 3 and not failed.ok
    with pytest.raises(RuntimeError, match="rank 1, last stderr lines:\ngiving up"):
        failed.check()


# A script as torchrun runs it: one all_reduce, then what it saw (arguments, torchrun's variables, FLAG, its folder, its
# parent) as JSON; with the argument "fail", rank 1 raises.
JOB_SCRIPT = ("import os, sys, json, torch\n"
              "import torch.distributed as dist\n"
              "from utils.distributed import init_from_env, cleanup\n"
              "init_from_env('cpu')\n"
              "t = torch.tensor([float(dist.get_rank() + 1)])\n"
              "dist.all_reduce(t)\n"
              "print(json.dumps({'argv': sys.argv[1:], 'rank': os.environ['RANK'], 'sum': t.item(), "
              "'local': os.environ['LOCAL_RANK'], 'world': os.environ['WORLD_SIZE'], "
              "'run_id': os.environ.get('TORCHELASTIC_RUN_ID'), 'flag': os.environ.get('FLAG'), 'cwd': os.getcwd(), "
              "'parent': os.getppid()}))\n"
              "if sys.argv[1] == 'fail' and dist.get_rank() == 1:\n"
              "    raise ValueError('rank 1 gives up')\n"
              "cleanup()\n")


@pytest.mark.slow
def test_run_script_runs_a_script_as_torchrun_would_in_forked_workers(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(JOB_SCRIPT)
    res = run_script(script, 2, ["ok", 3], env={"FLAG": "yes"}, cwd=tmp_path, timeout_s=60)
    assert res.ok, res.rank_stderr
    out = [json.loads(res.rank_stdout[r].strip().splitlines()[-1]) for r in (0, 1)]
    assert [(o["rank"], o["local"], o["world"]) for o in out] == [("0", "0", "2"), ("1", "1", "2")]
    assert all(o["argv"] == ["ok", "3"] and o["sum"] == 3.0 and o["flag"] == "yes" for o in out)
    assert all(os.path.samefile(o["cwd"], tmp_path) for o in out)
    failed = run_script(script, 2, ["fail"], timeout_s=60)
    assert failed.returncode == 1 and not failed.ok and "rank 1 gives up" in failed.rank_stderr[1]
    with pytest.raises(RuntimeError, match="rank 1"):
        failed.check()


@pytest.mark.slow
def test_run_torchrun_with_a_forked_agent_runs_the_script_as_torchrun_would(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(JOB_SCRIPT)
    res = run_torchrun(script, 2, ["ok", 3], env={"FLAG": "yes"}, cwd=tmp_path, timeout_s=90, fork=True)
    assert res.ok, (res.stderr[-2000:], res.rank_stderr)
    assert res.command[1:4] == ["-m", "torch.distributed.run", "--standalone"] and res.command[-2:] == ["ok", "3"]
    out = [json.loads(res.rank_stdout[r].strip().splitlines()[-1]) for r in (0, 1)]
    assert [(o["rank"], o["local"]) for o in out] == [("0", "0"), ("1", "1")]
    assert all(o["argv"] == ["ok", "3"] and o["sum"] == 3.0 and o["flag"] == "yes" and o["run_id"] for o in out)
    assert all(os.path.samefile(o["cwd"], tmp_path) for o in out)
    assert out[0]["parent"] == out[1]["parent"] == res.pid, "the workers are the forked agent's children"
    failed = run_torchrun(script, 2, ["fail"], timeout_s=90, fork=True)
    assert not failed.ok and "rank 1 gives up" in failed.rank_stderr[1]


def _pid_file_script(tmp_path, pids_dir):
    script = tmp_path / "hang.py"
    script.write_text("import os, sys, time\n"
                      f"open(os.path.join({str(pids_dir)!r}, os.environ['RANK']), 'w').write(str(os.getpid()))\n"
                      "print('rank', os.environ['RANK'], 'started', flush=True)\n"
                      "time.sleep(600)\n")
    return script


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow
def test_script_ranks_timeout_kills_every_rank(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    res = run_script_ranks(_pid_file_script(tmp_path, pids), 2, timeout_s=3)
    assert res.timed_out and not res.ok and res.returncode is None
    assert sorted(p.name for p in pids.iterdir()) == ["0", "1"]
    assert not any(_alive(int(p.read_text())) for p in pids.iterdir())
    assert res.rank_stdout[1].strip() == "rank 1 started"


@pytest.mark.slow
def test_torchrun_timeout_kills_torchrun_and_its_workers(tmp_path):
    cmd = torchrun_command("train.py", 2, ["--epochs", "1"], python="py")
    assert cmd == ["py", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "train.py",
                   "--epochs", "1"]
    pids = tmp_path / "pids"
    pids.mkdir()
    # long enough for torchrun to start its workers on a busy 2-core machine
    res = run_torchrun(_pid_file_script(tmp_path, pids), 2, timeout_s=25, log_dir=tmp_path / "logs")
    assert res.timed_out and not res.ok
    workers = [int(p.read_text()) for p in pids.iterdir()]
    assert len(workers) == 2, "torchrun did not start both workers within the timeout"
    assert not any(_alive(pid) for pid in workers), "a worker outlived the timeout"
    assert {r: out.strip() for r, out in res.rank_stdout.items()} == {0: "rank 0 started", 1: "rank 1 started"}
    with pytest.raises(RuntimeError, match="timed out"):
        res.check()


def test_torchfrtrace_explains_an_older_version_that_reads_only_nccl_dumps(tmp_path, monkeypatch):
    """torch 2.11's fr_trace asserts that every entry comes from NCCL or XCCL: a gloo dump must give a sentence that
    says so, not an AssertionError in the learner's cell; any other assertion still raises."""
    import torch.distributed.flight_recorder.fr_trace as fr_trace

    def old_main(argv):
        raise AssertionError("name formatting error? gloo != 'nccl' or 'xccl'")
    monkeypatch.setattr(fr_trace, "main", old_main)
    report = torchfrtrace(tmp_path)
    assert "reads only NCCL and XCCL dumps" in report and "gloo" in report

    def broken_main(argv):
        raise AssertionError("something else")
    monkeypatch.setattr(fr_trace, "main", broken_main)
    with pytest.raises(AssertionError, match="something else"):
        torchfrtrace(tmp_path)


def _sleeping_worker(rank: int, world_size: int, pid_dir: str) -> None:
    # Written under another name, then renamed: the test waits for *.pid files, and write_text creates the file
    # empty before it writes, so a reader could see it with no pid in it (a flaky ValueError in CI).
    pending = Path(pid_dir) / f"{rank}.pid.part"
    pending.write_text(str(os.getpid()))
    pending.replace(Path(pid_dir) / f"{rank}.pid")
    time.sleep(120)


@pytest.mark.slow
@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError])
def test_no_worker_outlives_an_interrupted_or_failed_call(tmp_path, monkeypatch, stop):
    # The learner stops the cell (or something raises) while the workers run: the old run_processes left them
    # running, on the GPU too, next to the cell's rerun.
    import utils.processes as P

    def wait_then_stop(pipes, procs, timeout_s, stderr_files):
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("*.pid"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        raise stop("stopped while the workers ran")

    monkeypatch.setattr(P, "_collect", wait_then_stop)
    with pytest.raises(stop):
        run_processes(_sleeping_worker, 2, (str(tmp_path),), timeout_s=120, start_method="fork")
    pids = [int(f.read_text()) for f in tmp_path.glob("*.pid")]
    assert len(pids) == 2 and not any(_alive(pid) for pid in pids)


@pytest.mark.slow
def test_a_worker_past_the_timeout_is_killed(tmp_path):
    (outcome,) = run_processes(_sleeping_worker, 1, (str(tmp_path),), timeout_s=10, start_method="fork",
                               raise_on_error=False)
    assert "did not report within 10 s; it was killed" in outcome.error
    assert not _alive(int((tmp_path / "0.pid").read_text()))


@pytest.mark.slow
def test_a_worker_may_start_dataloader_workers():
    # The old workers were daemonic, and a daemonic process may not have children.
    def batch_sums(rank: int, world_size: int):
        from torch.utils.data import DataLoader
        return [int(b.sum()) for b in DataLoader(list(range(8)), batch_size=4, num_workers=1)]

    assert run_processes(batch_sums, 1, timeout_s=60, start_method="fork") == [[6, 22]]


@pytest.mark.slow
def test_a_port_taken_before_rank_0_binds_it_is_replaced(monkeypatch):
    # free_port() releases the port it found; another process can take it before rank 0's store binds it. A correct
    # answer must not lose its marks to that: the ranks are stopped at once and start again on a new port.
    import socket

    import utils.processes as P

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    ports = iter([taken.getsockname()[1]])
    real = P.free_port
    monkeypatch.setattr(P, "free_port", lambda: next(ports, None) or real())
    start = time.monotonic()
    try:
        assert run_processes(lambda r, w: r, 2, timeout_s=30, collective_timeout_s=5) == [0, 1]
    finally:
        taken.close()
    assert time.monotonic() - start < 15, "the ranks waiting on the missing store were stopped, not waited for"


RANK_SCRIPT = """
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
print(dist.get_rank())
dist.destroy_process_group()
"""


def _taken_port_first(monkeypatch, module):
    """Make ``module.free_port`` return a port another socket is listening on, then real free ports; returns the
    socket (to close) and the list of ports handed out."""
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    handed: list[int] = []
    real = module.free_port

    def port() -> int:
        handed.append(taken.getsockname()[1] if not handed else real())
        return handed[-1]

    monkeypatch.setattr(module, "free_port", port)
    return taken, handed


@pytest.mark.slow
def test_run_script_ranks_starts_again_when_its_port_was_taken(monkeypatch, tmp_path):
    # The same race as run_processes': rank 1 would wait for rank 0's store until timeout_s, so a correct job would
    # time out. The ranks are stopped as soon as rank 0 reports the taken port, and start again on a new one.
    import utils.launch as L

    script = tmp_path / "ranks.py"
    script.write_text(RANK_SCRIPT)
    taken, handed = _taken_port_first(monkeypatch, L)
    try:
        res = run_script_ranks(script, 2, timeout_s=120)
    finally:
        taken.close()
    assert len(handed) == 2, f"expected one retry on a new port, got ports {handed}"
    assert res.ok, res.rank_stderr
    assert [res.rank_stdout[r].split()[-1] for r in (0, 1)] == ["0", "1"]

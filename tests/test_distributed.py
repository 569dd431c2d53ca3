"""Tests of utils.distributed: real 2-process gloo groups on the CPU, each bounded by a timeout."""
from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist
from torch import nn

from utils.distributed import (CommCounter, DistributedRunError, backend_for, get_local_rank, get_rank,
                               get_world_size, is_main_process, run_processes, run_torchrun, shard_range,
                               torchrun_command)


@pytest.fixture(scope="module", autouse=True)
def _warm_imports():
    """DDP imports torch._dynamo lazily (seconds); do it once, before the workers are forked."""
    from utils.distributed import _preimport

    _preimport()


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


def test_backend_and_identity_without_group(monkeypatch):
    assert backend_for("cpu") == "gloo"
    assert backend_for(torch.device("cuda", 1)) == "nccl"
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    assert (get_rank(), get_world_size(), get_local_rank()) == (0, 1, 0)
    assert is_main_process()
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert get_rank() == 3 and get_local_rank() == 1 and not is_main_process()


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


def test_run_processes_all_reduce_and_identity():
    def fn(rank: int, world_size: int):
        t = torch.tensor([float(rank + 1)])
        dist.all_reduce(t)
        return rank, world_size, get_rank(), is_main_process(), t.item()

    out = run_processes(fn, 2, timeout_s=20)
    assert out == [(0, 2, 0, True, 3.0), (1, 2, 1, False, 3.0)]


def test_ddp_two_processes_match_one_process_on_the_global_batch():
    ddp = run_processes(_ddp_worker, 2, timeout_s=30)
    single = _model()
    _train(single, *_batch())
    for rank_state in ddp:
        for name, ref in single.state_dict().items():
            assert torch.allclose(rank_state[name], ref, atol=1e-5, rtol=0), name
    # and the two ranks hold identical weights
    assert all(torch.equal(ddp[0][k], ddp[1][k]) for k in ddp[0])


def test_mismatched_collective_fails_fast_instead_of_hanging():
    def fn(rank: int, world_size: int):
        if rank == 0:  # rank 1 skips the collective: the classic hang
            dist.all_reduce(torch.ones(2))
        else:
            time.sleep(1.0)
        return rank

    start = time.perf_counter()
    with pytest.raises(DistributedRunError) as info:
        run_processes(fn, 2, timeout_s=10, collective_timeout_s=0.5)
    assert time.perf_counter() - start < 8
    assert not info.value.outcomes[0].ok and info.value.outcomes[1].ok


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

    (calls, nbytes), _ = run_processes(fn, 2, timeout_s=20)
    n_params = sum(p.numel() for p in _model().parameters())
    assert calls >= 1 and nbytes == 4 * n_params  # one synchronised backward: every gradient once, in fp32


def test_torchrun_command_and_timeout_kill(tmp_path):
    cmd = torchrun_command("train.py", 2, ["--epochs", "1"], python="py")
    assert cmd == ["py", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "train.py",
                   "--epochs", "1"]
    script = tmp_path / "never.py"
    script.write_text("import time\ntime.sleep(60)\n")
    res = run_torchrun(script, 2, timeout_s=0.5)
    assert res.timed_out and not res.ok and res.seconds < 6
    with pytest.raises(RuntimeError):
        res.check()


def test_init_from_env_without_a_launcher_starts_a_one_process_group(monkeypatch):
    from utils.distributed import cleanup, init_from_env

    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
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

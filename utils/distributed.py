"""Distributed helpers: start a process group from the environment, ask who you are, and launch workers safely.

The same code runs on a laptop (``gloo`` on the CPU) and on GPU nodes (``nccl``, one process per GPU). Every
launcher here has a **timeout**, so a mismatched collective ends as an error instead of a hung notebook or CI job.

Two ways to start workers:

* :func:`run_torchrun` runs ``python -m torch.distributed.run`` (what the ``torchrun`` command is) on a script,
  exactly as you would in a terminal, and returns its output. Each worker is a fresh Python process that imports
  torch (seconds each on a small machine).
* :func:`run_processes` forks ``world_size`` copies of the current process and runs a Python function in each.
  Forking skips the import, so it is the cheap way to run many small experiments from a notebook. Linux and macOS
  only (it needs the ``fork`` start method); results travel back pickled.

Inside a worker, :func:`init_from_env` reads ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
``MASTER_PORT`` (set by torchrun, SLURM wrappers, or :func:`run_processes`), picks the backend from the device
and joins the group.
"""
from __future__ import annotations

import datetime
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist

DEFAULT_TIMEOUT_S = 60.0


# --------------------------------------------------------------------------------------------------- identity
def backend_for(device: torch.device | str) -> str:
    """The collective backend for a device: ``"nccl"`` for CUDA tensors, ``"gloo"`` for everything else."""
    return "nccl" if torch.device(device).type == "cuda" else "gloo"


def get_rank() -> int:
    """Global rank of this process (0 .. world_size-1); 0 when no process group is running."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", 0))


def get_world_size() -> int:
    """Number of processes in the job; 1 when no process group is running."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return int(os.environ.get("WORLD_SIZE", 1))


def get_local_rank() -> int:
    """Rank of this process on its own node (which GPU it drives); from ``LOCAL_RANK``, 0 if unset."""
    return int(os.environ.get("LOCAL_RANK", 0))


def is_main_process() -> bool:
    """True on global rank 0: the one process that should log, print and save checkpoints."""
    return get_rank() == 0


def init_from_env(device: str | torch.device = "auto", *, backend: str | None = None,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> torch.device:
    """Join the process group described by the environment and return this rank's device.

    Args:
        device: ``"auto"`` uses ``cuda:LOCAL_RANK`` when CUDA is available, else the CPU; ``"cpu"`` forces the CPU.
        backend: override the backend (default: :func:`backend_for` the device: nccl on CUDA, gloo on CPU).
        timeout_s: seconds any collective may wait for the other ranks before raising (instead of hanging).

    Without ``WORLD_SIZE`` in the environment (a plain ``python script.py``) it starts a 1-process group, so
    scripts also run un-launched.
    """
    dev_pref = str(device).strip().lower()
    local_rank = get_local_rank()
    if dev_pref == "auto":
        dev = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    else:
        dev = torch.device(dev_pref)
        if dev.type == "cuda" and dev.index is None:
            dev = torch.device("cuda", local_rank)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if dist.is_initialized():
        return dev
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        os.environ["MASTER_PORT"] = str(free_port())
    kwargs: dict[str, Any] = {}
    if dev.type == "cuda" and (backend or backend_for(dev)) == "nccl":
        kwargs["device_id"] = dev  # binds the NCCL communicator to this GPU early
    dist.init_process_group(backend=backend or backend_for(dev), timeout=datetime.timedelta(seconds=timeout_s),
                            **kwargs)
    return dev


def barrier() -> None:
    """Wait until every rank gets here (a no-op without a process group)."""
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def cleanup() -> None:
    """Leave the process group (safe to call twice or without one)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (for ``MASTER_PORT``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------------------------------- torchrun
@dataclass
class LaunchResult:
    """What a launched job left behind. ``seconds`` is wall-clock time including process start-up."""

    command: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def check(self) -> "LaunchResult":
        """Raise ``RuntimeError`` with the tail of stderr unless the job succeeded; return self otherwise."""
        if not self.ok:
            why = f"timed out after {self.seconds:.0f} s" if self.timed_out else f"exit code {self.returncode}"
            lines = self.stderr.strip().splitlines()
            errors = [ln for ln in lines if ln.startswith("[rank") and "Error" in ln][:6]
            raise RuntimeError(f"{' '.join(self.command)} failed ({why}). Worker errors:\n" + "\n".join(errors)
                               + "\nLast stderr lines:\n" + "\n".join(lines[-12:]))
        return self


def torchrun_command(script: str | os.PathLike, nproc_per_node: int = 2, args: Sequence[str] = (), *,
                     python: str | None = None, standalone: bool = True, extra: Sequence[str] = ()) -> list[str]:
    """The ``torchrun`` command line for a single-node job, as a list (``python -m torch.distributed.run`` is the
    same program as the ``torchrun`` entry point, but is sure to use this interpreter)."""
    cmd = [python or sys.executable, "-m", "torch.distributed.run"]
    if standalone:
        cmd.append("--standalone")
    cmd += [f"--nproc_per_node={int(nproc_per_node)}", *extra, str(script), *map(str, args)]
    return cmd


def run_torchrun(script: str | os.PathLike, nproc_per_node: int = 2, args: Sequence[str] = (), *,
                 timeout_s: float = 120.0, env: dict[str, str] | None = None, threads_per_process: int | None = 1,
                 cwd: str | os.PathLike | None = None, extra: Sequence[str] = ()) -> LaunchResult:
    """Run ``torchrun --standalone --nproc_per_node=N script args...`` and return its output.

    The whole process tree is killed after ``timeout_s`` seconds (``LaunchResult.timed_out`` is then True), so a
    hung collective cannot hang the caller. ``env`` entries are added to this process's environment;
    ``threads_per_process`` sets ``OMP_NUM_THREADS`` (1 keeps N processes from fighting over a few CPU cores).
    """
    cmd = torchrun_command(script, nproc_per_node, args, extra=extra)
    full_env = dict(os.environ)
    if threads_per_process is not None:
        full_env["OMP_NUM_THREADS"] = str(threads_per_process)
    full_env.update(env or {})
    # The package root, so that scripts can `import utils` from a temporary folder.
    root = str(Path(__file__).resolve().parent.parent)
    full_env["PYTHONPATH"] = root + (os.pathsep + full_env["PYTHONPATH"] if full_env.get("PYTHONPATH") else "")
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env,
                            cwd=cwd, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_tree(proc)
        out, err = proc.communicate()
        timed_out = True
    return LaunchResult(cmd, proc.returncode, out, err, time.perf_counter() - start, timed_out)


def _kill_tree(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired, PermissionError):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


# --------------------------------------------------------------------------------------------------- fork
@dataclass
class RankOutcome:
    """One worker's result: ``value`` if it returned, ``error`` (a traceback text) if it raised or never
    reported (killed at the timeout)."""

    rank: int
    value: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class DistributedRunError(RuntimeError):
    """At least one rank raised or timed out. ``outcomes`` holds every rank's :class:`RankOutcome`."""

    def __init__(self, message: str, outcomes: list[RankOutcome]):
        super().__init__(message)
        self.outcomes = outcomes


def _worker(fn: Callable[..., Any], rank: int, world_size: int, port: int, args: tuple, kwargs: dict,
            backend: str | None, device: str, timeout_s: float, threads: int | None, env: dict[str, str],
            conn: Any) -> None:
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(rank),
                       "LOCAL_WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    os.environ.update(env)
    # torch reads TORCH_DISTRIBUTED_DEBUG when torch.distributed is imported; re-read it for this worker.
    dist.set_debug_level_from_env()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        init_from_env(device, backend=backend, timeout_s=timeout_s)
        value = fn(rank, world_size, *args, **kwargs)
        payload = pickle.dumps(RankOutcome(rank, value=value))
    except BaseException:  # report everything, including a collective's timeout
        payload = pickle.dumps(RankOutcome(rank, error=traceback.format_exc()))
    try:
        conn.send_bytes(payload)
        conn.close()
    finally:
        try:
            cleanup()
        except Exception:
            pass


_PREIMPORTS = ("torch._dynamo", "torch.nn.parallel", "torch.distributed.fsdp")


def _preimport() -> None:
    """Import, once in the parent, the modules DDP and FSDP load lazily on first use (``torch._dynamo`` alone
    takes seconds): forked workers inherit them instead of each importing them again."""
    import importlib

    for name in _PREIMPORTS:
        try:
            importlib.import_module(name)
        except Exception:  # optional pieces; a worker will report the real error if it needs one
            pass


def run_processes(fn: Callable[..., Any], world_size: int = 2, args: Sequence[Any] = (), *,
                  kwargs: dict[str, Any] | None = None, backend: str | None = None, device: str = "cpu",
                  timeout_s: float = DEFAULT_TIMEOUT_S, collective_timeout_s: float | None = None,
                  threads_per_process: int | None = 1, env: dict[str, str] | None = None,
                  raise_on_error: bool = True) -> list[Any] | list[RankOutcome]:
    """Fork ``world_size`` workers, run ``fn(rank, world_size, *args, **kwargs)`` in each inside a process group,
    and return the values in rank order.

    Args:
        fn: any function (it may be defined in a notebook: workers are forked, nothing is imported).
            Its return value must be picklable; return CPU tensors.
        backend: default :func:`backend_for` the device (gloo on CPU).
        device: ``"cpu"`` (default) or ``"auto"`` (``cuda:rank`` when CUDA is available).
        timeout_s: seconds to wait for all workers before killing them.
        collective_timeout_s: the process group's timeout (how long one collective waits for the other ranks;
            default ``timeout_s / 2``, so a mismatched collective raises inside the worker and is reported).
        threads_per_process: torch threads in each worker (1 avoids oversubscribing a small CPU).
        env: extra environment variables set in each worker before the group starts.
        raise_on_error: if True, raise :class:`DistributedRunError` when any rank failed; if False return the
            list of :class:`RankOutcome` instead of values.
    """
    import multiprocessing as mp

    _preimport()
    ctx = mp.get_context("fork")
    port = free_port()
    coll_timeout = collective_timeout_s if collective_timeout_s is not None else max(1.0, timeout_s / 2)
    pipes, procs = [], []
    for rank in range(world_size):
        recv, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_worker, args=(fn, rank, world_size, port, tuple(args), dict(kwargs or {}), backend,
                                              device, coll_timeout, threads_per_process, dict(env or {}), send),
                        daemon=True)
        p.start()
        send.close()
        pipes.append(recv)
        procs.append(p)
    deadline = time.monotonic() + timeout_s
    outcomes: list[RankOutcome] = []
    for rank, (recv, p) in enumerate(zip(pipes, procs)):
        remaining = max(0.0, deadline - time.monotonic())
        outcome = None
        if recv.poll(remaining):
            try:
                outcome = pickle.loads(recv.recv_bytes())
            except EOFError:
                outcome = None
        if outcome is None:
            p.join(timeout=0.5)
            if p.exitcode is None:
                why = f"did not report within {timeout_s:.0f} s; it was killed"
            elif p.exitcode < 0:
                why = f"died from signal {-p.exitcode} ({signal.Signals(-p.exitcode).name}) without reporting"
            else:
                why = f"exited with code {p.exitcode} without reporting"
            outcome = RankOutcome(rank, error=f"rank {rank} {why}")
        outcomes.append(outcome)
    for p in procs:  # every rank has reported (or was given up on): a short grace period to exit, then kill
        p.join(timeout=min(3.0, max(0.1, deadline - time.monotonic())))
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    for recv in pipes:
        recv.close()
    if not raise_on_error:
        return outcomes
    failed = [o for o in outcomes if not o.ok]
    if failed:
        first = failed[0].error or ""
        raise DistributedRunError(f"{len(failed)} of {world_size} ranks failed; rank {failed[0].rank}: "
                                  + first.strip().splitlines()[-1], outcomes)
    return [o.value for o in outcomes]


# --------------------------------------------------------------------------------------------------- small tools
@dataclass
class CommCounter:
    """Counts gradient all-reduces through a DDP communication hook (no change to the math).

    ``calls`` is the number of buckets reduced; ``bytes`` the payload in bytes summed over those calls.
    Register with ``ddp_model.register_comm_hook(state=None, hook=counter.hook)`` (before the first backward).
    """

    calls: int = 0
    bytes: int = 0
    sizes: list[int] = field(default_factory=list)

    def hook(self, state: Any, bucket):  # no annotation: DDP rejects string annotations here
        """The comm hook: count the bucket, then do DDP's default all-reduce (average) on it."""
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        buf = bucket.buffer()
        self.calls += 1
        self.bytes += buf.numel() * buf.element_size()
        self.sizes.append(buf.numel())
        return allreduce_hook(None, bucket)


def shard_range(numel: int, rank: int, world_size: int) -> tuple[int, int]:
    """The ``[start, stop)`` slice of a flat tensor of ``numel`` elements that ``rank`` owns when it is split into
    ``world_size`` equal shards padded at the end (the layout ZeRO and FSDP use)."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
    per = -(-numel // world_size)
    start = min(rank * per, numel)
    return start, min(start + per, numel)

"""Run a Python *function* on ``world_size`` local processes inside a process group: :func:`run_processes`.

The cheap way to run many small distributed experiments from a notebook: no script file, results come back
pickled, every run has a hard time limit. How the workers start matters on GPU machines:

* **fork** (wherever the platform offers it, Linux and macOS, while this process has not initialised CUDA; on
  macOS Python's own default is spawn, since a system library's threads can crash a forked child) copies this
  process: nothing is imported again and any function works, including one defined in a notebook cell;
* **spawn** starts fresh interpreters. It is used as soon as this process has initialised CUDA
  (``torch.cuda.is_initialized()``, e.g. after ``course_setup`` picked a GPU) or the workers will use CUDA: a forked
  child of such a process fails with "Cannot re-initialize CUDA in forked subprocess". A spawned process cannot
  import a function defined in a notebook (it lives in the kernel's ``__main__``), so the function, its arguments
  and the notebook globals it uses are sent by value with ``cloudpickle``. What cannot be pickled (open files,
  locks, a running DataLoader) raises a ``TypeError`` that says so: move such a worker into a ``.py`` module, or
  launch a script with :func:`utils.launch.run_torchrun`. In a script (not a notebook), call
  :func:`run_processes` under ``if __name__ == "__main__":``, as for any spawn-based multiprocessing.

Each worker joins the group with :func:`utils.distributed.init_from_env`, so it drives ``cuda:LOCAL_RANK`` when
``device="auto"`` finds GPUs (:func:`utils.distributed.worker_device` tells the worker function which one).

What a worker writes to standard error (gloo's connection lines, warnings, a C++ library's logs) is kept in a file
per rank and returned in :attr:`RankOutcome.stderr`, never written into the caller's: in a notebook it would show
as red text under the cell, and nbgrader scores a test cell with any standard-error output as failed.
"""
from __future__ import annotations

import importlib
import io
import multiprocessing as mp
import os
import pickle
import runpy
import shutil
import signal
import sys
import tempfile
import time
import traceback
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist

from .distributed import DEFAULT_TIMEOUT_S, cleanup, init_from_env
from .exercise_hints import also_hint_for
from .launch import PORT_ATTEMPTS, LaunchResult, free_port, port_was_taken

START_METHODS = ("fork", "spawn")


@dataclass
class RankOutcome:
    """One worker's result: ``value`` if it returned, ``error`` (a traceback text) if it raised or never
    reported (killed at the timeout); ``stderr``: what it wrote to standard error (empty when not kept)."""

    rank: int
    value: Any = None
    error: str | None = None
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


class DistributedRunError(RuntimeError):
    """At least one rank raised or timed out. ``outcomes`` holds every rank's :class:`RankOutcome`."""

    def __init__(self, message: str, outcomes: list[RankOutcome]):
        super().__init__(message)
        self.outcomes = outcomes


also_hint_for(DistributedRunError)   # a rank stopped at an unsolved exercise: the notebook says which, as in-process


def _workers_use_cuda(device: str) -> bool:
    pref = str(device).strip().lower()
    return pref.startswith("cuda") or (pref == "auto" and torch.cuda.is_available())


def start_method_for(device: str = "cpu") -> str:
    """``"fork"`` while this process has not initialised CUDA, ``"spawn"`` once this process has initialised CUDA, when the workers will
    use CUDA (``device`` "auto" with a GPU, or "cuda..."), or where fork does not exist (Windows)."""
    if "fork" not in mp.get_all_start_methods() or torch.cuda.is_initialized() or _workers_use_cuda(device):
        return "spawn"
    return "fork"


def dumps_by_value(obj: Any) -> bytes:
    """``cloudpickle.dumps(obj)``: notebook functions and the globals they use go by value. A module object of a
    ``types.ModuleType`` subclass goes by name: ``torch.backends.cudnn`` is one (``CudnnModule``), which a function
    that sets ``torch.backends.cudnn.benchmark`` refers to and plain cloudpickle cannot pickle."""
    import cloudpickle

    class _Pickler(cloudpickle.Pickler):
        def reducer_override(self, value: Any) -> Any:
            if (isinstance(value, types.ModuleType) and type(value) is not types.ModuleType
                    and sys.modules.get(value.__name__) is value):
                return importlib.import_module, (value.__name__,)
            return super().reducer_override(value)

    buffer = io.BytesIO()
    _Pickler(buffer).dump(obj)
    return buffer.getvalue()


def _pack_for_spawn(fn: Callable[..., Any], args: tuple, kwargs: dict) -> bytes:
    try:
        import cloudpickle
    except ImportError:
        cloudpickle = None
    if cloudpickle is None and getattr(fn, "__module__", None) == "__main__":
        raise TypeError(f"{fn.__qualname__} is defined in __main__ (a notebook or a script run directly), which a "
                        "spawned worker cannot import, and cloudpickle is not installed to send it by value: "
                        "`pip install cloudpickle`, or move the function into a .py module.")
    try:
        return dumps_by_value((fn, args, kwargs)) if cloudpickle else pickle.dumps((fn, args, kwargs))
    except Exception as err:
        raise TypeError(
            f"The workers start with 'spawn' (needed once CUDA is initialised in this process or the workers use "
            f"CUDA), and spawn sends {getattr(fn, '__qualname__', fn)!r}, its arguments and the globals it uses to fresh "
            f"processes by pickling them, which failed: {type(err).__name__}: {err}. Pass only picklable values "
            "(tensors, numbers, lists, modules built inside the worker), or put the worker in a .py module, or "
            "launch a script with utils.launch.run_torchrun.") from err


def _redirect_stderr(path: str) -> None:
    """Send this process's descriptor 2 and ``sys.stderr`` to ``path`` (C++ logs and Python warnings alike)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stderr = open(2, "w", buffering=1, closefd=False)


def _worker(job: Any, rank: int, world_size: int, port: int, backend: str | None, device: str, timeout_s: float,
            threads: int | None, env: dict[str, str], conn: Any, stderr_path: str | None = None) -> None:
    if stderr_path is not None:
        _redirect_stderr(stderr_path)
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(rank),
                       "LOCAL_WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    os.environ.update(env)
    # torch reads TORCH_DISTRIBUTED_DEBUG when torch.distributed is imported; re-read it for this worker.
    dist.set_debug_level_from_env()
    if threads is not None:
        torch.set_num_threads(threads)
    dumps = pickle.dumps
    try:
        if isinstance(job, bytes):  # spawned: the function may have come by value; return values the same way
            try:
                import cloudpickle

                dumps = cloudpickle.dumps
            except ImportError:
                pass
        fn, args, kwargs = pickle.loads(job) if isinstance(job, bytes) else job
        init_from_env(device, backend=backend, timeout_s=timeout_s)
        value = fn(rank, world_size, *args, **kwargs)
        payload = dumps(RankOutcome(rank, value=value))
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


def _port_taken(outcome: RankOutcome) -> bool:
    """Whether rank 0's store could not listen on MASTER_PORT because another process took the port between
    ``free_port()`` and the bind (then ``run_processes`` starts again on a new one)."""
    return outcome.rank == 0 and bool(outcome.error) and port_was_taken(outcome.error)


def _collect(pipes: list, procs: list, timeout_s: float, stderr_files: list[Path | None]) -> list[RankOutcome]:
    deadline = time.monotonic() + timeout_s
    outcomes: list[RankOutcome] = []
    for rank, (recv, p) in enumerate(zip(pipes, procs)):
        if outcomes and _port_taken(outcomes[0]):   # the others wait on a store that is not there: stop them now
            outcomes.append(RankOutcome(rank, error=f"rank {rank} stopped: rank 0 could not bind MASTER_PORT"))
            continue
        outcome = None
        if recv.poll(max(0.0, deadline - time.monotonic())):
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
        if _port_taken(outcomes[0]):
            p.kill()     # nothing to wait for: every rank is stopped, the caller starts again on a new port
        p.join(timeout=min(3.0, max(0.1, deadline - time.monotonic())))
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    for recv in pipes:
        recv.close()
    for outcome, path in zip(outcomes, stderr_files):
        if path is not None and path.exists():
            outcome.stderr = path.read_text(errors="replace")
    return outcomes


def cpu_ranks_label() -> str:
    """The hardware line of a measurement made by gloo ranks on the CPU, as :func:`run_processes` starts them by
    default (one torch thread each): the same on a GPU machine, whose GPUs those ranks do not use."""
    return f"cpu, gloo, 1 torch thread per rank, torch {torch.__version__}"


def run_processes(fn: Callable[..., Any], world_size: int = 2, args: Sequence[Any] = (), *,
                  kwargs: dict[str, Any] | None = None, backend: str | None = None, device: str = "cpu",
                  timeout_s: float = DEFAULT_TIMEOUT_S, collective_timeout_s: float | None = None,
                  threads_per_process: int | None = 1, env: dict[str, str] | None = None,
                  raise_on_error: bool = True, start_method: str | None = None,
                  keep_stderr: bool = True) -> list[Any] | list[RankOutcome]:
    """Start ``world_size`` workers, run ``fn(rank, world_size, *args, **kwargs)`` in each inside a process group,
    and return the values in rank order. The workers are not daemonic, so they may start processes of their own
    (DataLoader workers); a worker still running when this call ends (past ``timeout_s``, after an error, or on
    ``KeyboardInterrupt`` when you stop the cell) is killed. If another process took the free port this call found
    before rank 0's store bound it, the ranks are stopped at once and started again on a new port (up to 3 starts),
    so ``fn`` may run more than once in that rare case.

    Args:
        fn: the worker function. Its return value must be picklable; return CPU tensors.
        backend: default :func:`~utils.distributed.backend_for` the device (gloo on CPU, NCCL on CUDA).
        device: ``"cpu"`` (default: gloo, on any machine) or ``"auto"`` (``cuda:LOCAL_RANK`` and NCCL when CUDA is
            available; then ``world_size`` must not exceed the GPU count).
        timeout_s: seconds to wait for all workers (start-up included) before killing them.
        collective_timeout_s: the process group's timeout (how long one collective waits for the other ranks;
            default ``timeout_s / 2``, so a mismatched collective raises inside the worker and is reported).
        threads_per_process: torch threads in each worker (1 avoids oversubscribing a small CPU).
        env: extra environment variables set in each worker before the group starts.
        raise_on_error: if True, raise :class:`DistributedRunError` when any rank failed; if False return the
            list of :class:`RankOutcome` instead of values.
        start_method: ``None`` chooses with :func:`start_method_for` (see the module's notes); ``"fork"`` or
            ``"spawn"`` force one.
        keep_stderr: if True, each worker's standard error goes to a file of its own and comes back in
            :attr:`RankOutcome.stderr` (and in the message of :class:`DistributedRunError`), not to this process's.
    """
    method = start_method or start_method_for(device)
    if method not in START_METHODS:
        raise ValueError(f"start_method must be one of {START_METHODS} or None, got {start_method!r}")
    if method == "fork" and (torch.cuda.is_initialized() or _workers_use_cuda(device)):
        raise RuntimeError("start_method='fork' after CUDA was initialised in this process (or with CUDA workers) "
                           "fails in the workers with 'Cannot re-initialize CUDA in forked subprocess': leave "
                           "start_method=None (it picks 'spawn') or pass 'spawn'.")
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    if method == "fork":
        _preimport()
        job: Any = (fn, tuple(args), dict(kwargs or {}))
    else:
        job = _pack_for_spawn(fn, tuple(args), dict(kwargs or {}))
    ctx = mp.get_context(method)
    coll_timeout = collective_timeout_s if collective_timeout_s is not None else max(1.0, timeout_s / 2)
    for _attempt in range(PORT_ATTEMPTS):  # a new port when another process took the last one
        outcomes = _launch(ctx, job, world_size, free_port(), backend, device, coll_timeout, threads_per_process,
                           env, timeout_s, keep_stderr)
        if not _port_taken(outcomes[0]):
            break
    if not raise_on_error:
        return outcomes
    failed = [o for o in outcomes if not o.ok]
    if failed:
        first = failed[0].error or ""
        noise = failed[0].stderr.strip().splitlines()[-5:]
        raise DistributedRunError(f"{len(failed)} of {world_size} ranks failed; rank {failed[0].rank}: "
                                  + first.strip().splitlines()[-1]
                                  + ("\nits last standard-error lines:\n" + "\n".join(noise) if noise else ""),
                                  outcomes)
    return [o.value for o in outcomes]


def _launch(ctx: Any, job: Any, world_size: int, port: int, backend: str | None, device: str, coll_timeout: float,
            threads_per_process: int | None, env: dict[str, str] | None, timeout_s: float,
            keep_stderr: bool) -> list[RankOutcome]:
    # One start of the ranks on ``port``: their outcomes, in rank order.
    stderr_dir = Path(tempfile.mkdtemp(prefix="rank_stderr_")) if keep_stderr else None
    stderr_files = [stderr_dir / f"rank{r}.log" if stderr_dir else None for r in range(world_size)]
    pipes, procs = [], []
    try:
        for rank in range(world_size):
            recv, send = ctx.Pipe(duplex=False)
            # Not daemonic: a daemonic process may not start children, so a worker could not start DataLoader
            # workers. The `finally` below kills every worker still alive, so none outlives this call.
            p = ctx.Process(target=_worker, args=(job, rank, world_size, port, backend, device, coll_timeout,
                                                  threads_per_process, dict(env or {}), send,
                                                  str(stderr_files[rank]) if stderr_files[rank] else None),
                            daemon=False)
            pipes.append(recv)
            procs.append(p)
            p.start()
            send.close()
        outcomes = _collect(pipes, procs, timeout_s, stderr_files)
    finally:
        # After an error or an interrupt (KeyboardInterrupt: the learner stopped the cell) the workers would go on
        # running, on the GPU too, next to whatever runs next: kill them.
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        for recv in pipes:
            recv.close()
        if stderr_dir is not None:
            shutil.rmtree(stderr_dir, ignore_errors=True)
    return outcomes


def _script_worker(rank: int, world_size: int, script: str, args: list[str], env: dict[str, str],
                   stdout_dir: str, cwd: str | None) -> None:
    """Run ``script`` as ``__main__`` in this worker (forked, or spawned once this process has initialised CUDA), its
    stdout in ``<stdout_dir>/<rank>.out``."""
    os.environ.update(env)
    fd = os.open(Path(stdout_dir) / f"{rank}.out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    if cwd is not None:
        os.chdir(cwd)
    sys.argv = [script, *args]
    sys.path.insert(0, str(Path(script).parent))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            raise RuntimeError(f"the script exited with code {exit_.code}") from exit_
    finally:
        sys.stdout.flush()


def run_script(script: str | os.PathLike, world_size: int = 2, args: Sequence[str] = (), *,
               timeout_s: float = DEFAULT_TIMEOUT_S, env: dict[str, str] | None = None,
               cwd: str | os.PathLike | None = None, collective_timeout_s: float | None = None) -> LaunchResult:
    """Run a training *script* on ``world_size`` processes of this machine, as ``torchrun --standalone`` would run
    it, but in workers started like :func:`run_processes` (forked while this process has not initialised CUDA: nothing imports torch again).

    Each worker gets the variables torchrun sets (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
    ``MASTER_PORT``), joins the process group before the script starts (a script that joins with
    :func:`utils.distributed.init_from_env` finds it joined) and runs the script as ``__main__`` with ``args`` in
    ``sys.argv``. Returns a :class:`utils.launch.LaunchResult` with each rank's stdout and stderr (the traceback
    appended when the script raised); ``returncode`` is 0 when every rank finished, 1 when one failed, and
    None when a rank ran past ``timeout_s`` (``timed_out`` is then True).
    """
    stdout_dir = Path(tempfile.mkdtemp(prefix="script_stdout_"))
    start = time.perf_counter()
    try:
        outcomes = run_processes(_script_worker, world_size, (str(Path(script).resolve()), [str(a) for a in args],
                                                              dict(env or {}), str(stdout_dir),
                                                              None if cwd is None else str(cwd)),
                                 timeout_s=timeout_s, collective_timeout_s=collective_timeout_s,
                                 raise_on_error=False)
        rank_out = {r: (stdout_dir / f"{r}.out").read_text(errors="replace")
                    if (stdout_dir / f"{r}.out").exists() else "" for r in range(world_size)}
    finally:
        shutil.rmtree(stdout_dir, ignore_errors=True)
    rank_err = {o.rank: o.stderr + (o.error or "") for o in outcomes}
    timed_out = any(o.error and "did not report within" in o.error for o in outcomes)
    returncode = None if timed_out else (0 if all(o.ok for o in outcomes) else 1)
    return LaunchResult(["run_script", str(script), *map(str, args)], returncode, "", "",
                        time.perf_counter() - start, timed_out, rank_out, rank_err)

"""Inside a distributed worker: who am I, which device is mine, and how do I join the process group.

The same worker code runs on a laptop (``gloo`` on the CPU) and on GPU nodes (``nccl``, one process per GPU):

* :func:`init_from_env` reads the job's variables, picks this rank's device (:func:`worker_device`: ``cuda:LOCAL_RANK``
  on GPUs) and backend (:func:`backend_for`: NCCL for CUDA, gloo for the CPU) and joins the group *with a timeout*;
* :func:`get_rank`, :func:`get_world_size`, :func:`get_local_rank`, :func:`is_main_process`, :func:`barrier` and
  :func:`cleanup` do what their names say;
* :func:`demo_world` picks how a notebook's data-parallel run uses this machine: one process per GPU with NCCL on
  a node of two or more GPUs, CPU processes with gloo otherwise;
* :func:`ddp_buffer_sync` spells DDP's "copy rank 0's buffers at every forward" switch the way the installed PyTorch
  takes it (``broadcast_buffers`` until 2.12, ``forward_sync_buffers`` from 2.13).

The variables come from ``torchrun`` (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``), from
the course's launchers (:mod:`utils.launch`, :mod:`utils.processes`), or from SLURM when ``srun`` starts one task per
GPU without torchrun (``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``; see :func:`rendezvous_env`).
"""
from __future__ import annotations

import atexit
import datetime
import functools
import gc
import inspect
import os
import sys
from dataclasses import dataclass
from typing import Any, Mapping

import torch
import torch.distributed as dist

from .device import pick_device

DEFAULT_TIMEOUT_S = 60.0


# --------------------------------------------------------------------------------------------------- identity
@dataclass(frozen=True)
class Rendezvous:
    """Where this process sits in the job and where rank 0's store listens. ``source`` names who set it."""

    rank: int
    world_size: int
    local_rank: int
    master_addr: str | None
    master_port: str | None
    source: str                     # "torchrun/env", "slurm" or "none" (a plain `python script.py`)


def _int(environ: Mapping[str, str], name: str) -> int:
    try:
        return int(environ[name])
    except ValueError as e:
        raise ValueError(f"{name}={environ[name]!r} is not an integer: check the launcher's environment") from e


def rendezvous_env(environ: Mapping[str, str] | None = None, *, check: bool = True) -> Rendezvous:
    """Read this process's place in the job from the environment (``os.environ`` by default).

    ``RANK`` and ``WORLD_SIZE`` (torchrun, the course's launchers) win. Without them, a SLURM step with more than
    one task (``srun --ntasks-per-node=G python train.py``: one task per GPU, no torchrun) gives ``SLURM_PROCID``,
    ``SLURM_NTASKS`` and ``SLURM_LOCALID``; SLURM sets no rendezvous address, so ``MASTER_ADDR`` and ``MASTER_PORT``
    must be exported by the batch script (``127.0.0.1`` is assumed on a single node). ``SLURM_NTASKS`` is the job's
    task count, not the step's: a batch script or an ``salloc`` shell sees it too, so a plain ``python script.py``
    or a Jupyter kernel started there would be taken for one rank of N (unset ``SLURM_NTASKS`` there). Without
    either, this is a one-process job. With ``check``, missing pieces raise ``RuntimeError`` saying what to export, instead of
    starting N separate one-process jobs that each train alone.
    """
    env = os.environ if environ is None else environ
    addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    if "RANK" in env or "WORLD_SIZE" in env:
        if check and not ("RANK" in env and "WORLD_SIZE" in env):
            raise RuntimeError("only one of RANK and WORLD_SIZE is set: launch with torchrun (or utils.launch), "
                               "which sets both")
        rank = _int(env, "RANK") if "RANK" in env else 0
        world = _int(env, "WORLD_SIZE") if "WORLD_SIZE" in env else 1
        local = _int(env, "LOCAL_RANK") if "LOCAL_RANK" in env else rank
        return Rendezvous(rank, world, local, addr, port, "torchrun/env")
    slurm_tasks = _int(env, "SLURM_NTASKS") if "SLURM_NTASKS" in env else 1
    if slurm_tasks > 1:
        rank, world = _int(env, "SLURM_PROCID"), slurm_tasks
        local = _int(env, "SLURM_LOCALID") if "SLURM_LOCALID" in env else 0
        if addr is None and check:
            if env.get("SLURM_NNODES", "1").strip() != "1":
                raise RuntimeError(
                    f"SLURM started {world} tasks on {env['SLURM_NNODES']} nodes, but MASTER_ADDR is not set, so the "
                    "ranks cannot find each other. In the batch script: "
                    'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)')
            addr = "127.0.0.1"
        if port is None and check:
            raise RuntimeError(
                f"SLURM started {world} tasks but MASTER_PORT is not set; every task needs the same port. In the "
                "batch script: export MASTER_PORT=29500 (any free port), or run torchrun inside srun instead.")
        return Rendezvous(rank, world, local, addr, port, "slurm")
    return Rendezvous(0, 1, _int(env, "LOCAL_RANK") if "LOCAL_RANK" in env else 0, addr, port, "none")


def _running() -> bool:
    return dist.is_available() and dist.is_initialized()


def backend_for(device: torch.device | str) -> str:
    """The collective backend for a device: ``"nccl"`` for CUDA tensors, ``"gloo"`` for everything else."""
    return "nccl" if torch.device(device).type == "cuda" else "gloo"


def demo_world(world_size: int, gpu_count: int | None = None) -> tuple[int, str]:
    """Processes and device preference for a data-parallel run that should use what this machine has.

    With two or more GPUs: one process per GPU (at most ``world_size``), device ``"auto"``, so each worker drives
    ``cuda:LOCAL_RANK`` and the group uses NCCL (over NVLink or PCIe: what a benchmark there should measure). With
    fewer: ``world_size`` CPU processes, device ``"cpu"``, gloo; one GPU cannot host a meaningful NCCL group, and
    two processes sharing one GPU measure nothing a real job does. ``gpu_count`` defaults to
    ``torch.cuda.device_count()`` (0 without CUDA). Pass the pair to :func:`utils.processes.run_processes`
    (``world_size``, ``device=``) or a script's ``--device``.
    """
    gpus = (torch.cuda.device_count() if torch.cuda.is_available() else 0) if gpu_count is None else gpu_count
    return (min(world_size, gpus), "auto") if gpus >= 2 else (world_size, "cpu")


def ddp_buffer_sync_argument(ddp_class: type | None = None) -> str:
    """The name of DDP's argument (and attribute) that broadcasts rank 0's buffers at the start of every forward,
    read from the installed ``DistributedDataParallel.__init__``: ``"forward_sync_buffers"`` from PyTorch 2.13 (the
    old name still works there, with a ``FutureWarning``), ``"broadcast_buffers"`` before. ``ddp_class`` defaults to
    ``torch.nn.parallel.DistributedDataParallel``."""
    if ddp_class is None:
        from torch.nn.parallel import DistributedDataParallel as ddp_class
    params = inspect.signature(ddp_class.__init__).parameters
    return "forward_sync_buffers" if "forward_sync_buffers" in params else "broadcast_buffers"


def ddp_buffer_sync(enabled: bool = True, ddp_class: type | None = None) -> dict[str, bool]:
    """Keyword arguments for ``DDP(model, **ddp_buffer_sync(enabled))``: the per-forward buffer broadcast on or off,
    under the name this PyTorch takes (:func:`ddp_buffer_sync_argument`), so one call runs on 2.11 and on 2.14
    without a warning. ``enabled=True`` is DDP's default. With ``enabled=False`` the versions differ at construction:
    ``broadcast_buffers=False`` also leaves the buffers out of the start-up broadcast, ``forward_sync_buffers=False``
    still copies them once (``init_sync`` governs that)."""
    return {ddp_buffer_sync_argument(ddp_class): bool(enabled)}


def get_rank() -> int:
    """Global rank of this process (0 .. world_size-1); from the group if one runs, else from the environment."""
    return dist.get_rank() if _running() else rendezvous_env(check=False).rank


def get_world_size() -> int:
    """Number of processes in the job; from the group if one runs, else from the environment (1 if unset)."""
    return dist.get_world_size() if _running() else rendezvous_env(check=False).world_size


def get_local_rank() -> int:
    """Rank of this process on its own node, i.e. which GPU it drives (``LOCAL_RANK`` or ``SLURM_LOCALID``)."""
    return rendezvous_env(check=False).local_rank


def is_main_process() -> bool:
    """True on global rank 0: the one process that should log, print and save checkpoints."""
    return get_rank() == 0


# --------------------------------------------------------------------------------------------------- device
def worker_device(preference: str | torch.device | None = None) -> torch.device:
    """This rank's device, made the current CUDA device when it is a GPU.

    With no ``preference``, inside a running process group: ``cuda:LOCAL_RANK`` when the group's backend is NCCL,
    else the CPU (gloo), so one worker function is right under both; without a group it is ``"auto"``.
    ``"auto"`` means ``cuda:LOCAL_RANK`` when CUDA is available, else the CPU; ``"cuda"`` means ``cuda:LOCAL_RANK``;
    ``"cpu"`` and ``"cuda:N"`` are taken as given. Calls ``torch.cuda.set_device`` for a GPU, so ``.cuda()``, NCCL
    and SyncBatchNorm use it too; raises :class:`~utils.device.DeviceUnavailableError` when ``LOCAL_RANK`` names a
    GPU this process cannot see (more processes per node than GPUs).
    """
    if preference is None:
        preference = ("cuda" if "nccl" in str(dist.get_backend()) else "cpu") if _running() else "auto"
    pref = str(preference).strip().lower()
    local_rank = get_local_rank()
    if pref == "auto":
        pref = "cuda" if torch.cuda.is_available() else "cpu"
    if pref == "cuda":
        pref = f"cuda:{local_rank}"
    dev = pick_device(pref)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    return dev


# --------------------------------------------------------------------------------------------------- the group
def init_from_env(device: str | torch.device = "auto", *, backend: str | None = None,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> torch.device:
    """Join the process group described by the environment and return this rank's device.

    Args:
        device: ``"auto"`` uses ``cuda:LOCAL_RANK`` when CUDA is available, else the CPU; ``"cpu"`` forces the CPU
            (see :func:`worker_device`).
        backend: override the backend (default: :func:`backend_for` the device: nccl on CUDA, gloo on CPU).
        timeout_s: seconds any collective may wait for the other ranks (instead of hanging): gloo then raises;
            NCCL's watchdog aborts the collective and tears the process down, with no Python exception to catch.

    The job comes from :func:`rendezvous_env` (torchrun's variables, or SLURM's). Without either (a plain
    ``python script.py``) it starts a one-process group on an in-memory store, so scripts also run un-launched.
    """
    dev = worker_device(device)
    if _running():
        return dev
    rdzv = rendezvous_env()
    backend = backend or backend_for(dev)
    kwargs: dict[str, Any] = {"timeout": datetime.timedelta(seconds=timeout_s)}
    if dev.type == "cuda" and backend == "nccl":
        kwargs["device_id"] = dev  # binds the NCCL communicator to this GPU at once
    if rdzv.source == "none":
        kwargs.update(store=dist.HashStore(), rank=0, world_size=1)
    else:
        os.environ.update({"RANK": str(rdzv.rank), "WORLD_SIZE": str(rdzv.world_size),
                           "LOCAL_RANK": str(rdzv.local_rank), "MASTER_ADDR": rdzv.master_addr or "127.0.0.1"})
        if rdzv.master_port is None:
            raise RuntimeError(f"RANK={rdzv.rank} and WORLD_SIZE={rdzv.world_size} are set but MASTER_PORT is not: "
                               "launch with torchrun, or export MASTER_PORT (the same free port for every rank)")
        os.environ["MASTER_PORT"] = rdzv.master_port
    dist.init_process_group(backend=backend, **kwargs)
    _register_exit_hook()
    return dev


def barrier() -> None:
    """Wait until every rank gets here (a no-op without a process group)."""
    if _running():
        dist.barrier()


def collect_before_exit() -> None:
    """Free the distributed objects nobody references any more, while the interpreter is fully alive.

    Two things keep such objects alive after the script lets go of them:

    * the first ``DistributedDataParallel`` module built in a process that has not imported torch's compiler modules
      yet can sit in a reference cycle: its constructor imports ``torch._dynamo`` and ``torch._inductor`` lazily, and
      a frame of that import stays referenced and holds the constructor's ``self``. Only the garbage collector frees
      it: with automatic collection on, the collections that run during that large import usually do so before the
      constructor returns; with ``gc.disable()`` it stays until an explicit collection;
    * DTensor (FSDP2's parameters) caches its sharding decisions, and every cached ``DTensorSpec`` holds its
      ``DeviceMesh``, which holds its process groups (``DeviceMesh._pg_registry``). So after an FSDP2 run the group,
      its gloo worker threads and rank 0's store thread live on after ``destroy_process_group()``, until the
      interpreter's shutdown. This function empties those caches (only if DTensor was imported).

    Whatever is left for the interpreter's shutdown is torn down mid-finalisation, and the process can abort with
    "terminate called without an active exception" (SIGABRT) after all its work is done (pytorch/pytorch#179291
    describes gloo's worker threads doing it): on a loaded 2-core machine, 8 of 20 two-process gloo runs of Day 17's
    worker script did, and CI saw Day 20's FSDP2 script do it once. :func:`init_from_env` registers this
    function with :mod:`atexit`, and :func:`cleanup` calls it before and after leaving the group. Objects the script
    still references (a global ``model``) stay alive all the same: run the training in a function, or ``del`` them,
    before :func:`cleanup`. One case this cannot free (torch 2.14, found by probes): a process group that already
    existed when ``torch.distributed._shard`` was first imported stays alive after ``destroy_process_group()``, with
    its threads, whatever the script lets go of. Importing FSDP2 or ``torch._dynamo`` imports it, and DDP's
    constructor imports ``torch._dynamo`` lazily. Day 20's script imports FSDP2 at its top, and its group is freed."""
    _clear_dtensor_caches()
    gc.collect()


_LRU_CACHE = type(functools.lru_cache(maxsize=None)(lambda: None))


def _clear_dtensor_caches() -> None:
    """Empty every cache DTensor keeps: its sharding-propagation caches (Python and C++), its redistribute planners,
    and each ``functools.lru_cache`` in a ``torch.distributed.tensor`` module (``MeshTopoInfo.build_from_mesh``
    among them). All are private and change between versions, hence the guarded lookups by name."""
    if "torch.distributed.tensor" not in sys.modules:      # never import DTensor just to clear it
        return
    # Through sys.modules, not torch.distributed.tensor.debug's helper: importing that module imports
    # torch._dynamo, which would pin a live group (see collect_before_exit).
    dtensor = getattr(sys.modules.get("torch.distributed.tensor._api"), "DTensor", None)
    propagator = getattr(getattr(dtensor, "_op_dispatcher", None), "sharding_propagator", None)
    clear_python = getattr(getattr(propagator, "propagate_op_sharding", None), "cache_clear", None)
    clear_cpp = getattr(torch._C, "_clear_DTensor_sharding_propagator_cache", None)
    for clear in (clear_python, clear_cpp):
        if callable(clear):
            try:
                clear()
            except (RuntimeError, TypeError):
                pass
    clear_planners = getattr(sys.modules.get("torch.distributed.tensor._redistribute"),
                             "clear_redistribute_planner_cache", None)
    if callable(clear_planners):
        clear_planners()
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith("torch.distributed.tensor"):
            continue
        for value in list(vars(module).values()):
            members = list(vars(value).values()) if isinstance(value, type) and value.__module__ == name else []
            for candidate in (value, *members):
                candidate = getattr(candidate, "__func__", candidate)          # a staticmethod's function
                if isinstance(candidate, _LRU_CACHE):
                    candidate.cache_clear()


_EXIT_HOOK_REGISTERED = False


def _register_exit_hook() -> None:
    global _EXIT_HOOK_REGISTERED
    if not _EXIT_HOOK_REGISTERED:
        atexit.register(collect_before_exit)
        _EXIT_HOOK_REGISTERED = True


def cleanup() -> None:
    """Free unreferenced distributed objects (:func:`collect_before_exit`), leave the process group, and collect
    again so that the group's threads stop now rather than at the interpreter's shutdown (safe to call twice or
    without a group)."""
    collect_before_exit()
    if _running():
        dist.destroy_process_group()
        collect_before_exit()

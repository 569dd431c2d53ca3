"""A DDP training script that survives a failure: torchrun restarts the group and it resumes from its last snapshot.

Run it with torchrun; on one machine, two "nodes" are two torchrun agents meeting at one rendezvous address::

    # in two terminals (or on two nodes, with node 0's address instead of 127.0.0.1 and --out on a file system both
    # nodes share: rank 0 writes the snapshot every rank resumes from)
    torchrun --nnodes=2 --nproc-per-node=1 --max-restarts=3 --rdzv-backend=c10d \\
             --rdzv-endpoint=127.0.0.1:29500 --rdzv-id=job1 -m utils.elastic_train --out run/

The structure is the one PyTorch's fault-tolerance tutorial gives every restartable script:

1. at start-up, **every** worker looks for the snapshot and, if there is one, loads it (weights, optimizer state,
   the step to continue from) instead of starting from scratch: after a restart, torchrun starts the script again
   from its first line, on every node;
2. rank 0 writes a snapshot every ``--snapshot-every`` optimizer steps, atomically (Day 26's
   :func:`utils.checkpoint.atomic_save` and :func:`utils.checkpoint.training_state`);
3. the data of step ``s`` is a function of ``s`` alone (a per-epoch permutation from ``seed + epoch``), so a resumed
   run sees exactly the batches the uninterrupted run saw.

``--fail-at-step K`` injects the failure: on its first pass through step ``K`` (a marker file makes it once per
job), the worker with global rank ``--fail-rank`` sends itself SIGKILL between its forward and its backward, as the
kernel's out-of-memory killer would: no exception, no clean-up, no message. Every worker appends what it did
(start, resume, snapshot, kill, finish) as one JSON line to ``<out>/events.jsonl``; rank 0 writes the final weights
to ``<out>/weights.pt``. :func:`train` is the whole job, callable from any process group (the uninterrupted
reference runs it with :func:`utils.processes.run_processes`).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path
from typing import Sequence

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from .checkpoint import atomic_save, load_checkpoint, restore_training_state, training_state
from .data import load_dataset

SNAPSHOT = "snapshot.pt"
WEIGHTS = "weights.pt"
EVENTS = "events.jsonl"
FAULT_MARKER = "fault_injected"


def build_model(seed: int = 0) -> nn.Module:
    """A small MLP for 8x8 digits (no BatchNorm and no dropout: its result depends on the data and the steps only)."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 64), nn.Tanh(), nn.Linear(64, 10))


def step_indices(step: int, global_batch: int, num_samples: int, seed: int = 0) -> torch.Tensor:
    """The sample indices of optimizer step ``step``: a slice of the permutation of its epoch (``seed + epoch``)."""
    per_epoch = num_samples // global_batch
    epoch, i = divmod(step, per_epoch)
    order = torch.randperm(num_samples, generator=torch.Generator().manual_seed(seed + epoch))
    return order[i * global_batch:(i + 1) * global_batch]


def log_event(out: Path, **event) -> None:
    """Append one JSON line to ``<out>/events.jsonl`` in a single write (O_APPEND: on a local file system the lines of processes never mix; on NFS, appends from several hosts can
    overwrite each other)."""
    line = (json.dumps({"time": time.time(), "pid": os.getpid(), **event}) + "\n").encode()
    fd = os.open(out / EVENTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_events(out: str | os.PathLike) -> list[dict]:
    """Every event the workers logged, in the order they were written."""
    path = Path(out) / EVENTS
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def inject_fault(out: Path, step: int, rank: int) -> None:
    """SIGKILL this process, once per job: the marker file is written (and flushed to disk) before the kill."""
    fd = os.open(out / FAULT_MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, f"rank {rank} at step {step}\n".encode())
    os.fsync(fd)
    os.close(fd)
    log_event(out, event="killed", rank=rank, step=step)
    os.kill(os.getpid(), signal.SIGKILL)


def train(out: str | os.PathLike, *, steps: int = 12, snapshot_every: int = 4, batch_per_rank: int = 16,
          lr: float = 0.1, seed: int = 0, fail_at_step: int = -1, fail_rank: int = 1) -> torch.Tensor:
    """Train in the running process group, resuming from ``<out>/snapshot.pt`` if it exists; return the weights.

    Every rank returns the same flat weight vector (DDP keeps the replicas equal); rank 0 also saves them.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cpu")
    images, labels = load_dataset("digits", image_size=8).train.tensors
    model = build_model(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    start = 0
    if (out / SNAPSHOT).exists():                         # every rank reads it: all replicas resume alike
        start = restore_training_state(load_checkpoint(out / SNAPSHOT, map_location=device), model, optimizer)["step"]
    log_event(out, event="start", rank=rank, world_size=world, resumed_from=start,
              restart_count=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
              node=int(os.environ.get("GROUP_RANK", "0")), agent=os.getppid())
    ddp = DDP(model)
    global_batch = batch_per_rank * world
    for step in range(start, steps):
        idx = step_indices(step, global_batch, len(images), seed)[rank * batch_per_rank:(rank + 1) * batch_per_rank]
        loss = nn.functional.cross_entropy(ddp(images[idx]), labels[idx])
        if step == fail_at_step and rank == fail_rank and not (out / FAULT_MARKER).exists():
            inject_fault(out, step, rank)                 # mid-step: after the forward, before the backward
        loss.backward()                                   # the gradient all-reduce: every rank must be here
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if rank == 0 and (step + 1) % snapshot_every == 0 and step + 1 < steps:
            atomic_save(training_state(model, optimizer, step=step + 1, epoch=0, samples_in_epoch=0),
                        out / SNAPSHOT, keep_previous=False)
            log_event(out, event="snapshot", rank=rank, step=step + 1)
    weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    if rank == 0:
        atomic_save({"model": model.state_dict(), "steps": steps}, out / WEIGHTS, keep_previous=False)
    log_event(out, event="finished", rank=rank, steps=steps)
    return weights


def worker(out: str, steps: int = 12, snapshot_every: int = 4, fail_at_step: int = -1, fail_rank: int = 1,
           timeout_s: float = 60.0) -> None:
    """The entry point of one worker when torchrun's agent runs a function (:func:`utils.launch.run_elastic_nodes`)
    instead of this file: join the group the agent described, train, leave."""
    from .distributed import cleanup, init_from_env

    init_from_env("cpu", timeout_s=timeout_s)
    train(out, steps=steps, snapshot_every=snapshot_every, fail_at_step=fail_at_step, fail_rank=fail_rank)
    print(f"rank {dist.get_rank()}: finished {steps} steps", flush=True)
    cleanup()


def main(argv: Sequence[str] | None = None) -> None:
    from .distributed import cleanup, init_from_env

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder for the snapshot, the weights and events.jsonl")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--snapshot-every", type=int, default=4)
    p.add_argument("--batch-per-rank", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--fail-at-step", type=int, default=-1, help="inject a SIGKILL at this step (-1: never)")
    p.add_argument("--fail-rank", type=int, default=1)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds a collective may wait for the others")
    args = p.parse_args(argv)
    init_from_env("cpu", timeout_s=args.timeout)
    train(args.out, steps=args.steps, snapshot_every=args.snapshot_every, batch_per_rank=args.batch_per_rank,
          lr=args.lr, fail_at_step=args.fail_at_step, fail_rank=args.fail_rank)
    print(f"rank {dist.get_rank()}: finished {args.steps} steps", flush=True)
    cleanup()


if __name__ == "__main__":
    main()

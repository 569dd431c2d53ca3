"""Checkpoints that survive crashes and resume exactly.

- :func:`atomic_save` writes to a temporary file in the same folder, flushes it to disk, then ``os.replace``\\ s it
  over the target and flushes the folder (:func:`fsync_directory`): a crash at any moment leaves either the old
  checkpoint or the new one, never half a file, and a power cut after it returns cannot undo the rename. Python
  promises an atomic ``os.replace`` on POSIX only (on Windows it calls ``MoveFileExW``, for which Microsoft
  documents no atomicity). The previous checkpoint is kept as ``<name>.prev`` so a bad new one can be rolled back.
- :func:`load_checkpoint` reads with ``torch.load(weights_only=True)``: a checkpoint is a pickle, and unpickling
  arbitrary objects can run arbitrary code, so only tensors and plain containers are rebuilt. Corrupt, unsafe or
  mismatched files become an error that says what is wrong.
- :func:`capture_rng_state` / :func:`restore_rng_state` cover Python, NumPy and torch (CPU, CUDA, MPS) generators,
  stored as plain lists, numbers and CPU ByteTensors so that ``weights_only=True`` can load them; they are restored
  from CPU tensors whatever ``map_location`` the checkpoint was loaded with.
- :class:`ResumableSampler` shuffles per epoch from a seed and can skip the samples already consumed, so a resumed
  run sees exactly the batches the uninterrupted run would have seen.
"""
from __future__ import annotations

import os
import pickle
import random
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import torch
from torch import nn
from torch.utils.data import Sampler

FORMAT_VERSION = 2  # 2: RNG states as plain data (lists, numbers, ByteTensors), loadable with weights_only


class CheckpointError(RuntimeError):
    """A checkpoint is missing, corrupt, or does not fit the model it is loaded into."""


def atomic_save(obj: Any, path: str | os.PathLike, keep_previous: bool = True) -> Path:
    """``torch.save(obj)`` to ``path`` atomically and durably. Returns the path.

    The temporary file lives in the destination folder because ``os.replace`` works only within one file system
    (across file systems it raises ``OSError`` with ``errno.EXDEV``; ``shutil.move`` would fall back to a copy, which
    is not atomic). The file is fsync'ed before the rename, and the folder after it, so that the new name itself
    reaches the disk. With ``keep_previous`` the old file is first hard-linked (or copied) to ``<path>.prev``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        if keep_previous and path.exists():
            _keep_previous(path)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)
    return path


def fsync_directory(folder: str | os.PathLike) -> bool:
    """Flush a folder's entries to disk, so that a rename into it survives a power cut. Returns whether it could.

    A rename changes the folder, not the file: ``os.fsync`` on the file makes its bytes durable, but the new name
    is durable only once the folder is flushed too. POSIX systems open a folder read-only for that; Windows cannot
    open a folder with ``os.open``, so there this does nothing and returns False.
    """
    if os.name != "posix":
        return False
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def _keep_previous(path: Path) -> None:
    """Make ``<path>.prev`` the current file without ever removing ``path`` (a hard link, or a copy)."""
    prev = path.with_name(path.name + ".prev")
    staged = path.with_name(f".{path.name}.prev.tmp")
    staged.unlink(missing_ok=True)
    try:
        os.link(path, staged)
    except OSError:
        shutil.copy2(path, staged)
    os.replace(staged, prev)


def _refused_global(error: Exception) -> str:
    """The line of torch.load's weights_only error that names the refused global (``Unsupported global: GLOBAL
    mod.Class ...``); torch's message ends with a link to its documentation, which names nothing."""
    lines = str(error).splitlines() or [""]
    return next((line.strip() for line in lines if "GLOBAL" in line), lines[-1])

def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu",
                    safe_globals: Sequence[Any] = ()) -> dict[str, Any]:
    """Load a checkpoint written by :func:`atomic_save` with ``weights_only=True``, with clear errors for missing,
    corrupt and unsafe files.

    A checkpoint made of state dicts, numbers, strings, lists and dicts (all :func:`training_state` writes) needs
    nothing more. For a class of your own stored in it (a config dataclass, say), pass it in ``safe_globals`` once
    you have checked it is harmless; it is allowed for this load only (``torch.serialization.safe_globals``).
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"no checkpoint at {path}: start from scratch, or point to an existing file")
    try:
        state = _weights_only_load(path, map_location, safe_globals)
    except pickle.UnpicklingError as e:
        if "was not an allowed global" in str(e):
            raise CheckpointError(
                f"{path} stores Python objects beyond tensors and plain containers, which weights_only loading "
                f"refuses because unpickling them can run arbitrary code ({_refused_global(e)[:200]}). Save "
                "plain data (state_dicts, numbers, strings, lists, dicts), pass the class in safe_globals if you "
                "trust it, or load a file you made yourself with torch.load(path, weights_only=False).") from e
        raise CheckpointError(_corrupt_message(path, e)) from e
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as e:
        # None (each tensor where it was saved) or a device: a file saved on a GPU fails on a machine without it.
        if isinstance(e, RuntimeError) and str(map_location) != "cpu" and _loads_on_cpu(path, safe_globals):
            raise CheckpointError(_device_message(path, e)) from e
        raise CheckpointError(_corrupt_message(path, e)) from e
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointError(f"{path} is not a training checkpoint (expected a dict with a 'model' entry)")
    return state


def _weights_only_load(path: Path, map_location: Any, safe_globals: Sequence[Any]) -> Any:
    with torch.serialization.safe_globals(list(safe_globals)):
        return torch.load(path, map_location=map_location, weights_only=True)


def _loads_on_cpu(path: Path, safe_globals: Sequence[Any]) -> bool:
    """Whether the file loads onto the CPU: after a failed load onto another device, it tells a file that is fine
    (the device is missing or full) from one that is corrupt."""
    try:
        _weights_only_load(path, "cpu", safe_globals)
        return True
    except Exception:
        return False


def _device_message(path: Path, error: BaseException) -> str:
    return (f"checkpoint {path} could not be loaded onto the device map_location names (with None: the device it "
            f"was saved from) ({type(error).__name__}: {error}). The file itself is fine (it loads onto the CPU): "
            "load it with map_location='cpu' and move what you need.")


def _corrupt_message(path: Path, error: BaseException) -> str:
    prev = path.with_name(path.name + ".prev")
    hint = f" The previous checkpoint {prev} may still be good." if prev.exists() else ""
    what = ("could not be read (a folder, such as a torch.distributed.checkpoint save, a file without read "
            "permission, or a disk error)" if isinstance(error, OSError) else "is corrupt or truncated")
    return f"checkpoint {path} {what} ({type(error).__name__}: {error}).{hint}"


def load_model_state(model: nn.Module, state_dict: dict[str, torch.Tensor], source: str = "checkpoint") -> None:
    """``model.load_state_dict`` with a readable error listing missing, unexpected and mis-shaped entries."""
    own = model.state_dict()
    missing = sorted(set(own) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(own))
    shapes = [f"{k}: {tuple(state_dict[k].shape)} in {source}, {tuple(v.shape)} in the model"
              for k, v in own.items() if k in state_dict and tuple(state_dict[k].shape) != tuple(v.shape)]
    if missing or unexpected or shapes:
        parts = []
        if missing:
            parts.append(f"missing {len(missing)} (e.g. {missing[:3]})")
        if unexpected:
            parts.append(f"unexpected {len(unexpected)} (e.g. {unexpected[:3]})")
        if shapes:
            parts.append(f"{len(shapes)} with another shape (e.g. {shapes[:2]})")
        raise CheckpointError(f"{source} does not match this model: " + "; ".join(parts) +
                              ". Was it saved from another architecture or number of classes?")
    model.load_state_dict(state_dict)


def capture_rng_state() -> dict[str, Any]:
    """Every random generator's state: Python, NumPy, torch CPU, (if present) every CUDA device and Apple's MPS
    device (dropout on a Mac draws from it), as plain lists, numbers and CPU ByteTensors (what
    ``torch.load(weights_only=True)`` accepts)."""
    version, internal, gauss_next = random.getstate()
    numpy_state = np.random.get_state(legacy=False)
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss_next],
        "numpy": {"bit_generator": numpy_state["bit_generator"], "key": numpy_state["state"]["key"].tolist(),
                  "pos": int(numpy_state["state"]["pos"]), "has_gauss": int(numpy_state["has_gauss"]),
                  "gauss": float(numpy_state["gauss"])},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if torch.backends.mps.is_available():
        state["mps"] = torch.mps.get_rng_state()
    return state


def _cpu_bytes(t: torch.Tensor) -> torch.Tensor:
    """The RNG setters accept only a CPU ByteTensor; ``load_checkpoint(map_location="cuda")`` moved it to the GPU."""
    return t.detach().to(device="cpu", dtype=torch.uint8)


def restore_rng_state(state: dict[str, Any]) -> None:
    """Put back what :func:`capture_rng_state` returned, from CPU copies of the torch states. CUDA states are restored
    on the devices present (the first ``min(saved, visible)`` of them), the MPS state where MPS is present."""
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    np_state = state["numpy"]
    np.random.set_state((np_state["bit_generator"], np.asarray(np_state["key"], dtype=np.uint32), np_state["pos"],
                         np_state["has_gauss"], np_state["gauss"]))
    torch.set_rng_state(_cpu_bytes(state["torch"]))
    if "cuda" in state and torch.cuda.is_available():
        for index, cuda_state in enumerate(state["cuda"][:torch.cuda.device_count()]):
            torch.cuda.set_rng_state(_cpu_bytes(cuda_state), index)
    if "mps" in state and torch.backends.mps.is_available():
        torch.mps.set_rng_state(_cpu_bytes(state["mps"]))


class ResumableSampler(Sampler[int]):
    """Random order per epoch, from ``seed + epoch``; ``skip(n)`` drops the first ``n`` samples of this epoch.

    Call ``set_epoch(epoch)`` before each epoch (as with DistributedSampler). Its position is the loop's business:
    the loop counts the samples it has consumed and stores them in the checkpoint; after a resume,
    ``set_epoch(e)`` then ``skip(consumed)`` continues exactly where the interrupted run stopped.
    """

    def __init__(self, num_samples: int, seed: int = 0):
        if num_samples <= 0:
            raise ValueError(f"num_samples must be positive, got {num_samples}")
        self.num_samples = num_samples
        self.seed = seed
        self.epoch = 0
        self.start = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.start = 0

    def skip(self, consumed: int) -> None:
        if not 0 <= consumed <= self.num_samples:
            raise ValueError(f"cannot skip {consumed} of {self.num_samples} samples")
        self.start = consumed

    def __iter__(self) -> Iterator[int]:
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(self.num_samples, generator=g).tolist()
        return iter(order[self.start:])

    def __len__(self) -> int:
        return self.num_samples - self.start

    def state_dict(self) -> dict[str, int]:
        return {"seed": self.seed, "epoch": self.epoch}


def training_state(model: nn.Module, optimizer: torch.optim.Optimizer, *, step: int, epoch: int,
                   samples_in_epoch: int, scheduler: Any = None, scaler: Any = None,
                   extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything exact resume needs, as one dict for :func:`atomic_save`."""
    return {
        "format_version": FORMAT_VERSION,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "scaler": scaler.state_dict() if scaler is not None else None,
        "rng": capture_rng_state(),
        "step": step,
        "epoch": epoch,
        "samples_in_epoch": samples_in_epoch,
        "extra": extra or {},
    }


def restore_training_state(state: dict[str, Any], model: nn.Module, optimizer: torch.optim.Optimizer,
                           scheduler: Any = None, scaler: Any = None) -> dict[str, int]:
    """Load what :func:`training_state` saved into live objects; returns ``{step, epoch, samples_in_epoch}``."""
    if state.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"checkpoint format {state.get('format_version')!r}, this code reads {FORMAT_VERSION}")
    load_model_state(model, state["model"])
    optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None:
        if state["scheduler"] is None:
            raise CheckpointError("the checkpoint has no scheduler state, but a scheduler was given")
        scheduler.load_state_dict(state["scheduler"])
    if scaler is not None and state["scaler"] is not None:
        scaler.load_state_dict(state["scaler"])
    restore_rng_state(state["rng"])
    return {"step": state["step"], "epoch": state["epoch"], "samples_in_epoch": state["samples_in_epoch"]}

"""Kill a training script on purpose, and compare what it saved with a run that was never killed.

A resume that works after a polite stop (right after a checkpoint, in the same process) can still fail after a real
crash. :func:`start_faulty_run` runs a script in a fresh process with at most one fault armed:

* ``kill_after_step=k``: ``SIGKILL`` right after the k-th optimizer step (a hook that ``torch.optim`` calls after
  every ``step()``, ``register_optimizer_step_post_hook``), as the out-of-memory killer or a pre-empted machine
  would;
* ``kill_in_save=j``: ``SIGKILL`` half-way through the j-th ``torch.save`` call, after the first half of the
  serialised bytes reached the file, so the file is left truncated.

The process runs this module as its main program (``python -m utils.fault_injection SCRIPT ARGS...``), which arms
the fault from two environment variables and then runs ``SCRIPT`` as ``__main__``. When the script's Python exits
(a normal end, an exception or ``sys.exit``; not a ``SIGKILL``) it prints ``optimizer steps run: N``;
:func:`finish` reads that line back. :func:`state_differences` compares two saved states bit for bit and names every
entry that differs. POSIX only (``SIGKILL`` does not exist on Windows).
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import torch

from .stderr_capture import capture_stderr

__all__ = ["FaultyRun", "finish", "same_bits", "start_faulty_run", "state_differences", "summarize_differences"]

_STEPS_LINE = "optimizer steps run: "


class FaultyRun(NamedTuple):
    """How a run ended: ``returncode`` (0 for a normal end, ``-9`` when ``SIGKILL`` stopped it, None when it timed
    out), ``steps`` (the optimizer steps it ran, counted up to the moment Python exited: after a normal end, an
    exception or ``sys.exit``; None after a ``SIGKILL`` or a timeout) and ``stderr_tail`` (the last 8 lines of its
    standard error, or why it timed out)."""

    returncode: int | None
    steps: int | None
    stderr_tail: str


def start_faulty_run(script: str | Path, args: Sequence[Any] = (), kill_after_step: int = 0, kill_in_save: int = 0,
                     cpu_only: bool = True) -> subprocess.Popen:
    """Start ``python SCRIPT ARGS...`` in a fresh process with at most one fault armed (0 disarms it); returns at
    once. ``cpu_only`` hides every CUDA GPU from it (``CUDA_VISIBLE_DEVICES=""``; a Mac's MPS stays visible, so a
    script that should stay on the CPU must not pick MPS itself) and gives it one OpenMP thread, so that runs started
    side by side do not fight over the cores, and every run compared computes with the same thread count (a CPU
    result can depend on it). Pass the process to :func:`finish`."""
    if kill_after_step < 0 or kill_in_save < 0:
        raise ValueError(f"kill_after_step={kill_after_step} and kill_in_save={kill_in_save}: use 0 (no fault) or "
                         "the 1-based number of the optimizer step or torch.save call to die in")
    if kill_after_step and kill_in_save:
        raise ValueError("arm one fault at a time: kill_after_step or kill_in_save, not both")
    script = Path(script)
    if not script.is_file():
        raise FileNotFoundError(f"{script}: write the script first (the cell with %%writefile)")
    if not hasattr(signal, "SIGKILL"):
        raise OSError("SIGKILL fault injection needs Linux or macOS (Windows has no SIGKILL)")
    env = dict(os.environ, KILL_AFTER_STEP=str(kill_after_step), KILL_IN_SAVE=str(kill_in_save))
    if cpu_only:
        env.update(OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    cmd = [sys.executable, "-m", __name__, str(script), *map(str, args)]
    with capture_stderr():       # a library that logs while the process starts must not reach a test cell
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout_s: float = 240) -> FaultyRun:
    """Wait for a run of :func:`start_faulty_run` (at most ``timeout_s`` seconds, then kill it) and say how it ended."""
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return FaultyRun(None, None, f"timed out after {timeout_s} s")
    found = re.search(re.escape(_STEPS_LINE) + r"(\d+)", stdout)
    return FaultyRun(proc.returncode, int(found.group(1)) if found else None,
                     "\n".join(stderr.strip().splitlines()[-8:]))


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when two tensors have the same dtype, shape and bytes: a NaN matches the same NaN, and -0.0 does not
    match 0.0 (``torch.equal`` compares values, so it says the opposite of both). ``b`` is moved to ``a``'s device.
    Sparse tensors are compared dense, quantized ones by their integers and quantization parameters, conjugate and
    negative views by the values they stand for."""
    if a.dtype != b.dtype or a.shape != b.shape or a.layout != b.layout or a.is_quantized != b.is_quantized:
        return False
    a, b = a.detach(), b.detach().to(a.device)
    if a.is_quantized:
        if a.qscheme() != b.qscheme():
            return False
        if a.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            params_equal = a.q_scale() == b.q_scale() and a.q_zero_point() == b.q_zero_point()
        else:
            params_equal = (a.q_per_channel_axis() == b.q_per_channel_axis()
                            and same_bits(a.q_per_channel_scales(), b.q_per_channel_scales())
                            and same_bits(a.q_per_channel_zero_points(), b.q_per_channel_zero_points()))
        return params_equal and same_bits(a.int_repr(), b.int_repr())
    if a.layout != torch.strided:
        a, b = a.to_dense(), b.to_dense()
    as_bytes = lambda t: (t.resolve_conj().resolve_neg().reshape(-1)                                # noqa: E731
                          .clone(memory_format=torch.contiguous_format).view(torch.uint8))
    return torch.equal(as_bytes(a), as_bytes(b))


def state_differences(a: Any, b: Any, path: str = "final") -> list[str]:
    """Paths of the entries where two saved states differ: tensors compared bit for bit (:func:`same_bits`),
    dicts by their keys and values, lists and tuples item by item, anything else with ``==``. Empty when equal."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        same = isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and same_bits(a, b)
        return [] if same else [path]
    if isinstance(a, dict) and isinstance(b, dict):
        diffs = [] if set(a) == set(b) else [f"{path} keys {sorted(map(str, set(a) ^ set(b)))}"]
        for k in sorted(set(a) & set(b), key=str):
            diffs += state_differences(a[k], b[k], f"{path}[{k!r}]")
        return diffs
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path} (length {len(a)} vs {len(b)})"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in state_differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [path]


def summarize_differences(diffs: list[str]) -> str:
    """Every differing entry, none left out: list positions and integer keys (an optimizer's parameter numbers)
    folded into ``[*]``, with a count where several fold together."""
    groups: dict[str, int] = {}
    for d in diffs:
        key = re.sub(r"\[\d+\]", "[*]", d)
        groups[key] = groups.get(key, 0) + 1
    return "; ".join(k if n == 1 else f"{k} ({n} entries)" for k, n in groups.items())


def _run_with_faults(argv: list[str]) -> None:
    """The child process: arm the fault the environment asks for, then run ``argv[0]`` as ``__main__``."""
    import atexit
    import io
    import runpy

    from torch.optim.optimizer import register_optimizer_step_post_hook

    kill_after_step = int(os.environ.get("KILL_AFTER_STEP", "0"))
    kill_in_save = int(os.environ.get("KILL_IN_SAVE", "0"))
    counts = {"steps": 0, "saves": 0}

    def after_step(optimizer, args, kwargs):
        counts["steps"] += 1
        if counts["steps"] == kill_after_step:
            os.kill(os.getpid(), signal.SIGKILL)

    real_save = torch.save

    def save_then_maybe_die(obj, f, *args, **kwargs):
        counts["saves"] += 1
        if counts["saves"] != kill_in_save:
            return real_save(obj, f, *args, **kwargs)
        buffer = io.BytesIO()
        real_save(obj, buffer)
        half = buffer.getvalue()[: len(buffer.getvalue()) // 2]
        if hasattr(f, "write"):
            f.write(half)
            f.flush()
        else:
            with open(f, "wb") as fh:
                fh.write(half)
        os.kill(os.getpid(), signal.SIGKILL)

    register_optimizer_step_post_hook(after_step)
    torch.save = save_then_maybe_die
    atexit.register(lambda: print(f"{_STEPS_LINE}{counts['steps']}", flush=True))
    script = os.path.abspath(argv[0])
    sys.argv = [script] + argv[1:]
    sys.path.insert(0, os.path.dirname(script))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -m utils.fault_injection SCRIPT [ARGS...] (faults from KILL_AFTER_STEP, KILL_IN_SAVE)")
    _run_with_faults(sys.argv[1:])

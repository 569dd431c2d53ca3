"""Fast-path knobs: the global backend flags and per-object options that make training faster on a GPU.

:func:`plan_fast_path` decides, from a description of the device and the workload, which knobs to turn on and why
(a pure function: it reads and changes no global state). :func:`apply_fast_path` applies that plan to the torch
backends of *this* process and returns what it set, what it skipped, and why. :func:`fast_path_flags` and
:func:`restore_fast_path_flags` snapshot and restore the global flags, so a notebook can try a knob and undo it.

The knobs:

- ``cudnn_benchmark``: ``torch.backends.cudnn.benchmark``. cuDNN times several convolution algorithms for each new
  input shape and keeps the fastest. CUDA only; wasteful when input shapes vary (it re-tunes for every new shape).
  "New" means new to this *process*: cuDNN keeps the plan of every convolution it has run for the life of the
  process, under a key that leaves the flag out, so a shape already run with the flag off keeps its heuristic plan
  after the flag is switched on. :func:`run_with_fresh_plans` runs a measurement that turns it on in a fresh
  process, so that it really autotunes; where the GPU admits no second process (exclusive-process compute mode) it
  runs it here and labels it :data:`PLANS_REUSED`.
- ``tf32``: ``torch.backends.cuda.matmul.fp32_precision`` and ``torch.backends.cudnn.conv.fp32_precision``
  (``"tf32"`` or ``"ieee"``; the legacy ``allow_tf32`` flags and ``torch.set_float32_matmul_precision`` are kept in
  agreement by :mod:`utils.tf32`): fp32 matmuls and convolutions on TF32 tensor cores (10-bit mantissa). Needs
  compute capability >= 8.0 (Ampere); on older GPUs and on CPUs the switches change nothing.
- ``channels_last``: NHWC memory format for 4-D activations and conv weights; tensor cores (compute capability
  >= 7.0) read NHWC natively, so NCHW costs transposes. Only for convolutional models.
- ``optimizer_impl``: ``"fused"`` (the whole update's arithmetic in one kernel per launch; CUDA, and CPU since
  PyTorch 2.4), ``"foreach"`` (multi-tensor ops, fewer launches) or ``"for-loop"`` (one small op per parameter and
  per step of the formula).
- ``pin_memory``: page-locked host buffers in the DataLoader, which make ``.to(device, non_blocking=True)`` a real
  asynchronous copy. Needs CUDA; without an accelerator torch ignores it with a warning.
- ``set_to_none``: ``optimizer.zero_grad(set_to_none=True)``; the default since PyTorch 2.0 on every device.
"""
from __future__ import annotations

import gc
import pickle
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from .processes import dumps_by_value, run_processes
from .stderr_capture import capture_stderr
from .tf32 import restore_tf32_flags, set_tf32, tf32_flags

__all__ = ["FastPathDecision", "plan_fast_path", "apply_fast_path", "fast_path_flags", "restore_fast_path_flags",
           "multi_tensor_apply_launches", "multi_tensor_apply_table", "needs_fresh_process", "call_in_fresh_process",
           "run_with_fresh_plans", "FreshPlansRun", "FreshProcessUnavailable", "PLANS_REUSED"]

TF32_MIN_CAPABILITY = (8, 0)
TENSOR_CORE_MIN_CAPABILITY = (7, 0)


@dataclass(frozen=True)
class FastPathDecision:
    """One knob: the value chosen and the reason, in words."""

    value: Any
    why: str


def plan_fast_path(device_type: str, compute_capability: tuple[int, int] | None = None, *,
                   variable_input_shapes: bool = False, conv_model: bool = True) -> dict[str, FastPathDecision]:
    """Choose the fast-path knobs for a described device and workload, without touching any global state.

    Args:
        device_type: ``"cpu"``, ``"cuda"`` or ``"mps"``.
        compute_capability: ``(major, minor)`` of the CUDA device (e.g. ``(8, 0)`` for an A100); ignored off CUDA.
            ``None`` on CUDA is treated as "unknown": no TF32 and no channels_last.
        variable_input_shapes: the input shape changes from step to step (variable image sizes or sequence
            lengths). One smaller last batch per epoch costs one extra tuning run and does not count.
        conv_model: the model is mostly 2-D convolutions (channels_last only helps those).

    Returns:
        ``{knob: FastPathDecision}`` for the knobs listed in the module docstring.
    """
    if device_type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device_type must be 'cpu', 'cuda' or 'mps', got {device_type!r}")
    cuda = device_type == "cuda"
    cc = tuple(compute_capability) if (cuda and compute_capability is not None) else None
    plan: dict[str, FastPathDecision] = {}

    if not cuda:
        plan["cudnn_benchmark"] = FastPathDecision(False, f"cuDNN is a CUDA library; no effect on {device_type}")
    elif variable_input_shapes:
        plan["cudnn_benchmark"] = FastPathDecision(False, "input shapes vary: cuDNN would re-tune for every new shape")
    elif not conv_model:
        plan["cudnn_benchmark"] = FastPathDecision(False, "no convolutions: nothing for cuDNN to tune")
    else:
        plan["cudnn_benchmark"] = FastPathDecision(True, "fixed shapes: tune each convolution once, reuse the fastest")

    if not cuda:
        plan["tf32"] = FastPathDecision(False, f"TF32 is an NVIDIA tensor-core format; no effect on {device_type}")
    elif cc is None or cc < TF32_MIN_CAPABILITY:
        plan["tf32"] = FastPathDecision(False, "compute capability unknown: TF32 left off" if cc is None else
                                        f"compute capability {cc} < 8.0: no TF32 tensor cores")
    else:
        plan["tf32"] = FastPathDecision(True, f"compute capability {cc} >= 8.0: fp32 matmul/conv on TF32 tensor cores")

    if not conv_model:
        plan["channels_last"] = FastPathDecision(False, "no 2-D convolutions: memory format does not matter")
    elif not cuda:
        plan["channels_last"] = FastPathDecision(False, f"no tensor cores on {device_type}: measure before using it")
    elif cc is None or cc < TENSOR_CORE_MIN_CAPABILITY:
        plan["channels_last"] = FastPathDecision(False, "compute capability unknown: channels_last left off"
                                                 if cc is None else f"compute capability {cc} < 7.0: no tensor cores")
    else:
        plan["channels_last"] = FastPathDecision(True, "tensor cores read NHWC natively: no transposes per conv")

    if cuda:
        plan["optimizer_impl"] = FastPathDecision("fused", "CUDA: the update's arithmetic in one kernel per launch")
    elif device_type == "cpu":
        plan["optimizer_impl"] = FastPathDecision("fused", "CPU: fused Adam/AdamW/SGD kernels exist since PyTorch "
                                                           "2.4 (one vectorised loop per tensor)")
    else:
        plan["optimizer_impl"] = FastPathDecision("foreach", f"{device_type}: multi-tensor ops (fused kernels are "
                                                            "not available for every optimizer here)")

    plan["pin_memory"] = FastPathDecision(cuda, "page-locked buffers make non_blocking copies asynchronous" if cuda
                                          else f"no CUDA host-to-device copy on {device_type}")
    plan["set_to_none"] = FastPathDecision(True, "free gradients instead of writing zeros (default since 2.0)")
    return plan


#: ``ATen/native/cuda/MultiTensorApply.cuh``: elements per block ("chunk"), and per launch the most tensors (by the
#: number of lists an op reads and writes, its "depth", 1 to 5) and blocks; the CUDA 13 builds of PyTorch 2.14 allow
#: larger launches (2.11's CUDA 13 build does not: :func:`multi_tensor_apply_table`).
MTA_CHUNK_ELEMENTS = 65_536
MTA_MAX_TENSORS = {12: (110, 64, 48, 36, 30), 13: (770, 448, 336, 252, 210)}
MTA_MAX_BLOCKS = {12: 320, 13: 2240}


def multi_tensor_apply_table(header: Path | None = None) -> int:
    """Which ``multi_tensor_apply`` limits this torch compiled in: 13 (``MTA_MAX_TENSORS[13]``, 2,240 blocks) for a CUDA
    13 build whose ``MultiTensorApply.cuh`` has the CUDA 13 branch (PyTorch 2.14's does; 2.11's cu130 build's does
    not), else 12. Read from the header the wheel installs under ``torch/include`` (``header`` overrides it: tests)."""
    if not torch.version.cuda or int(torch.version.cuda.split(".")[0]) < 13:
        return 12
    if header is None:
        header = Path(torch.__file__).parent / "include" / "ATen" / "native" / "cuda" / "MultiTensorApply.cuh"
    try:
        return 13 if "CUDART_VERSION >= 13000" in header.read_text() else 12
    except OSError:                                # a build without headers: 2.14 is the first version seen with it
        return 13 if tuple(int(n) for n in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 14) else 12


def multi_tensor_apply_launches(numels: list[int], depth: int, cuda_major: int | None = None) -> int:
    """Kernel launches of one CUDA ``_foreach_*`` (or fused optimizer) call over tensors of ``numels`` elements.

    Replays ``multi_tensor_apply``'s loop: tensors are packed into a launch chunk by chunk (``MTA_CHUNK_ELEMENTS``
    each) until the launch holds its most tensors (a tensor counts once all its chunks are in) or its most blocks;
    the rest goes into the next launch. ``depth`` is the number of tensor lists the op touches (``_foreach_mul_(xs,
    s)``: 1; ``_foreach_add_(xs, ys)``: 2). ``cuda_major`` picks the limits (default:
    :func:`multi_tensor_apply_table`, the ones this torch compiled in). Ops that take a list of scalars
    (``_foreach_mul_(xs, [s0, s1, ...])``) have lower limits at depth 1 (96 tensors, 672 with CUDA 13): for them
    the count is a lower bound. Every optimizer path the course times has depth 2 or more.
    """
    if not 1 <= depth <= 5:
        raise ValueError(f"depth is 1 to 5 tensor lists, got {depth}")
    if cuda_major is None:
        cuda_major = multi_tensor_apply_table()
    limits = 13 if cuda_major >= 13 else 12
    max_tensors, max_blocks = MTA_MAX_TENSORS[limits][depth - 1], MTA_MAX_BLOCKS[limits]
    launches = tensors = blocks = 0
    for numel in numels:
        if numel == 0:
            continue
        tensors += 1
        chunks = -(-numel // MTA_CHUNK_ELEMENTS)
        for chunk in range(chunks):
            blocks += 1
            last_chunk = chunk == chunks - 1
            if (tensors == max_tensors and last_chunk) or blocks == max_blocks:
                launches += 1
                blocks = 0
                tensors = 0 if last_chunk else 1
    return launches + (1 if blocks else 0)


def fast_path_flags() -> dict[str, Any]:
    """Snapshot of the global backend flags that :func:`apply_fast_path` may change: ``cudnn.benchmark`` and every
    TF32 switch (:func:`utils.tf32.tf32_flags`)."""
    return {"cudnn.benchmark": torch.backends.cudnn.benchmark, **tf32_flags()}


def restore_fast_path_flags(flags: dict[str, Any]) -> None:
    """Restore a snapshot taken with :func:`fast_path_flags`."""
    if "cudnn.benchmark" not in flags:
        raise KeyError("not a fast_path_flags() snapshot: no 'cudnn.benchmark' key")
    torch.backends.cudnn.benchmark = flags["cudnn.benchmark"]
    restore_tf32_flags(flags)


def apply_fast_path(device: torch.device | str, *, variable_input_shapes: bool = False, conv_model: bool = True,
                    tf32: bool = True) -> dict[str, dict[str, Any]]:
    """Apply :func:`plan_fast_path` for ``device`` to this process's torch backends.

    Sets ``cudnn.benchmark`` and the TF32 flags (only where they apply: on a CPU both are left as they are).
    ``tf32=False`` keeps full fp32 even on Ampere+ (for numerics checks). The per-object knobs
    (``channels_last``, ``optimizer_impl``, ``pin_memory``, ``set_to_none``) cannot be set globally: they are
    returned for the caller to use.

    Returns:
        ``{knob: {"value": ..., "applied": bool, "why": str}}``; ``applied`` is True only for global flags that
        this call actually set.
    """
    device = torch.device(device)
    cc = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    plan = plan_fast_path(device.type, cc, variable_input_shapes=variable_input_shapes, conv_model=conv_model)
    report: dict[str, dict[str, Any]] = {}
    for knob, decision in plan.items():
        report[knob] = {"value": decision.value, "applied": False, "why": decision.why}

    if device.type == "cuda":
        torch.backends.cudnn.benchmark = bool(plan["cudnn_benchmark"].value)
        report["cudnn_benchmark"]["applied"] = True
        use_tf32 = bool(plan["tf32"].value) and tf32
        set_tf32(use_tf32)
        report["tf32"].update(value=use_tf32, applied=True)
        if plan["tf32"].value and not tf32:
            report["tf32"]["why"] = "TF32 available but turned off by the caller (tf32=False)"
    return report


# ---------------------------------------------------------------------------------------------------------------------
# cudnn.benchmark only acts on convolutions the process has not planned yet.
#
# aten/src/ATen/native/cudnn/Conv_v8.cpp, run_single_conv: the plan cache (thread_local, kept for the life of the
# process and its threads) is looked up first, under a key of the convolution's shapes, strides, dtype, layout,
# padding, stride, dilation, groups, `deterministic` and `allow_tf32`; only on a miss does the code read `benchmark`
# to choose between cuDNN's heuristic and timing the candidates. Conv_v7.cpp's algorithm caches are keyed the same
# way. So within one process, a shape first run with the flag off keeps its heuristic plan when the flag is switched
# on, and an A/B test of the flag in one process compares the heuristic with itself.

def needs_fresh_process(device: torch.device | str, benchmark: bool | None) -> bool:
    """Whether a measurement that runs convolutions on ``device`` with ``cudnn.benchmark`` set to ``benchmark``
    (``None``: the flag as it is now) must run in a fresh process to be autotuned: True on CUDA (cuDNN; MIOpen on
    ROCm caches the same way) when the flag is on; False elsewhere (no cuDNN, nothing cached by the flag)."""
    on = torch.backends.cudnn.benchmark if benchmark is None else bool(benchmark)
    return torch.device(device).type == "cuda" and on


#: The label of a flag-on measurement that could not run in a fresh process (the GPU check kit's recorder says the same
#: of its rows): cuDNN reused the plans this process holds, so the measurement does not show what autotuning buys.
PLANS_REUSED = "plans reused: autotuning not measured"


class FreshProcessUnavailable(RuntimeError):
    """A fresh process cannot open the CUDA device: the GPU is in exclusive-process compute mode (one CUDA context
    per device, and this process holds it), or the second context found no room."""


def _second_context_refused(device: torch.device) -> str | None:
    """Why NVML says a second process cannot open CUDA ``device`` now, or ``None`` (it can, or NVML cannot tell).

    A GPU in EXCLUSIVE_PROCESS compute mode (``nvidia-smi -c 3``, set on some shared clusters) admits one CUDA
    context; once this process holds it, another process's first CUDA call fails with "CUDA-capable device(s) is/are
    busy or unavailable"."""
    if device.type != "cuda" or not torch.cuda.is_initialized():
        return None                                # no context here yet: the fresh process may take the GPU
    try:
        import pynvml                              # nvidia-ml-py, a course requirement

        from .monitoring import nvml_handle_for_cuda_device
        pynvml.nvmlInit()
        try:
            index = torch.cuda.current_device() if device.index is None else device.index
            handle, _ = nvml_handle_for_cuda_device(pynvml, index)
            mode = pynvml.nvmlDeviceGetComputeMode(handle)
        finally:
            pynvml.nvmlShutdown()
    except Exception:                              # no NVML, a MIG slice without the query, ...: the child will tell
        return None
    if mode in (pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS, pynvml.NVML_COMPUTEMODE_EXCLUSIVE_THREAD):
        return (f"{device} is in exclusive-process compute mode and this process already holds its one CUDA "
                "context")
    return None


def _backend_flags() -> dict[str, Any]:
    """The flags a fresh process must share with this one to compute the same way: :func:`fast_path_flags`,
    cuDNN's deterministic mode and ``torch.use_deterministic_algorithms`` with its ``warn_only``."""
    return {**fast_path_flags(), "cudnn.deterministic": torch.backends.cudnn.deterministic,
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled()}


def _call_with_flags(rank: int, world_size: int, job: bytes, flags: dict[str, Any],
                     device: str | None = None) -> tuple[str, Any, str]:
    """The fresh process's side of :func:`call_in_fresh_process`: open CUDA ``device`` (if one is given), this
    process's flags, then ``fn`` of ``job`` (the pickled ``(fn, args, kwargs)``). Returns ``("ok", value, "")``,
    ``("raised", the exception, its traceback)`` so that the caller can raise the same type, or ``("no device",
    the error in words, its traceback)`` when the device could not be opened, before ``fn`` ran."""
    if device is not None and torch.device(device).type == "cuda":
        try:                                       # creates this process's CUDA context, or fails if the GPU refuses
            torch.empty(1, device=device)
            torch.cuda.synchronize(device)
        except Exception as err:
            return "no device", f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]}", traceback.format_exc()
    fn, args, kwargs = pickle.loads(job)
    restore_fast_path_flags(flags)
    torch.backends.cudnn.deterministic = flags["cudnn.deterministic"]
    torch.use_deterministic_algorithms(flags["deterministic_algorithms"], warn_only=flags["deterministic_warn_only"])
    try:
        return "ok", fn(*args, **kwargs), ""
    except Exception as err:
        return "raised", err, traceback.format_exc()


def call_in_fresh_process(fn: Callable[..., Any], args: tuple = (), kwargs: dict[str, Any] | None = None, *,
                          device: torch.device | str | None = None, timeout_s: float = 1800.0) -> Any:
    """Return ``fn(*args, **kwargs)`` computed in a fresh, spawned Python process: no cuDNN plan, no allocator cache,
    no autograd thread carried over from this one. It starts with this process's backend flags
    (``cudnn.benchmark``, TF32, deterministic modes) and torch thread count; ``fn`` may set its own.

    ``fn``, its arguments and its value travel by pickling (a function defined in a notebook goes by value, with
    ``cloudpickle``: see :mod:`utils.processes`, which starts the process); CUDA tensors are better built inside
    ``fn``. Standard error of the process is kept out of a notebook cell. An exception ``fn`` raises is raised here,
    of the same type (``torch.OutOfMemoryError`` stays one) with the fresh process's traceback in its notes; a
    process that dies, runs past ``timeout_s`` or returns what cannot be pickled raises ``RuntimeError``. This
    process's cached GPU memory is returned to the driver first, so that the fresh process finds it free. Starting
    one costs seconds (a new interpreter imports torch), and on a GPU a second CUDA context: a few hundred MB of
    device memory that a run in this process would not need, next to what this process's live tensors hold.

    ``device``: the CUDA device ``fn`` will use. The fresh process opens it before ``fn`` runs; where it cannot (a
    GPU in exclusive-process compute mode, which NVML reports before anything starts, or no memory left for its
    context), :class:`FreshProcessUnavailable` is raised and ``fn`` has not run. ``timeout_s``: seconds.
    """
    name = getattr(fn, "__qualname__", repr(fn))
    device = None if device is None else torch.device(device)
    refused = None if device is None else _second_context_refused(device)
    if refused:
        raise FreshProcessUnavailable(f"no fresh process for {name}: {refused}")
    gc.collect()
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    with capture_stderr():                         # what the new interpreter prints before its own redirect
        try:
            job = dumps_by_value((fn, tuple(args), dict(kwargs or {})))
        except Exception as err:
            raise TypeError(f"{name}, its arguments and the notebook globals it uses go to the fresh process by "
                            f"pickling, which failed: {type(err).__name__}: {err}. Build what cannot be pickled "
                            "(open files, locks, DataLoader iterators, generators) inside the function.") from err
        opens = None if device is None else str(device)
        (outcome,) = run_processes(_call_with_flags, 1, (job, _backend_flags(), opens),
                                   timeout_s=timeout_s, threads_per_process=torch.get_num_threads(),
                                   start_method="spawn", raise_on_error=False)
    if not outcome.ok:
        tail = "\n".join(outcome.stderr.strip().splitlines()[-10:])
        raise RuntimeError(f"{name} failed in its fresh process:\n{outcome.error}"
                           + (f"\nits last standard-error lines:\n{tail}" if tail else ""))
    status, value, child_traceback = outcome.value
    if status == "no device":
        raise FreshProcessUnavailable(f"no fresh process for {name}: a second process could not open {device} "
                                      f"({value})")
    if status == "raised":
        value.add_note(f"raised by {name} in its fresh process:\n{child_traceback}")
        raise value
    return value


@dataclass(frozen=True)
class FreshPlansRun:
    """What :func:`run_with_fresh_plans` returns: ``value``, ``fn``'s; ``fresh_process``, whether ``fn`` ran in a
    fresh process; ``note``, ``""`` when cuDNN planned under the flag asked for, else :data:`PLANS_REUSED` and why
    (print it with the measurement)."""

    value: Any
    fresh_process: bool
    note: str = ""


def run_with_fresh_plans(fn: Callable[..., Any], args: tuple = (), kwargs: dict[str, Any] | None = None, *,
                         device: torch.device | str, benchmark: bool | None,
                         timeout_s: float = 1800.0) -> FreshPlansRun:
    """Run ``fn(*args, **kwargs)``, a measurement that runs convolutions on ``device`` with ``cudnn.benchmark`` set to
    ``benchmark``, where cuDNN plans its convolutions under that setting: in a fresh process
    (:func:`call_in_fresh_process`) when :func:`needs_fresh_process` says so (CUDA, flag on), here otherwise. One
    call for every device: on a CPU or MPS it is a plain call. ``timeout_s``: seconds for the fresh process.

    With the flag off nothing needs a fresh process: a plan this process already holds for the shape is the
    heuristic's, the plan the flag-off run would choose anyway, as long as no run with the flag on has planned the
    same shapes here, which running those in fresh processes guarantees.

    Where the GPU admits no second process (:class:`FreshProcessUnavailable`), ``fn`` runs here instead, and the
    returned ``note`` says :data:`PLANS_REUSED`: for shapes this process has already run, cuDNN keeps the plans it
    chose then, with the flag off.
    """
    if not needs_fresh_process(device, benchmark):
        return FreshPlansRun(fn(*args, **(kwargs or {})), fresh_process=False)
    try:
        return FreshPlansRun(call_in_fresh_process(fn, args, kwargs, device=device, timeout_s=timeout_s),
                             fresh_process=True)
    except FreshProcessUnavailable as err:
        note = (f"{PLANS_REUSED} ({err}; it ran in this process, where cuDNN keeps the plans it chose with the flag "
                "off for the shapes already run)")
        return FreshPlansRun(fn(*args, **(kwargs or {})), fresh_process=False, note=note)


"""Run an exported ONNX model safely (Day 30): validate the input *before* ONNX Runtime sees it.

ONNX Runtime rejects a wrong input with messages such as ``INVALID_ARGUMENT : Got invalid dimensions for input``,
raised from C++ as an ``onnxruntime`` exception type that callers rarely catch, and a model with more dynamic
dimensions accepts shapes it was never meant for. :class:`OnnxModel` checks rank, every fixed dimension and the
dtype against the model's declared input, converts torch tensors, and raises :class:`InputValidationError` (a
``ValueError``) that says what was expected. (No check can catch inputs of the right shape and dtype that were
preprocessed wrongly, e.g. not normalised: those still need a parity test.)
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

# ONNX tensor type strings (as ONNX Runtime reports them) -> NumPy dtypes.
ONNX_TO_NUMPY = {
    "tensor(float)": np.dtype(np.float32), "tensor(double)": np.dtype(np.float64),
    "tensor(float16)": np.dtype(np.float16), "tensor(int64)": np.dtype(np.int64),
    "tensor(int32)": np.dtype(np.int32), "tensor(int8)": np.dtype(np.int8), "tensor(uint8)": np.dtype(np.uint8),
    "tensor(bool)": np.dtype(np.bool_),
}


class InputValidationError(ValueError):
    """The array given to an exported model does not match its declared input (shape or dtype)."""


@dataclass(frozen=True)
class InputSpec:
    """One declared model input. ``shape`` holds ints for fixed dimensions and a name (str) or ``None`` for
    dynamic ones, e.g. ``("batch", 3, 32, 32)``."""

    name: str
    shape: tuple[int | str | None, ...]
    dtype: np.dtype

    def describe(self) -> str:
        dims = ", ".join(str(d) if isinstance(d, int) else (d or "?") for d in self.shape)
        return f"{self.name}: {self.dtype.name}[{dims}]"


def input_problems(shape: Sequence[int], dtype: np.dtype | str, spec: InputSpec) -> list[str]:
    """Every way an array of ``shape`` and ``dtype`` breaks ``spec`` (an empty list means it fits).

    Dynamic dimensions accept any size >= 1; fixed ones must match exactly; the dtype must match exactly (no silent
    casting: float64 -> float32 would hide a preprocessing bug)."""
    problems: list[str] = []
    shape = tuple(int(s) for s in shape)
    if len(shape) != len(spec.shape):
        problems.append(f"rank {len(shape)} (shape {shape}), expected rank {len(spec.shape)}")
    else:
        for axis, (got, want) in enumerate(zip(shape, spec.shape)):
            if isinstance(want, int) and want >= 0:
                if got != want:
                    problems.append(f"dimension {axis} is {got}, expected {want}")
            elif got < 1:
                problems.append(f"dynamic dimension {axis} ({want or '?'}) is {got}, expected >= 1")
    if np.dtype(dtype) != spec.dtype:
        problems.append(f"dtype {np.dtype(dtype).name}, expected {spec.dtype.name}")
    return problems


def _to_numpy(x, expected: np.dtype | None = None) -> np.ndarray:
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor, without importing torch here
        try:
            x = x.detach().cpu().numpy()
        except TypeError as e:                       # bfloat16 (and other dtypes) have no NumPy counterpart
            name = np.dtype(expected).name if expected is not None else "float32"
            want = f"the model's {name}" if expected is not None else "a dtype NumPy has"
            raise InputValidationError(f"a {x.dtype} tensor has no NumPy dtype ({e}): convert it to {want} first, "
                                       f"e.g. .to(torch.{name})") from e
    if not isinstance(x, np.ndarray):
        raise InputValidationError(f"expected a NumPy array or a torch tensor, got {type(x).__name__}")
    return x


def default_providers(available: Sequence[str], cuda_device: int = 0) -> list:
    """ONNX Runtime providers, best first, from those ``available``: CUDA on GPU ``cuda_device`` (with TF32
    convolutions off, its ``use_tf32=0`` option, so that fp32 results stay comparable with an fp32 reference) when
    this onnxruntime has it, then CPU. The CUDA provider comes only with the ``onnxruntime-gpu`` package; without a
    ``device_id`` it would use GPU 0 whatever device the PyTorch side runs on."""
    providers: list = []
    if "CUDAExecutionProvider" in available:
        providers.append(("CUDAExecutionProvider", {"use_tf32": "0", "device_id": str(cuda_device)}))
    if "CPUExecutionProvider" in available:
        providers.append("CPUExecutionProvider")
    return providers


class OnnxModel:
    """An ONNX Runtime session with one validated input: ``OnnxModel(path)(images) -> np.ndarray`` (first output).

    Args:
        path: the ``.onnx`` file (or its bytes).
        providers: ONNX Runtime execution providers, best first; default: :func:`default_providers`.
        threads: intra-op threads (None lets ONNX Runtime decide).
        cuda_device: the GPU index for the default CUDA provider (``device.index`` of the PyTorch side).
        spin: let ONNX Runtime's intra-op threads busy-wait for work after each call (its default). Off here: the
            spinning threads keep the cores busy after a call returns, which slows whatever runs next on the CPU,
            such as the eager model in an interleaved timing; a server doing nothing else may turn it back on for a
            little latency.
    """

    def __init__(self, path: str | Path | bytes, providers: Sequence[str] | None = None,
                 threads: int | None = None, spin: bool = False, cuda_device: int = 0):
        import onnxruntime as ort

        if providers is None:
            providers = default_providers(ort.get_available_providers(), cuda_device)
        options = ort.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        self.session = ort.InferenceSession(path if isinstance(path, bytes) else str(path), options,
                                            providers=list(providers))
        inputs = self.session.get_inputs()
        if len(inputs) != 1:
            raise ValueError(f"OnnxModel handles models with one input, this one has {len(inputs)}")
        i = inputs[0]
        if i.type not in ONNX_TO_NUMPY:
            raise ValueError(f"unsupported input type {i.type}")
        shape = tuple(d if isinstance(d, int) else (d if isinstance(d, str) else None) for d in i.shape)
        self.spec = InputSpec(i.name, shape, ONNX_TO_NUMPY[i.type])
        self.output_names = [o.name for o in self.session.get_outputs()]

    @property
    def providers(self) -> list[str]:
        return self.session.get_providers()

    def validate(self, x) -> np.ndarray:
        """Return ``x`` as a C-contiguous NumPy array, or raise :class:`InputValidationError`."""
        arr = _to_numpy(x, self.spec.dtype)
        problems = input_problems(arr.shape, arr.dtype, self.spec)
        if problems:
            raise InputValidationError(f"bad input for {self.spec.describe()}: " + "; ".join(problems))
        return np.ascontiguousarray(arr)

    def __call__(self, x) -> np.ndarray:
        return self.session.run(self.output_names[:1], {self.spec.name: self.validate(x)})[0]

    def run_unchecked(self, x: np.ndarray) -> np.ndarray:
        """Straight to ONNX Runtime, no validation (to see what it does with bad input)."""
        return self.session.run(self.output_names[:1], {self.spec.name: x})[0]


def max_abs_diff(reference, candidate) -> float:
    """``max |reference - candidate|`` over all elements, as a float. Shapes must be equal (no broadcasting)."""
    a = np.asarray(_to_numpy(reference), dtype=np.float64)
    b = np.asarray(_to_numpy(candidate), dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    return float(np.abs(a - b).max()) if a.size else 0.0

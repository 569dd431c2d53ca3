"""Environment: what this machine has, which device to use, and how big a run should be.

Every notebook starts with :func:`course_setup`, which picks the device (cuda -> mps -> cpu), decides whether the
run is a smoke run (CI, nbgrader, or ``SMOKE=True``) and prints one line saying where the numbers come from.
"""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import torch

T = TypeVar("T")

SMOKE_ENV_VARS = ("NBGRADER_EXECUTION", "BOOTCAMP_SMOKE")


class DeviceUnavailableError(RuntimeError):
    """A device was asked for that this machine (or this CUDA_VISIBLE_DEVICES) does not provide."""


# --------------------------------------------------------------------------------------------------- report
@dataclass
class GPUInfo:
    """One visible CUDA device. Memory in bytes."""

    index: int
    name: str
    total_memory_bytes: int
    compute_capability: tuple[int, int]
    multiprocessors: int

    @property
    def supports_bf16(self) -> bool:
        """bf16 tensor cores arrived with Ampere (compute capability 8.0)."""
        return self.compute_capability >= (8, 0)

    @property
    def supports_tf32(self) -> bool:
        """TF32 tensor cores arrived with Ampere (compute capability 8.0)."""
        return self.compute_capability >= (8, 0)


@dataclass
class EnvironmentReport:
    """Versions and devices of this machine. ``None`` means "not present here"."""

    python: str
    platform: str
    torch: str
    torchvision: str | None
    cuda_build: str | None          # CUDA version torch was compiled against
    cudnn: str | None               # cuDNN version torch loads, e.g. "9.24.0"
    driver: str | None              # NVIDIA driver version (needs a GPU and NVML or nvidia-smi)
    cuda_available: bool
    cuda_visible_devices: str | None
    gpus: list[GPUInfo] = field(default_factory=list)
    mps_available: bool = False
    cpu_count_logical: int = 1
    cpu_count_physical: int | None = None
    torch_threads: int = 1
    bf16_supported: bool = False    # on the best available accelerator, or the CPU

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """A short multi-line text, one fact per line."""
        lines = [
            f"Python        {self.python} on {self.platform}",
            f"torch         {self.torch} (built for CUDA {self.cuda_build or '-'}), torchvision {self.torchvision}",
            f"cuDNN         {self.cudnn or '-'}    driver {self.driver or '-'}",
            f"CUDA usable   {self.cuda_available}  (CUDA_VISIBLE_DEVICES={self.cuda_visible_devices!r})",
            f"MPS usable    {self.mps_available}",
            f"CPU           {self.cpu_count_logical} logical / {self.cpu_count_physical or '?'} physical cores, "
            f"torch uses {self.torch_threads} threads",
        ]
        for g in self.gpus:
            lines.append(
                f"GPU {g.index}         {g.name}, {g.total_memory_bytes / 2**30:.1f} GiB, "
                f"sm_{g.compute_capability[0]}{g.compute_capability[1]}, {g.multiprocessors} SMs, "
                f"bf16={g.supports_bf16}, tf32={g.supports_tf32}"
            )
        return "\n".join(lines)


def _cudnn_version() -> str | None:
    if not torch.backends.cudnn.is_available():
        return None
    v = torch.backends.cudnn.version()
    if v is None:
        return None
    # 9.x encodes as major*10000 + minor*100 + patch; 8.x as major*1000 + minor*100 + patch.
    major = v // 10000 if v >= 90000 else v // 1000
    rest = v - major * (10000 if v >= 90000 else 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def driver_version() -> str | None:
    """The NVIDIA driver version, from NVML or ``nvidia-smi``; ``None`` where there is no NVIDIA driver."""
    try:
        import pynvml  # provided by nvidia-ml-py

        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else str(v)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no library: fall through to the CLI
        pass
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
        return out.strip().splitlines()[0] if out.strip() else None
    except (subprocess.SubprocessError, OSError):
        return None


def environment_report() -> EnvironmentReport:
    """Collect versions and devices. Safe on any machine: missing pieces become ``None``."""
    try:
        import torchvision

        tv: str | None = torchvision.__version__
    except Exception:
        tv = None
    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
    except Exception:
        physical = None
    cuda = torch.cuda.is_available()
    gpus = []
    if cuda:
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            gpus.append(GPUInfo(i, p.name, int(p.total_memory), (p.major, p.minor), p.multi_processor_count))
    mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    if cuda:
        bf16 = torch.cuda.is_bf16_supported()
    else:
        bf16 = True  # CPU autocast supports bf16 everywhere (fast only with AVX512-BF16/AMX)
    return EnvironmentReport(
        python=platform.python_version(),
        platform=f"{platform.system()} {platform.machine()}",
        torch=torch.__version__,
        torchvision=tv,
        cuda_build=torch.version.cuda,
        cudnn=_cudnn_version() if cuda else None,
        driver=driver_version() if cuda or shutil.which("nvidia-smi") else None,
        cuda_available=cuda,
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        gpus=gpus,
        mps_available=mps,
        cpu_count_logical=os.cpu_count() or 1,
        cpu_count_physical=physical,
        torch_threads=torch.get_num_threads(),
        bf16_supported=bf16,
    )


def hardware_label(device: torch.device | str | None = None) -> str:
    """One line naming the hardware a number was measured on, e.g. ``cpu (2 threads, x86_64), torch 2.14.1``."""
    dev = torch.device(device) if device is not None else pick_device("auto")
    if dev.type == "cuda":
        idx = dev.index if dev.index is not None else torch.cuda.current_device()
        name = f"cuda:{idx} {torch.cuda.get_device_name(idx)}"
    elif dev.type == "mps":
        name = f"mps ({platform.machine()})"
    else:
        name = f"cpu ({torch.get_num_threads()} threads, {(platform.machine() + ' ' + platform.processor()).strip()})"
    return f"{name}, torch {torch.__version__}"


# --------------------------------------------------------------------------------------------------- devices
def _mps_available() -> bool:
    return bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())


def pick_device(preference: str | torch.device = "auto") -> torch.device:
    """Choose the device to run on.

    ``"auto"`` takes the first that works of cuda -> mps -> cpu. CUDA respects ``CUDA_VISIBLE_DEVICES``: devices
    hidden by it do not exist for this process, and ``cuda:0`` is the first *visible* one. Asking explicitly for a
    device that is not there raises :class:`DeviceUnavailableError` with what to do instead.
    """
    if isinstance(preference, torch.device):
        preference = str(preference)
    pref = (preference or "auto").strip().lower()
    if pref == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(pref)
    except RuntimeError as e:
        raise ValueError(f"Unknown device {preference!r}: use 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'.") from e
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if not torch.cuda.is_available():
            hint = (f" CUDA_VISIBLE_DEVICES={visible!r} hides every GPU from this process." if visible is not None
                    and visible.strip() in ("", "-1") else "")
            raise DeviceUnavailableError(
                f"CUDA was asked for, but this process sees no CUDA GPU (torch {torch.__version__}, built for CUDA "
                f"{torch.version.cuda or 'none: a CPU-only build'}).{hint} Use DEVICE='auto' to fall back to "
                "MPS or CPU, or run Day 01's checks: `nvidia-smi` on the host, the driver, and a CUDA build of torch."
            )
        count = torch.cuda.device_count()
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        if index >= count:
            raise DeviceUnavailableError(
                f"cuda:{index} was asked for, but only {count} GPU(s) are visible (CUDA_VISIBLE_DEVICES="
                f"{visible!r}); indices count visible devices from 0. Use cuda:0..cuda:{count - 1}."
            )
        return torch.device("cuda", index)
    if dev.type == "mps":
        if not _mps_available():
            raise DeviceUnavailableError(
                "MPS (Apple GPU) was asked for, but it is not available here: it needs macOS 12.3+ on Apple "
                "silicon and an arm64 build of torch. Use DEVICE='auto' to fall back to the CPU."
            )
        return dev
    raise ValueError(f"Device type {dev.type!r} is not supported by the course: use 'auto', 'cpu', 'cuda' or 'mps'.")


def synchronize(device: torch.device | str) -> None:
    """Wait until all queued work on ``device`` has finished (a no-op on the CPU, which runs eagerly)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "mps":
        torch.mps.synchronize()


# --------------------------------------------------------------------------------------------------- run size
def smoke_mode(flag: bool = False) -> bool:
    """True when the notebook should run at smoke size: ``flag`` set, or running under nbgrader
    (``NBGRADER_EXECUTION``) or with ``BOOTCAMP_SMOKE=1`` in the environment."""
    if flag:
        return True
    return any(os.environ.get(v, "").strip() not in ("", "0", "false", "False") for v in SMOKE_ENV_VARS)


@dataclass
class CourseRun:
    """What a notebook needs to know about this run: the device, whether it is a smoke run, and the seed."""

    device: torch.device
    smoke: bool
    seed: int

    @property
    def on_gpu(self) -> bool:
        return self.device.type == "cuda"

    @property
    def mode(self) -> str:
        """``"smoke"``, ``"gpu"`` or ``"cpu"`` (MPS counts as ``"cpu"``-sized: laptops)."""
        return "smoke" if self.smoke else ("gpu" if self.on_gpu else "cpu")

    def pick(self, *, smoke: T, cpu: T, gpu: T) -> T:
        """The value for this run's size: ``smoke`` in smoke runs, ``gpu`` on CUDA, else ``cpu``."""
        return {"smoke": smoke, "cpu": cpu, "gpu": gpu}[self.mode]

    def hardware(self) -> str:
        return hardware_label(self.device)


def course_setup(smoke: bool = False, device: str = "auto", seed: int = 0, deterministic: bool = False,
                 quiet: bool = False) -> CourseRun:
    """Start a notebook: resolve smoke mode and the device, seed every RNG, print one banner line.

    Args:
        smoke: the notebook's ``SMOKE`` parameter (nbgrader and ``BOOTCAMP_SMOKE=1`` also turn it on).
        device: the notebook's ``DEVICE`` parameter: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"mps"``.
        seed: seed for ``random``, NumPy and torch.
        deterministic: also ask torch for deterministic kernels (slower; see :mod:`utils.seeding`).
    """
    from .seeding import seed_everything

    run = CourseRun(device=pick_device(device), smoke=smoke_mode(smoke), seed=seed)
    seed_everything(seed, deterministic=deterministic)
    if not quiet:
        print(f"[course] device={run.device} mode={run.mode} seed={seed} | {run.hardware()} | "
              f"python {sys.version.split()[0]}")
    return run

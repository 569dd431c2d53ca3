"""Environment report: what this machine has (Python, torch, CUDA, cuDNN, driver, GPUs, CPU cores).

:func:`environment_report` collects the versions and devices; :func:`hardware_label` names the hardware in one line
for every printed number. Choosing the device is :mod:`utils.device`; starting a notebook is :mod:`utils.course`.
"""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

import torch

from .device import mps_available, pick_device


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
    # with CUDA: any visible GPU of compute capability >= 8.0 (native bf16); without: True (CPU autocast; MPS unchecked)
    bf16_supported: bool = False

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


def cudnn_version() -> str | None:
    """The cuDNN version this PyTorch loads, as text (``"9.24.0"``), or ``None`` when it has none.

    ``torch.backends.cudnn.version()`` returns an integer: cuDNN 9 encodes major * 10000 + minor * 100 + patch
    (``92400``), cuDNN 8 and older major * 1000 + minor * 100 + patch (``8907``). A CUDA wheel carries its cuDNN
    even on a machine without a GPU, so this answers there too; :func:`environment_report` shows it only when a GPU
    is usable.
    """
    if not torch.backends.cudnn.is_available():
        return None
    v = torch.backends.cudnn.version()
    if v is None:
        return None
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


def usable_cpus() -> list[int]:
    """The logical CPUs this process may run on (its affinity: a container or ``taskset`` can allow fewer than the
    machine has). A CPU quota such as ``docker --cpus`` does not show here."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def physical_cores_of(cpus: Iterable[int], *, sysfs: Path = Path("/sys/devices/system/cpu")) -> int | None:
    """How many physical cores the logical CPUs ``cpus`` sit on: distinct (package, core) pairs from Linux's CPU
    topology, so the two hardware threads of one core count once. ``None`` where the topology is missing (not Linux,
    or a CPU without it): fall back to ``psutil.cpu_count(logical=False)``, which counts the whole machine."""
    cores = set()
    for cpu in cpus:
        topology = sysfs / f"cpu{cpu}" / "topology"
        try:
            cores.add((topology.joinpath("physical_package_id").read_text().strip(),
                       topology.joinpath("core_id").read_text().strip()))
        except OSError:
            return None
    return len(cores) or None


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
    mps = mps_available()
    if cuda:
        # Not torch.cuda.is_bf16_supported(): it also says yes where bf16 is only emulated (a T4, sm_75).
        bf16 = any(g.supports_bf16 for g in gpus)
    else:
        bf16 = True  # CPU autocast supports bf16 everywhere (fast only with AVX512-BF16/AMX)
    return EnvironmentReport(
        python=platform.python_version(),
        platform=f"{platform.system()} {platform.machine()}",
        torch=torch.__version__,
        torchvision=tv,
        cuda_build=torch.version.cuda,
        cudnn=cudnn_version() if cuda else None,
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
        try:   # the chip and its GPU cores: an M1 and an M4 Max are both "mps"
            name = (f"mps {torch.backends.mps.get_name()} ({torch.backends.mps.get_core_count()} GPU cores, "
                    f"{platform.machine()})")
        except (AttributeError, RuntimeError):
            pass
    else:
        name = f"cpu ({torch.get_num_threads()} threads, {(platform.machine() + ' ' + platform.processor()).strip()})"
    return f"{name}, torch {torch.__version__}"

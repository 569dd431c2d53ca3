#!/usr/bin/env python3
"""The PyTorch build for this machine: which one (from the NVIDIA driver), and the pip commands that install it.

The lock file pins PyPI's torch wheel, a CUDA 13.0 build: it needs an NVIDIA driver from the 580 series or newer,
and on an older driver it imports fine but ``torch.cuda.is_available()`` is False. On a machine without an NVIDIA
GPU its CUDA libraries (about 4 GB) are dead weight. ``make setup`` therefore asks ``nvidia-smi`` what the driver
supports and installs the build that works, from PyTorch's own wheel index, with everything else from the lock.

    python tools/torch_build.py choose --torch BUILD [--tensorrt 0|1] --venv .venv --write .venv/.torch-build
    .venv/bin/python tools/torch_build.py install --choice .venv/.torch-build

BUILD is empty (keep the installed build if it works here, otherwise detect), ``auto`` (detect), ``default`` (the
lock as it is), ``cu126``, ``cu130`` (the same build as ``default``), ``cu132`` or ``cpu``. TENSORRT is 1 (add
TensorRT: an NVIDIA GPU and the lock's CUDA 13.0 build only), 0 (remove it) or empty (keep it while the build
fits). ``choose`` runs first, with whatever ``python3`` the learner has, to check its version: this file parses on
Python 3.8 and ``choose`` needs only the standard library.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements-lock.txt"
PYPROJECT = ROOT / "pyproject.toml"
INDEX = "https://download.pytorch.org/whl/"
NVIDIA_INDEX = "https://pypi.nvidia.com"

# torch 2.14's builds on PyTorch's index (its RELEASE.md compatibility matrix): CUDA 12.6, 13.0 (also on PyPI) and
# 13.2. There is no 12.8 build after 2.11. GPU architectures each build has kernels for, from the same document's
# CUDA support matrix; a kernel built for X.Y also runs on X.Z with Z >= Y.
BUILD_CUDA = {"cu126": (12, 6), "cu130": (13, 0), "cu132": (13, 2)}
_CU13_ARCHS = {"x86_64": ("7.5", "8.0", "8.6", "9.0", "10.0", "12.0"),
               "aarch64": ("8.0", "9.0", "10.0", "11.0", "12.0")}
BUILD_ARCHS = {"cu126": {"x86_64": ("5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"), "aarch64": ("8.0", "9.0")},
               "cu130": _CU13_ARCHS, "cu132": _CU13_ARCHS}
# Oldest Linux driver per CUDA major version, with minor version compatibility (NVIDIA's CUDA compatibility guide).
MIN_DRIVER = {12: 525, 13: 580}
CHOICES = ("", "auto", "default", "cu126", "cu130", "cu132", "cpu")
CPU_SAVING = "about 4 GB of CUDA libraries"


class SetupError(Exception):
    """A request this machine cannot satisfy; the message says what to do instead."""


@dataclass(frozen=True)
class Machine:
    system: str                                   # platform.system(): "Linux", "Darwin", "Windows"
    arch: str                                     # "x86_64" or "aarch64"
    driver: Optional[str] = None                  # NVIDIA driver version, e.g. "550.54.15"; None without one
    driver_cuda: Optional[tuple] = None           # newest CUDA the driver supports (nvidia-smi's header), e.g. (12, 4)
    compute_caps: tuple = ()                      # one (major, minor) per GPU
    note: str = "nvidia-smi not found"            # why there is no driver information

    @property
    def has_nvidia_gpu(self) -> bool:
        return self.driver is not None


@dataclass(frozen=True)
class Choice:
    build: str                                    # "default", "cu126", "cu132" or "cpu"
    reason: str
    tensorrt: bool = False

    def line(self) -> str:
        return f"PyTorch build: {self.build}{' + TensorRT' if self.tensorrt else ''} ({self.reason})"


# ---------------------------------------------------------------- reading versions
def requires_python(pyproject_text: str) -> tuple:
    """The minimum Python in pyproject.toml's ``requires-python = ">=X.Y[.Z]"``, e.g. ``(3, 11, 5)``."""
    m = re.search(r'^requires-python\s*=\s*">=\s*(\d+)\.(\d+)(?:\.(\d+))?"', pyproject_text, re.M)
    if not m:
        raise SetupError('pyproject.toml needs a requires-python of the form ">=X.Y" or ">=X.Y.Z"')
    return tuple(int(x or 0) for x in m.groups())


def check_python(version_info: tuple, minimum: tuple, executable: str = "python") -> None:
    if tuple(version_info[:3]) < minimum:
        found = ".".join(map(str, version_info[:3]))
        need = ".".join(map(str, minimum))
        raise SetupError(f"Python {need} or newer is needed (the lock file's packages require it); {executable} is "
                         f"{found}. Install a newer Python and run e.g. `make lab PYTHON=python3.12`; if this is an "
                         "old .venv, `make clean-venv` first.")


def lock_pin(lock_lines: list, name: str) -> str:
    """The exact version the lock pins for ``name`` (``"torch"`` -> ``"2.14.1"``)."""
    for line in lock_lines:
        m = re.match(rf"^{re.escape(name)}==([^\s;]+)", line.strip(), re.I)
        if m:
            return m.group(1)
    raise SetupError(f"requirements-lock.txt pins no {name}")


def lock_cuda(lock_lines: list) -> Optional[tuple]:
    """The CUDA version of the lock's torch wheel, from its CUDA runtime pin; None for a lock without one."""
    for line in lock_lines:
        m = re.match(r"^(?:cuda-toolkit|nvidia-cuda-runtime(?:-cu\d+)?)==(\d+)\.(\d+)", line.strip())
        if m:
            return int(m.group(1)), int(m.group(2))
    return None


def is_torch_stack(name: str) -> bool:
    """Packages that belong to one torch build: torch, torchvision, triton, CUDA wheels, TensorRT (not NVML)."""
    name = name.lower().replace("_", "-")
    return (name in ("torch", "torchvision", "triton") or name.startswith(("cuda-", "tensorrt", "torch-tensorrt"))
            or (name.startswith("nvidia-") and name != "nvidia-ml-py"))


def lock_without_torch(lock_lines: list) -> list:
    """The lock minus one build's torch stack: what every build shares."""
    return [line for line in lock_lines
            if not is_torch_stack(re.split(r"[=<>!~;\s\[]", line.strip(), maxsplit=1)[0])]


def installed_build(torch_version: Optional[str]) -> Optional[str]:
    """``"2.14.1"`` (PyPI) -> ``"default"``, ``"2.14.1+cu126"`` -> ``"cu126"``; None when torch is not installed.
    ``"+cu130"`` (PyTorch's own index) is the lock's CUDA 13.0 build: ``"default"`` too."""
    if not torch_version:
        return None
    local = torch_version.partition("+")[2]
    return "default" if local in ("", "cu130") else local


# ---------------------------------------------------------------- the machine
def parse_smi_header(text: str) -> tuple:
    """(driver version, (CUDA major, minor)) from ``nvidia-smi``'s header; None for what it does not show."""
    driver = re.search(r"Driver Version:\s*([\d.]+)", text)
    cuda = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", text)
    return (driver.group(1) if driver else None, (int(cuda.group(1)), int(cuda.group(2))) if cuda else None)


def parse_compute_caps(csv_text: str) -> tuple:
    """``nvidia-smi --query-gpu=compute_cap --format=csv,noheader`` -> ((8, 6), ...); unreadable lines skipped."""
    caps = []
    for line in csv_text.splitlines():
        m = re.match(r"^\s*(\d+)\.(\d+)\s*$", line)
        if m:
            caps.append((int(m.group(1)), int(m.group(2))))
    return tuple(caps)


def cuda_from_driver(driver: str) -> Optional[tuple]:
    """The CUDA major a Linux driver supports (via MIN_DRIVER), for a header without a CUDA version."""
    major = int(driver.split(".")[0])
    supported = [cuda for cuda, minimum in MIN_DRIVER.items() if major >= minimum]
    return (max(supported), 0) if supported else None


def detect_machine(run: Callable = subprocess.run) -> Machine:
    import platform
    system, arch = platform.system(), platform.machine().lower().replace("arm64", "aarch64")
    smi = shutil.which("nvidia-smi") or next((p for p in ("/usr/lib/wsl/lib/nvidia-smi",) if os.path.exists(p)), None)
    if smi is None:
        return Machine(system, arch)
    try:
        header = run([smi], capture_output=True, text=True, timeout=60)
        caps = run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True, text=True,
                   timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Machine(system, arch, note=f"nvidia-smi failed: {e}")
    driver, driver_cuda = parse_smi_header(header.stdout)
    if header.returncode != 0 or driver is None:
        first = (header.stdout + header.stderr).strip().splitlines()[:1]
        return Machine(system, arch, note=f"nvidia-smi found no usable GPU: {first[0] if first else 'no output'}")
    caps_found = parse_compute_caps(caps.stdout) if caps.returncode == 0 else ()
    return Machine(system, arch, driver, driver_cuda or cuda_from_driver(driver), caps_found, note="")


def runs_on(build: str, cap: tuple, arch: str) -> bool:
    """Does ``build`` have kernels for a GPU of compute capability ``cap`` on this CPU architecture?"""
    return any(int(a.split(".")[0]) == cap[0] and int(a.split(".")[1]) <= cap[1]
               for a in BUILD_ARCHS[build].get(arch, ()))


def fits(tag: str, machine: Machine) -> bool:
    """Can this driver run build ``tag`` (same CUDA major or newer), and does it have kernels for every GPU?"""
    return (machine.driver_cuda is not None and BUILD_CUDA[tag][0] <= machine.driver_cuda[0]
            and all(runs_on(tag, cap, machine.arch) for cap in machine.compute_caps))


def _caps(machine: Machine) -> str:
    return ", ".join(f"{c[0]}.{c[1]}" for c in machine.compute_caps)


def index_reachable(timeout_s: float = 5.0) -> bool:
    try:
        urllib.request.urlopen(urllib.request.Request(INDEX + "cpu/", method="HEAD"), timeout=timeout_s)
        return True
    except Exception:
        return False


# ---------------------------------------------------------------- the decision
def detect_build(machine: Machine, default_cuda: Optional[tuple], *, ci: bool,
                 reachable: Callable[[], bool] = index_reachable) -> Choice:
    """The build this machine should run: the lock's whenever it works here, else the newest one that does."""
    if machine.system == "Darwin":
        if machine.arch != "aarch64":
            raise SetupError("PyTorch publishes no wheels for Intel Macs after 2.2: use the Docker image (CPU only), "
                             "or a Linux machine.")
        return Choice("default", "macOS on Apple silicon: the lock's wheel, which uses the GPU through MPS")
    if machine.system != "Linux":
        raise SetupError(f"{machine.system} is not supported directly: on Windows, run the course inside WSL2.")
    if ci:
        return Choice("default", "CI: the lock exactly as it is")
    if not machine.has_nvidia_gpu:
        if reachable():
            return Choice("cpu", f"no NVIDIA GPU ({machine.note}): the CPU-only build saves {CPU_SAVING}")
        return Choice("default", f"no NVIDIA GPU ({machine.note}) and {INDEX} is unreachable: the lock's build, "
                                 "which also runs on the CPU")
    gpu = f"driver {machine.driver} (CUDA {'.'.join(map(str, machine.driver_cuda or ('?',)))})"
    if machine.driver_cuda is None or machine.driver_cuda[0] < min(MIN_DRIVER):
        return Choice("cpu", f"{gpu} is too old for any PyTorch 2.14 CUDA build (they need driver "
                             f"{MIN_DRIVER[12]}+): CPU-only until the driver is updated, then `make setup TORCH=auto`")
    usable = [b for b in ("cu130", "cu132", "cu126") if fits(b, machine)]   # CUDA 13.0 (the lock's), 13.2, 12.6
    default_tag = f"cu{default_cuda[0]}{default_cuda[1]}" if default_cuda else None
    if default_tag in usable:
        return Choice("default", f"{gpu} runs the lock's CUDA {default_cuda[0]}.{default_cuda[1]} build")
    if usable:
        best = usable[0]
        why = (f"GPU compute capability {_caps(machine)} has no kernels in the CUDA 13 builds"
               if BUILD_CUDA[best][0] < 13 <= machine.driver_cuda[0]
               else f"the lock's CUDA 13 build needs driver {MIN_DRIVER[13]}+")
        return Choice(best, f"{gpu}: {why}, so the CUDA {'.'.join(map(str, BUILD_CUDA[best]))} build")
    cu13_fits = all(runs_on("cu130", cap, machine.arch) for cap in machine.compute_caps)
    hint = (f"driver {MIN_DRIVER[13]}+ runs the CUDA 13 build, which has them: update it, then "
            "`make setup TORCH=auto`" if cu13_fits and machine.driver_cuda[0] < 13 else "CPU-only")
    return Choice("cpu", f"{gpu}: no PyTorch 2.14 CUDA build this driver can run has kernels for GPU compute "
                         f"capability {_caps(machine)}; {hint}")


def works_here(build: str, machine: Machine, default_cuda: Optional[tuple]) -> bool:
    """Does an installed build keep working on this machine (a machine without an NVIDIA GPU runs any build)?"""
    if not machine.has_nvidia_gpu or build == "cpu":
        return True
    tag = f"cu{default_cuda[0]}{default_cuda[1]}" if build == "default" and default_cuda else build
    return tag in BUILD_CUDA and fits(tag, machine)


def choose(request: str, machine: Machine, *, tensorrt: Optional[bool], installed: Optional[str],
           default_cuda: Optional[tuple], ci: bool = False, tensorrt_installed: bool = False,
           reachable: Callable[[], bool] = index_reachable) -> Choice:
    """The build for ``request`` (see the module docstring), and whether TensorRT goes with it: ``tensorrt`` True
    or False as asked (TENSORRT=1 or 0), None to keep an installed TensorRT while the build allows it."""
    request = request.strip().lower()
    if request not in CHOICES:
        hint = " (PyTorch 2.14 has no CUDA 12.8 build)" if request == "cu128" else ""
        raise SetupError(f"TORCH={request} is not a build{hint}: use auto, default, cu126, cu130, cu132 or cpu.")
    if request == "cu130":
        choice = Choice("default", "TORCH=cu130: the lock's build is the CUDA 13.0 build")
    elif request not in ("", "auto"):
        choice = Choice(request, f"TORCH={request}")
    elif request == "" and installed and works_here(installed, machine, default_cuda):
        unused_gpu = installed == "cpu" and machine.has_nvidia_gpu
        choice = Choice(installed, "the installed build works on this machine" + (
            "; it does not use the NVIDIA GPU here" if unused_gpu else "") + "; `make setup TORCH=auto` re-detects")
    else:
        choice = detect_build(machine, default_cuda, ci=ci, reachable=reachable)
    if machine.system != "Linux" and choice.build != "default":
        raise SetupError(f"TORCH={request}: PyTorch's other builds are for Linux; on {machine.system} use the "
                         "default build.")
    if tensorrt is None:                              # TENSORRT not given: keep it if it still fits
        keep = tensorrt_installed and machine.has_nvidia_gpu and choice.build == "default"
        note = "; TensorRT is removed: it needs the lock's CUDA 13.0 build on an NVIDIA GPU" \
            if tensorrt_installed and not keep else ""
        return Choice(choice.build, choice.reason + note, tensorrt=keep)
    if tensorrt:
        if not machine.has_nvidia_gpu:
            raise SetupError(f"TENSORRT=1 needs an NVIDIA GPU; here {machine.note}. TensorRT runs on NVIDIA GPUs "
                             "only.")
        if choice.build != "default":
            raise SetupError(f"TENSORRT=1 needs the lock's CUDA 13.0 build (torch-tensorrt on PyPI is built for "
                             f"it), but this machine gets {choice.build} ({choice.reason}).")
        choice = Choice(choice.build, choice.reason, tensorrt=True)
    return choice


# ---------------------------------------------------------------- the commands
def install_commands(choice: Choice, *, python: str, lock_lines: list, no_torch_lock: str,
                     installed: Optional[str], tensorrt_reqs: list) -> list:
    """The commands (argv lists) that install ``choice`` into the environment of ``python``.

    Another build is installed in one pip run with the rest of the lock (``no_torch_lock``, where the caller writes
    ``lock_without_torch(lock_lines)``), so every shared dependency keeps its locked version; PyTorch's index is an
    extra index because only it has ``torch==2.14.1+cu126``. Back to the default build, torch and torchvision are
    reinstalled from PyPI: pip counts an installed ``2.14.1+cu126`` as satisfying ``torch==2.14.1``. Nothing is
    uninstalled first, so a failed download leaves the old build working; ``stale_packages`` tidies up after.
    """
    pip = [python, "-m", "pip", "install", "--progress-bar", "off", "--disable-pip-version-check"]
    torch_v, vision_v = lock_pin(lock_lines, "torch"), lock_pin(lock_lines, "torchvision")
    if choice.build == "default":
        commands = [[*pip, "-r", str(LOCK)]]
        if installed not in (None, "default"):
            commands.append([*pip, "--no-deps", "--force-reinstall", f"torch=={torch_v}", f"torchvision=={vision_v}"])
    else:
        commands = [[*pip, "-r", no_torch_lock, f"torch=={torch_v}+{choice.build}",
                     f"torchvision=={vision_v}+{choice.build}", "--extra-index-url", INDEX + choice.build]]
    if choice.tensorrt:
        # torch and torchvision named with their pins so that resolving TensorRT cannot move them.
        commands.append([*pip, "--extra-index-url", NVIDIA_INDEX, f"torch=={torch_v}", f"torchvision=={vision_v}",
                         *tensorrt_reqs])
    return commands


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def torch_stack_closure(requires: Callable[[str], Optional[list]], roots: tuple = ("torch", "torchvision")) -> set:
    """The torch-stack packages ``roots`` need in this environment, transitively, extras followed
    (torch asks for ``cuda-toolkit[cublas,cudart,...]``). ``requires`` is ``importlib.metadata.requires``."""
    from packaging.requirements import Requirement   # in the lock; only `install` needs it
    needed, seen, todo = set(), set(), [(r, frozenset()) for r in roots]
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        needed.add(name)
        for spec in requires(name) or []:
            req = Requirement(spec)
            if req.marker and not any(req.marker.evaluate({"extra": e}) for e in extras | {""}):
                continue
            if is_torch_stack(req.name):
                todo.append((_normal(req.name), frozenset(req.extras)))
    return needed


def stale_packages(before: list, needed: set, tensorrt: bool) -> list:
    """Torch-stack packages of the previous build that the new one does not use (CUDA 13 wheels after a switch to
    cu126, all of them after a switch to cpu)."""
    return sorted(n for n in map(_normal, before)
                  if n not in needed and not (tensorrt and n.startswith(("tensorrt", "torch-tensorrt"))))


def tensorrt_requirements(pyproject_text: str) -> list:
    """The ``tensorrt`` extra of pyproject.toml."""
    import tomllib                                   # Python 3.11+; only `install` needs it
    extras = tomllib.loads(pyproject_text)["project"].get("optional-dependencies", {})
    if "tensorrt" not in extras:
        raise SetupError("pyproject.toml has no `tensorrt` extra")
    return list(extras["tensorrt"])


# ---------------------------------------------------------------- command line
def _venv_version(venv: Path, name: str) -> Optional[str]:
    import importlib.metadata as metadata
    paths = [str(p) for p in venv.glob("lib/python3*/site-packages")]
    dists = list(metadata.distributions(name=name, path=paths)) if paths else []
    return dists[0].version if dists else None


def _cmd_choose(args: argparse.Namespace) -> None:
    check_python(sys.version_info, requires_python(PYPROJECT.read_text()), sys.executable)
    lock_lines = LOCK.read_text().splitlines()
    venv = Path(args.venv)
    torch_version = _venv_version(venv, "torch")
    if torch_version and torch_version.partition("+")[0] != lock_pin(lock_lines, "torch"):
        torch_version = None                          # an older torch: reinstall whatever build is chosen
    trt = args.tensorrt.strip().lower()
    choice = choose(args.torch, detect_machine(), tensorrt=None if trt == "" else trt not in ("0", "no", "false"),
                    installed=installed_build(torch_version), default_cuda=lock_cuda(lock_lines),
                    ci=os.environ.get("CI", "").lower() in ("1", "true", "yes"),
                    tensorrt_installed=_venv_version(venv, "torch_tensorrt") is not None)
    print(choice.line())
    content = f"build={choice.build}\ntensorrt={int(choice.tensorrt)}\n"
    target = Path(args.write)
    if not target.exists() or target.read_text() != content:   # unchanged file: make does not reinstall
        target.write_text(content)


def _requires(name: str) -> Optional[list]:
    import importlib.metadata as metadata
    try:
        return metadata.requires(name)
    except metadata.PackageNotFoundError:
        return None


def _torch_stack_installed() -> list:
    import importlib.metadata as metadata
    return sorted({_normal(d.metadata["Name"]) for d in metadata.distributions() if is_torch_stack(d.metadata["Name"])})


# What a first setup puts on disk, by build: 6.5 GB measured for the lock's CUDA 13.0 build in a fresh .venv on Linux
# x86_64; the other CUDA builds carry the same libraries; the CPU build has none of them (the README: under 3 GB).
DISK_GB = {"default": 6.5, "cu126": 6.5, "cu130": 6.5, "cu132": 6.5, "cpu": 3.0}


def disk_gb(build: str, platform: str = sys.platform) -> float:
    """GB a first setup puts on disk: macOS's default build carries no CUDA libraries, so the CPU figure there."""
    return DISK_GB["cpu"] if platform == "darwin" else DISK_GB.get(build, 6.5)


def _run(cmd: list, total: int = 0) -> None:
    """Run ``cmd``; a pip install shows short progress lines (tools/pip_progress.py) instead of pip's log."""
    shown = [os.path.relpath(cmd[0]) if cmd[0] == sys.executable else cmd[0], *cmd[1:]]
    print("+", " ".join(shown), flush=True)
    if cmd[1:4] == ["-m", "pip", "install"]:
        sys.path.insert(0, str(Path(__file__).parent))
        from pip_progress import run_with_progress
        code = run_with_progress(cmd, total, out=lambda line: print(line, flush=True))
        if code:
            raise subprocess.CalledProcessError(code, cmd)
        return
    subprocess.run(cmd, check=True)


def _cmd_install(args: argparse.Namespace) -> None:
    import importlib.metadata as metadata
    fields = dict(line.split("=", 1) for line in Path(args.choice).read_text().split())
    choice = Choice(fields["build"], "chosen by `choose`", tensorrt=fields.get("tensorrt") == "1")
    lock_lines = LOCK.read_text().splitlines()
    before = _torch_stack_installed()
    try:
        installed = installed_build(metadata.version("torch"))
    except metadata.PackageNotFoundError:
        installed = None
    no_torch = Path(args.choice).with_name("requirements-no-torch.txt")
    no_torch.write_text("\n".join(lock_without_torch(lock_lines)) + "\n")
    trt = tensorrt_requirements(PYPROJECT.read_text()) if choice.tensorrt else []
    total = sum(1 for line in lock_lines if line.strip() and not line.lstrip().startswith("#"))
    if installed is None:
        print(f"[setup] First setup: {total} pinned packages, about {disk_gb(choice.build):g} GB on disk for "
              f"the {choice.build} build of PyTorch, downloaded once into {Path(sys.prefix).name}/ (about 10 minutes "
              "on a fast connection). Later `make` runs reuse them and start in seconds.", flush=True)
    for cmd in install_commands(choice, python=sys.executable, lock_lines=lock_lines, no_torch_lock=str(no_torch),
                                installed=installed, tensorrt_reqs=trt):
        _run(cmd, total)
    stale = stale_packages(before, torch_stack_closure(_requires), choice.tensorrt)
    if stale:
        _run([sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", *stale])


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("choose", help="pick the build for this machine; write it to --write if it changed")
    p.add_argument("--torch", default="")
    p.add_argument("--tensorrt", default="", help="1 to add TensorRT, 0 to remove it, empty to keep as is")
    p.add_argument("--venv", default=".venv")
    p.add_argument("--write", required=True)
    p = sub.add_parser("install", help="install the build that `choose` wrote (run with the environment's python)")
    p.add_argument("--choice", required=True)
    args = parser.parse_args(argv)
    try:
        {"choose": _cmd_choose, "install": _cmd_install}[args.command](args)
    except SetupError as e:
        print(f"make setup: {e}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as e:
        print(f"make setup: `{' '.join(e.cmd)}` failed (exit {e.returncode})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

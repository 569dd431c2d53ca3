"""The wheels the GPU check kit carries to a machine that cannot download anything, and how it installs them.

``tools/gpu_check_wheels.txt`` is the complete dependency closure, for CPython 3.12 on x86-64 Linux, of what the GPU
machine's image lacks (papermill, ipykernel, ipywidgets, mlflow-skinny), pinned to requirements-lock.txt's versions,
in two sections: packages not on the image (always installed) and packages the image already has (installed only
where the image turns out to lack them, so that the image's own builds, e.g. its protobuf, stay in charge).
:func:`resolve` rewrites the file from pip's resolver; :func:`download` fetches the wheels; :func:`install` puts the
needed ones into a folder of their own with ``pip install --no-deps --no-compile --target`` (about half the time of
an ordinary install, and nothing of the image is touched) and returns that folder for ``PYTHONPATH``.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WHEEL_LIST = REPO / "tools" / "gpu_check_wheels.txt"
MAX_WHEELS_BYTES = 40 * 2**20
TOP_LEVEL = ("ipykernel", "ipywidgets", "mlflow-skinny", "papermill")
NOT_ON_IMAGE, ON_IMAGE = "# not on the GPU machine's image", "# on the image already"
#: What the H200 image holds, by /work/.library/device/KINDS.md (read 2026-11-17): the wheels of these are carried
#: in the second section only.
IMAGE_PACKAGES = set("""
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs certifi charset-normalizer
click cloudpickle filelock frozenlist fsspec h11 httpcore httpx idna jinja2 markupsafe multidict numpy packaging
pandas pillow propcache protobuf psutil pygments python-dateutil pyyaml requests rich six sympy tqdm
typing-extensions urllib3 yarl zipp
""".split())
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in (5, 12, 17, 24, 26, 27, 28, 31, 34, 35)] + [
    "manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64"]


def canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def wheel_list(path: Path = WHEEL_LIST) -> tuple[list[str], list[str]]:
    """``(pinned requirements to download, top-level names to install)`` from the wheel list file."""
    pins, top = [], []
    for line in path.read_text().splitlines():
        text = line.strip()
        if text.startswith("# install:"):
            top += text.split(":", 1)[1].split()
        elif text and not text.startswith("#"):
            pins.append(text.split("#")[0].strip())
    if not top or any("==" not in p for p in pins):
        raise ValueError(f"{path}: needs a '# install:' line and only pinned 'name==version' lines")
    return pins, top


def sections(path: Path = WHEEL_LIST) -> dict[str, list[str]]:
    """``{"not on image": [name==version, ...], "on image": [...]}`` from the wheel list file."""
    out: dict[str, list[str]] = {"not on image": [], "on image": []}
    current = None
    for line in path.read_text().splitlines():
        text = line.strip()
        if text.startswith(NOT_ON_IMAGE):
            current = "not on image"
        elif text.startswith(ON_IMAGE):
            current = "on image"
        elif text and not text.startswith("#"):
            if current is None:
                raise ValueError(f"{path}: {text!r} is in neither section")
            out[current].append(text.split("#")[0].strip())
    return out


HEADER = f"""# Wheels the GPU check kit (tools/gpu_check.py) carries to a machine that cannot download anything: its Python 3.12
# already has a CUDA build of torch>=2.11 with torchvision, numpy, scikit-learn, matplotlib, pandas, onnx, onnxruntime,
# onnxscript, torchmetrics, tensorboard, tqdm, psutil and nvidia-ml-py (the H200 image's list in the device docs).
# Missing there: what papermill runs notebooks with (papermill, ipykernel and their Jupyter stack), ipywidgets (Day 09's
# explorer) and mlflow-skinny (Day 32). This file is their complete dependency closure for CPython 3.12 on x86-64
# Linux (papermill needs aiohttp on 3.12), resolved by pip from requirements-lock.txt's versions:
#     python tools/gpu_check.py --resolve-wheels      (with a Python 3.12: PY312=/path/to/python3.12)
# Fetch:   python tools/gpu_check.py --download-wheels build/gpu_wheels
# Install: the kit's --wheels DIR: the first section always, the second only where the image lacks the package,
#          with pip install --no-index --no-deps --no-compile --target <work>/site, then PYTHONPATH.
# install: {' '.join(TOP_LEVEL)}
"""


def resolve(python: str, path: Path = WHEEL_LIST, lock: Path = REPO / "requirements-lock.txt") -> int:
    """Rewrite ``path`` with the closure of :data:`TOP_LEVEL` that pip resolves for ``python`` (a CPython 3.12 on
    x86-64 Linux), constrained to ``lock``'s versions, split by :data:`IMAGE_PACKAGES`."""
    pins = {canonical(line.split("==")[0]): line.split("==")[1] for line in lock.read_text().splitlines()
            if "==" in line and not line.startswith("#")}
    wanted = [f"{name}=={pins[canonical(name)]}" for name in TOP_LEVEL]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--only-binary=:all:",
               "--disable-pip-version-check", "--report", str(report), "-c", str(lock), *wanted]
        if subprocess.run(cmd).returncode != 0:
            return 1
        items = json.loads(report.read_text())["install"]
    names = sorted((canonical(i["metadata"]["name"]), i["metadata"]["version"]) for i in items)
    missing = [f"{n}=={v}" for n, v in names if n not in IMAGE_PACKAGES]
    present = [f"{n}=={v}" for n, v in names if n in IMAGE_PACKAGES]
    path.write_text(HEADER + f"\n{NOT_ON_IMAGE}\n" + "\n".join(missing) + f"\n\n{ON_IMAGE}; installed only where "
                    "the image turns out to lack the package\n"
                    + "\n".join(present) + "\n")
    print(f"{path}: {len(missing)} packages not on the image, {len(present)} on it ({len(names)} in the closure)")
    return 0


def download(dest: Path) -> int:
    """Fetch every wheel of the list for CPython 3.12 on x86-64 Linux into ``dest`` (no dependencies resolved: the
    list is the closure) and check that together they stay under 40 MiB."""
    pins, _ = wheel_list()
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps", "--quiet",
           "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
           "--abi", "abi3", "--abi", "none"]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    proc = subprocess.run(cmd + ["-d", str(dest), *pins])
    if proc.returncode != 0:
        print("pip download failed (see above): check the pins in", WHEEL_LIST.relative_to(REPO))
        return proc.returncode
    wanted = {canonical(p.split("==")[0]): p.split("==")[1] for p in pins}
    for whl in dest.glob("*.whl"):   # one version of each: stale wheels from an older list would confuse pip
        name, version = whl.name.split("-")[:2]
        if wanted.get(canonical(name)) != version:
            whl.unlink()
    wheels = sorted(dest.glob("*.whl"), key=lambda p: -p.stat().st_size)
    total = sum(w.stat().st_size for w in wheels)
    for w in wheels[:5]:
        print(f"  {w.stat().st_size / 2**20:6.2f} MiB  {w.name}")
    print(f"{len(wheels)} wheels, {total / 2**20:.1f} MiB in {dest} (limit {MAX_WHEELS_BYTES / 2**20:.0f} MiB)")
    if len(wheels) != len(pins):
        print(f"expected {len(pins)} wheels, found {len(wheels)}")
        return 1
    if total > MAX_WHEELS_BYTES:
        print("too large to carry: trim the list")
        return 1
    return 0


def installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def install(wheel_dir: Path, target: Path) -> Path | None:
    """Install into ``target`` the carried wheels this machine needs: the first section unless the kit's top-level
    packages already import here, and from the second only packages missing here. Puts ``target`` first on
    ``sys.path`` and ``PYTHONPATH`` (for every process the kit starts) and returns it; ``None`` when nothing was
    needed."""
    import importlib.util

    modules = {"mlflow-skinny": "mlflow"}
    if all(importlib.util.find_spec(modules.get(n, n).replace("-", "_")) is not None for n in TOP_LEVEL):
        print("wheels: everything the kit needs is already installed")
        return None
    if not wheel_dir.is_dir():
        sys.exit(f"{wheel_dir} does not exist: build it with `python tools/gpu_check.py --download-wheels "
                 "build/gpu_wheels` where PyPI is reachable, and carry it")
    parts = sections()
    names = {canonical(p.split("==")[0]) for p in parts["not on image"]}
    names |= {canonical(p.split("==")[0]) for p in parts["on image"] if not installed(p.split("==")[0])}
    files = [w for w in sorted(wheel_dir.glob("*.whl")) if canonical(w.name.split("-")[0]) in names]
    found = {canonical(w.name.split("-")[0]) for w in files}
    if found != names:
        sys.exit(f"wheels missing from {wheel_dir}: {', '.join(sorted(names - found))}")
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index",
           "--no-deps", "--no-compile", "--no-cache-dir", "--upgrade", "--target", str(target), *map(str, files)]
    print(f"wheels: installing {len(files)} into {target} (--no-deps --no-compile --target)", flush=True)
    if subprocess.run(cmd).returncode != 0:
        sys.exit("offline install failed (see pip's message above)")
    sys.path.insert(0, str(target))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(target)] + [p for p in os.environ.get("PYTHONPATH", "")
                                                               .split(os.pathsep) if p])
    importlib.invalidate_caches()
    return target

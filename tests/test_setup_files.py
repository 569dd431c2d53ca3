"""The ways into the course (make, conda, Docker, CI) install the same thing and agree on what they need.

Behaviour, not restated pins: the lock satisfies pyproject.toml and installs on its minimum Python, every Python
the setup files use meets that minimum, the Dockerfile only uses files it copied, and the commands the README gives
exist.
"""
from __future__ import annotations

import importlib.metadata as metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from conftest import ROOT

LOCK = ROOT / "requirements-lock.txt"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
REQUIRES_PYTHON = SpecifierSet(PYPROJECT["project"]["requires-python"])
MIN_PYTHON = Version(next(s.version for s in REQUIRES_PYTHON if s.operator == ">="))
README = (ROOT / "README.md").read_text()
# The python3 each Ubuntu LTS ships (Ubuntu's package pages); an image on a release not listed here fails loudly.
UBUNTU_PYTHON = {"20.04": "3.8.10", "22.04": "3.10.12", "24.04": "3.12.3"}


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_requirements() -> list:
    lines = [line for line in LOCK.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return [Requirement(line) for line in lines]


def lock_pins() -> dict:
    pins = {}
    for req in lock_requirements():
        (spec,) = req.specifier
        assert spec.operator == "==", f"lock line {req} is not an exact pin"
        pins[normal(req.name)] = spec.version
    return pins


# ---------------------------------------------------------------- the lock
def test_lock_satisfies_every_range_in_pyproject():
    project, pins = PYPROJECT["project"], lock_pins()
    # the tensorrt extra is outside the lock on purpose: `make setup TENSORRT=1` adds it on CUDA machines only
    groups = {k: v for k, v in project["optional-dependencies"].items() if k != "tensorrt"}
    for spec in project["dependencies"] + [r for group in groups.values() for r in group]:
        req = Requirement(spec)
        name = normal(req.name)
        assert name in pins, f"{name} is in pyproject.toml but not in the lock file"
        assert req.specifier.contains(pins[name], prereleases=True), f"lock pins {name}=={pins[name]}, not {req}"


def test_lock_installs_on_pyprojects_minimum_python():
    """Each locked package's own Requires-Python (read from this environment, which installed the lock) must admit
    the minimum Python that pyproject.toml, the Makefile check and the README promise."""
    pins, checked = lock_pins(), 0
    for dist in metadata.distributions():
        name = normal(dist.metadata["Name"])
        if pins.get(name) != dist.version:
            continue
        checked += 1
        needs = dist.metadata.get("Requires-Python")
        assert not needs or SpecifierSet(needs).contains(MIN_PYTHON), \
            f"{name}=={dist.version} needs Python {needs}: raise requires-python or pin an older {name}"
    assert checked >= 0.9 * len(pins), "this environment does not hold the lock: run `make setup`"


def test_cuda_wheels_are_linux_only_in_the_lock():
    # macOS (Apple silicon) installs the same lock: torch's CUDA dependencies must not apply there
    for req in lock_requirements():
        if re.match(r"^(nvidia-(?!ml-py)|cuda-|triton)", normal(req.name)):
            assert req.marker is not None and not req.marker.evaluate({"platform_system": "Darwin"}), \
                f"{req} would break installs on macOS"


# ---------------------------------------------------------------- Python everywhere
def test_readme_states_pyprojects_minimum_python():
    assert f"Python {MIN_PYTHON} or newer" in README


def test_setup_checks_the_python_before_creating_anything():
    # the first command of a fresh setup runs the version check (tools/torch_build.py choose)
    out = subprocess.run(["make", "-n", "--no-print-directory", "setup", "VENV=/nonexistent/venv"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60).stdout
    commands = [line for line in out.splitlines() if "python" in line]
    assert "torch_build.py choose" in commands[0] and "-m venv" not in commands[0], commands


def test_conda_python_meets_the_minimum():
    spec = re.search(r"^\s*-\s*python\s*([<>=!.,\d\s]+)$", (ROOT / "environment.yml").read_text(), re.M).group(1)
    conda = SpecifierSet(spec.replace(" ", ""))
    lowest = next(s.version for s in conda if s.operator == ">=")
    assert Version(lowest) >= MIN_PYTHON, f"environment.yml allows Python {lowest}"


def test_environment_yml_installs_the_lock_and_the_package():
    text = (ROOT / "environment.yml").read_text()
    assert re.search(r"^\s*-\s*-r requirements-lock\.txt\s*$", text, re.M)
    assert re.search(r"^\s*-\s*-e \.\s*$", text, re.M)


# ---------------------------------------------------------------- Docker
def dockerfile() -> list:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_python_meets_the_minimum():
    base = next(rest for word, rest in dockerfile() if word == "FROM")
    m = re.match(r"ubuntu:(\d\d\.\d\d)$", base)
    assert m and m.group(1) in UBUNTU_PYTHON, f"add the python3 of {base} to UBUNTU_PYTHON"
    assert REQUIRES_PYTHON.contains(UBUNTU_PYTHON[m.group(1)]), f"{base} ships Python {UBUNTU_PYTHON[m.group(1)]}"


def test_dockerfile_copies_every_repository_file_before_a_step_uses_it():
    copied, workdir = set(), "/"

    def was_copied(path: str) -> bool:
        return any(path == c or path.startswith(c + "/") for c in copied)

    for word, rest in dockerfile():
        if word == "WORKDIR":
            workdir = rest
        elif word == "COPY":
            *sources, _dest = [p for p in rest.split() if not p.startswith("--")]
            for source in sources:
                assert (ROOT / source).exists(), f"Dockerfile copies {source}, which does not exist"
                copied.add(source.rstrip("/"))
        elif word == "RUN":
            used = {t.removeprefix("./") for t in re.findall(r"(?<![\w/])[\w.][\w./-]*", rest)}
            used = {p for p in used if "/" in p and (ROOT / p).is_file()}
            if "torch_build.py" in rest:          # the tool reads both from the folder above tools/
                used |= {"requirements-lock.txt", "pyproject.toml"}
            if "-e ." in rest:
                used |= {"pyproject.toml", "utils"}
            for path in used:
                assert was_copied(path), f"a RUN step uses {path} before COPY brings it in"
    assert workdir.startswith("/home/")


def test_docker_lab_gets_the_same_learner_settings_as_make_lab():
    instr = dockerfile()
    workdir = next(rest for word, rest in instr if word == "WORKDIR")
    env = " ".join(rest for word, rest in instr if word == "ENV")
    assert f"JUPYTER_CONFIG_PATH={workdir}/.jupyter" in env
    assert re.search(r"NVIDIA_DRIVER_CAPABILITIES=\S*compute", env), "without `compute` the container has no CUDA"
    entry = next(rest for word, rest in instr if word == "ENTRYPOINT")
    assert "lab" in entry and f"--ServerApp.root_dir={workdir}" in entry
    runs = " ".join(rest for word, rest in instr if word == "RUN")
    assert "torch_build.py install" in runs, "Docker must install the build the way make setup does"
    users = [rest for word, rest in instr if word == "USER"]
    assert users and users[-1] not in ("root", "0")


def torch_build_choices() -> tuple:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import torch_build
    finally:
        sys.path.pop(0)
    return torch_build.CHOICES


def test_docker_torch_argument_is_a_build_the_tool_accepts():
    arg = next(rest for word, rest in dockerfile() if word == "ARG" and rest.startswith("TORCH"))
    assert arg.partition("=")[2] in torch_build_choices()


# ---------------------------------------------------------------- README and CI
def test_readme_make_commands_exist_and_ci_runs_the_test_command():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    commands = re.findall(r"`?make ([\w-]+)", README)
    assert {"lab", "test"} <= set(commands)
    for target in commands:
        assert target in targets, f"README runs `make {target}`, which the Makefile does not have"
    assert re.search(r"^make test$", (ROOT / ".ci" / "run").read_text(), re.M)


def test_readme_torch_values_are_builds_the_tool_accepts():
    values = set(re.findall(r"TORCH=(\w+)", README))
    assert values and values <= set(torch_build_choices())


@pytest.mark.slow
def test_setup_completes_a_venv_left_without_pip(tmp_path: Path):
    """Ubuntu's python3 without python3-venv makes .venv/bin/python and stops before pip. After the learner installs
    the package, the next `make` must make the venv again, not skip it because bin/python exists."""
    venv_step = next(line.strip() for line in (ROOT / "Makefile").read_text().splitlines()
                     if line.startswith("\t") and "-m venv" in line)
    venv = tmp_path / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    assert subprocess.run([venv / "bin" / "python", "-m", "pip", "--version"], capture_output=True).returncode != 0
    command = (venv_step.replace("$(BIN)", str(venv / "bin")).replace("$(PYTHON)", sys.executable)
               .replace("$(VENV)", str(venv)))
    subprocess.run(["bash", "-c", command], check=True, timeout=300)
    assert subprocess.run([venv / "bin" / "python", "-m", "pip", "--version"], capture_output=True).returncode == 0
    # and a complete environment (a conda VENV included) is left alone: the step does nothing the second time
    before = (venv / "pyvenv.cfg").stat().st_mtime_ns
    subprocess.run(["bash", "-c", command], check=True, timeout=300)
    assert (venv / "pyvenv.cfg").stat().st_mtime_ns == before

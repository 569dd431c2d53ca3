"""The setup files agree with each other: one lock file for setup, CI, conda and Docker; README commands are real."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from conftest import ROOT

LOCK = ROOT / "requirements-lock.txt"


def lock_pins() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        line = line.split(";")[0].strip()
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"lock line {line!r} is not an exact pin"
            pins[name.lower().replace("_", "-")] = version
    return pins


def test_lock_pins_the_required_stack():
    pins = lock_pins()
    assert pins["torch"] == "2.14.1" and pins["torchvision"] == "0.29.1" and pins["nbgrader"] == "0.9.6"
    assert pins["jupyterlab"].startswith("4.") and pins["notebook"].startswith("7.")
    for name in ("papermill", "ipywidgets", "matplotlib", "scikit-learn", "tqdm", "pytest", "nvidia-ml-py",
                 "torchmetrics", "tensorboard", "onnx", "onnxruntime", "pytest-xdist", "pytest-timeout"):
        assert name in pins, f"{name} is used by the course but not pinned in the lock file"


def test_lock_satisfies_every_range_in_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = lock_pins()
    reqs = project["dependencies"] + [r for group in project["optional-dependencies"].values() for r in group]
    for spec in reqs:
        req = Requirement(spec)
        name = req.name.lower().replace("_", "-")
        assert name in pins, f"{name} is in pyproject.toml but not in the lock file"
        assert req.specifier.contains(pins[name], prereleases=True), f"lock pins {name}=={pins[name]}, not {req}"


def test_cuda_wheels_are_linux_only_in_the_lock():
    for line in LOCK.read_text().splitlines():
        if re.match(r"^(nvidia-(?!ml-py)|cuda-|triton)", line):
            assert 'platform_system == "Linux"' in line, f"{line!r} would break installs on macOS and Windows"


def test_readme_commands_and_ci_agree():
    readme = (ROOT / "README.md").read_text()
    assert "```bash\nmake lab\n```" in readme and "```bash\nmake test\n```" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M), ".ci/run must run the README's test command"
    makefile = (ROOT / "Makefile").read_text()
    assert "-r requirements-lock.txt" in makefile
    for target in ("setup:", "lab: setup", "test: setup"):
        assert target in makefile


def test_environment_yml_installs_from_the_lock():
    text = (ROOT / "environment.yml").read_text()
    assert "-r requirements-lock.txt" in text and "-e ." in text
    assert re.search(r"python=3\.11", text)


def _dockerfile_instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_uses_the_lock_a_cuda_runtime_and_a_non_root_user():
    instr = _dockerfile_instructions()
    base = next(rest for word, rest in instr if word == "FROM")
    assert base.startswith("nvidia/cuda:") and "runtime" in base
    runs = " ".join(rest for word, rest in instr if word == "RUN")
    assert "pip install -r requirements-lock.txt" in runs
    users = [rest for word, rest in instr if word == "USER"]
    assert users and users[-1] not in ("root", "0")
    entry = next(rest for word, rest in instr if word == "ENTRYPOINT")
    assert "jupyter" in entry and "lab" in entry


def test_every_file_the_dockerfile_copies_exists():
    copies = [rest for word, rest in _dockerfile_instructions() if word == "COPY"]
    assert copies
    for rest in copies:
        parts = [p for p in rest.split() if not p.startswith("--")]
        for source in parts[:-1]:
            assert (ROOT / source).exists(), f"Dockerfile copies {source}, which does not exist"


@pytest.mark.parametrize("path", ["days", "solutions", "utils", "tests", "environment.yml", "Dockerfile",
                                  "README.md", "nbgrader_config.py", ".ci/run", "pyproject.toml"])
def test_top_level_layout(path):
    assert (ROOT / path).exists()

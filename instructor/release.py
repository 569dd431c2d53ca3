"""The learner-only release: the part of the course that instructors who keep solutions private publish.

    python -m instructor.release ../gpu-bootcamp-learners     # from the repository root

The release is an explicit list of learner items (``LEARNER_ITEMS``, ``LEARNER_TESTS``): the days, ``utils``, and
everything ``make lab`` and the Dockerfile need (the setup tools under ``tools/``, the lab settings in ``.jupyter/``,
the lab extension ``course_lab``). Anything not listed, such as ``solutions/``, ``instructor/``, the authoring tools
and ``nbgrader_config.py``, is left out by construction.
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from .feedback import BEGIN_HIDDEN, END_HIDDEN

LEARNER_ITEMS = ("days", "utils", "course_lab", "results", ".jupyter", "README.md", "environment.yml", "Dockerfile",
                 ".dockerignore", "Makefile", "pyproject.toml", "requirements-lock.txt",
                 "tools/torch_build.py", "tools/pip_progress.py", "tools/workspace.py")
LEARNER_TESTS = ("test_environment.py", "test_data.py", "test_models.py", "test_timing.py", "test_training.py")
_FORBIDDEN = ("BEGIN SOLUTION", "END SOLUTION", BEGIN_HIDDEN, END_HIDDEN)
_BUILD_LEFTOVERS = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "*.pyc", "*.egg-info")


def export_learner_release(repo: str | Path, dest: str | Path) -> list[Path]:
    """Copy the learner-facing part of the course from ``repo`` to ``dest`` (which must not exist yet).

    Included: ``days/``, ``utils/``, ``results/``, the setup files (with the tools and lab settings they use), and
    the unit tests that need no solutions.
    Every copied notebook and document is checked for solution and hidden-test markers; a ``ValueError`` names a
    file that has one. Returns the copied files.
    """
    repo, dest = Path(repo), Path(dest)
    if dest.exists():
        raise FileExistsError(f"{dest} exists: give a new folder, the export never overwrites")
    if not (repo / "days").is_dir():
        raise FileNotFoundError(f"{repo} has no days/ folder: pass the course repository's root")
    dest.mkdir(parents=True)
    for item in LEARNER_ITEMS:
        src = repo / item
        (dest / item).parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dest / item, ignore=_BUILD_LEFTOVERS)
        elif src.is_file():
            shutil.copy2(src, dest / item)
        else:
            raise FileNotFoundError(f"{src} is missing: the learner release needs it (instructor/release.py)")
    (dest / "tests").mkdir()
    for name in ("conftest.py",) + LEARNER_TESTS:
        if (repo / "tests" / name).is_file():
            shutil.copy2(repo / "tests" / name, dest / "tests" / name)
    (dest / ".ci").mkdir()
    (dest / ".ci" / "run").write_text("#!/usr/bin/env bash\nset -euo pipefail\ncd \"$(dirname \"$0\")/..\"\n"
                                      "make test-fast\n")
    files = sorted(p for p in dest.rglob("*") if p.is_file())
    for path in files:
        if path.suffix not in (".ipynb", ".md") and path.parent.name != "days":
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for marker in _FORBIDDEN:
            if marker in text:
                raise ValueError(f"{path} contains {marker!r}: the learner release must not")
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m instructor.release", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dest", help="a new folder for the learner release")
    ap.add_argument("--repo", default=".", help="the course repository (default: the current folder)")
    args = ap.parse_args(argv)
    files = export_learner_release(args.repo, args.dest)
    print(f"exported {len(files)} files to {args.dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

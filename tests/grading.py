"""Helpers to drive nbgrader in a throw-away copy of the course (never in the repository itself)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def make_course_copy(dest: Path, days: list[str] | None = None) -> Path:
    """Copy nbgrader_config.py and solutions/ (optionally only ``days``) into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "nbgrader_config.py", dest / "nbgrader_config.py")
    src = ROOT / "solutions"
    for day_dir in sorted(src.glob("day[0-9][0-9]")):
        if days is None or day_dir.name in days:
            shutil.copytree(day_dir, dest / "solutions" / day_dir.name,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    return dest


def nbgrader(course: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run ``nbgrader <args>`` in ``course``; raise with its output if it fails."""
    cmd = [sys.executable, "-m", "nbgrader", *args]
    result = subprocess.run(cmd, cwd=course, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise AssertionError(f"`nbgrader {' '.join(args)}` failed ({result.returncode}):\n"
                             f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result


def submit(course: Path, student: str, day: str, notebooks: list[Path]) -> Path:
    """Place ``notebooks`` as ``student``'s submission of ``day`` (nbgrader's submitted/ layout)."""
    folder = course / "submitted" / student / day
    folder.mkdir(parents=True, exist_ok=True)
    for nb in notebooks:
        shutil.copy2(nb, folder / nb.name)
    return folder


def scores(course: Path, day: str, students: list[str]) -> dict[str, tuple[float, float]]:
    """``{student: (score, max_score)}`` for ``day`` from the course's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s: (gb.find_submission(day, s).score, gb.find_submission(day, s).max_score) for s in students}

"""Helpers to drive nbgrader in a throw-away copy of the course (never in the repository itself)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

# Set by the test harness, never by an instructor's shell. PYTEST_CURRENT_TEST, inherited by the kernel, turns off
# ipykernel's capture of descriptor 2 (ipykernel/iostream.py), which hid from the round trip every C++ log line that
# an instructor's grading scores as a failed cell; TQDM_DISABLE and MPLBACKEND change what cells print.
_HARNESS_ONLY_VARS = ("PYTEST_CURRENT_TEST", "TQDM_DISABLE", "MPLBACKEND")
NOISY_LIBRARIES = Path(__file__).with_name("noisy_libraries.py")


def grading_env(course: Path, *, noisy_libraries: bool = False) -> dict[str, str]:
    """The environment nbgrader runs in: an instructor's shell (``python -m instructor.grading``), not pytest's.

    With ``noisy_libraries`` every kernel starts with tests/noisy_libraries.py, so that the profiler, torch.compile,
    DataLoader workers, process groups and subprocesses write to descriptor 2 as they do on some machines.
    """
    env = {k: v for k, v in os.environ.items() if k not in _HARNESS_ONLY_VARS}
    if noisy_libraries:
        startup = course / ".ipython" / "profile_default" / "startup"
        startup.mkdir(parents=True, exist_ok=True)
        shutil.copy2(NOISY_LIBRARIES, startup / "00_noisy_libraries.py")
        env["IPYTHONDIR"] = str(course / ".ipython")
    return env


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


def nbgrader(course: Path, *args: str, timeout: float = 900,
             noisy_libraries: bool = False) -> subprocess.CompletedProcess:
    """Run ``nbgrader <args>`` in ``course`` as an instructor's shell would (:func:`grading_env`); raise with its
    output if it fails."""
    cmd = [sys.executable, "-m", "nbgrader", *args]
    result = subprocess.run(cmd, cwd=course, capture_output=True, text=True, timeout=timeout,
                            env=grading_env(course, noisy_libraries=noisy_libraries))
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


def cell_scores(course: Path, day: str, students: list[str]) -> dict[str, dict[str, tuple[float, float]]]:
    """``{student: {grade_id: (score, max_score)}}`` for every graded cell of ``day`` in the course's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s: {g.name: (g.score, g.max_score) for nb in gb.find_submission(day, s).notebooks for g in nb.grades}
                for s in students}


def mutate_notebook(src: Path, dest: Path, changes: list[tuple[str, str | None, str, str]]) -> Path:
    """Write ``src`` to ``dest`` with each ``(grade_id, find, replace, label)`` applied to the cell ``grade_id``
    (``find`` None: ``replace`` is the cell's whole new source).

    ``find`` must occur exactly once in that cell's source; otherwise the change no longer says what it meant (the
    cell was edited since) and this raises AssertionError naming the notebook, the cell and ``label``.
    """
    import json

    nb = json.loads(src.read_text(encoding="utf-8"))
    cells = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id"): c for c in nb["cells"]}
    for grade_id, find, replace, label in changes:
        cell = cells.get(grade_id)
        assert cell is not None, f"{src.name}: no cell with grade_id {grade_id!r} for {label}"
        if find is None:    # the whole cell, as another learner wrote it
            cell["source"] = replace.splitlines(keepends=True)
            continue
        source = "".join(cell["source"])
        found = source.count(find)
        assert found == 1, (f"{src.name}, cell {grade_id}: the text to change occurs {found} times, not once, for "
                            f"{label}; the solution was edited: update that entry. Text: {find!r}")
        cell["source"] = source.replace(find, replace).splitlines(keepends=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return dest

"""Grading a class: autograde every submission in its own nbgrader process, several at once, so that one broken
submission never stops the batch and a large class uses every core it is given.

    python -m instructor.grading autograde DAY [--jobs N] [--timeout S]     # inside an nbgrader course folder

See docs/instructor_guide.md for the whole workflow (generate, collect, autograde, feedback, CSV).
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

_CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2: "<quota> <period>" in microseconds, or "max <period>"


@dataclass
class GradeOutcome:
    """What happened to one student's submission: ``graded``, ``rejected`` (not gradable) or ``failed``."""

    student: str
    status: str
    score: float | None = None
    max_score: float | None = None
    message: str = ""


def available_cores() -> int:
    """CPU cores this process may use: its CPU affinity, capped by a cgroup v2 CPU quota where one is set.

    A container started with a CPU limit (Docker ``--cpus``, JupyterHub's ``cpu_limit``) still sees every host core
    in ``os.cpu_count()`` and in its affinity; the quota in ``/sys/fs/cgroup/cpu.max`` is the real bound.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = _CGROUP_CPU_MAX.read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def sanitize_submission(folder: Path, originals: Path) -> list[str]:
    """Make one ``submitted/<student>/<day>`` folder gradable, or raise ``ValueError`` saying why it is not.

    Invalid notebook JSON cannot be graded (ValueError). A graded cell pasted twice (duplicated ``grade_id``) makes
    nbgrader abort the *whole batch*, so later copies lose their grading metadata and stay as plain cells.
    Originals of changed files are kept under ``originals``. Returns notes on what was changed.
    """
    import nbformat

    notes: list[str] = []
    for path in sorted(folder.glob("*.ipynb")):
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            nb = nbformat.reads(text, as_version=4)
        except Exception as e:  # nbformat raises several types for broken files
            raise ValueError(f"{path.name} is not a valid notebook ({type(e).__name__}: {str(e)[:160]}). Ask for a "
                             "fresh copy; JupyterLab's File > Download saves a valid one.") from e
        seen: set[str] = set()
        changed = False
        for cell in nb.cells:
            gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if gid is None:
                continue
            if gid in seen:
                del cell.metadata["nbgrader"]
                notes.append(f"{path.name}: a second cell with grade_id {gid!r} (a pasted copy) is graded as "
                             "plain code")
                changed = True
            seen.add(gid)
        if changed:
            originals.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, originals / path.name)
            nbformat.write(nb, str(path))
    return notes


def _autograde_one(course: Path, assignment: str, student: str, cell_timeout_s: int | None,
                   env: dict[str, str]) -> GradeOutcome:
    """Run ``nbgrader autograde`` for one student in a process of its own."""
    cmd = [sys.executable, "-m", "nbgrader", "autograde", assignment, "--student", student, "--create",
           "--force", "--log-level=WARN"]
    if cell_timeout_s is not None:
        cmd.append(f"--Execute.timeout={int(cell_timeout_s)}")
    result = subprocess.run(cmd, cwd=course, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr).strip().splitlines()[-6:]
        return GradeOutcome(student, "failed", message=" | ".join(tail))
    return GradeOutcome(student, "graded")


def _grader_env(jobs: int) -> dict[str, str]:
    """The environment of each grader: the cores shared out between ``jobs`` graders, unless the caller chose."""
    env = dict(os.environ)
    threads = str(max(1, available_cores() // jobs))
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, threads)
    return env


def grade_class(course: str | Path, assignment: str, *, jobs: int | None = None, cell_timeout_s: int | None = None,
                log=print) -> list[GradeOutcome]:
    """Autograde every submission of ``assignment`` in the nbgrader course folder ``course``.

    Each student is graded by a process of its own, ``jobs`` of them at once (default: ``available_cores()``).
    One broken submission never stops the batch: unreadable notebooks are moved to ``rejected/`` with a reason,
    pasted graded cells are neutralised, and a student whose grading fails is reported with nbgrader's message.
    ``cell_timeout_s`` overrides ``Execute.timeout`` (an infinite loop costs that much, then the cell scores 0).
    Returns one outcome per student, sorted by student.
    """
    from nbgrader.api import Gradebook

    course = Path(course)
    jobs = available_cores() if jobs is None else jobs
    if jobs < 1:
        raise ValueError(f"jobs={jobs}: give 1 or more graders to run at once")
    outcomes: dict[str, GradeOutcome] = {}
    to_grade: list[str] = []
    students = sorted(p.name for p in (course / "submitted").iterdir() if (p / assignment).is_dir())
    for student in students:
        folder = course / "submitted" / student / assignment
        try:
            for note in sanitize_submission(folder, course / "sanitized_originals" / student / assignment):
                log(f"[grade] {student}: {note}")
            to_grade.append(student)
        except ValueError as e:
            dest = course / "rejected" / student / assignment
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(dest, ignore_errors=True)
            shutil.move(str(folder), str(dest))
            (dest / "REJECTED.txt").write_text(str(e) + "\n")
            outcomes[student] = GradeOutcome(student, "rejected", message=str(e))
            log(f"[grade] {student}: REJECTED: {e}")

    # The graders write to one SQLite gradebook: create it (and run its migrations) once, before they start.
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}"):
        pass
    env = _grader_env(jobs)
    log(f"[grade] {len(to_grade)} submission(s), {min(jobs, max(1, len(to_grade)))} grader(s) at once")
    graded: list[GradeOutcome] = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        running = [pool.submit(_autograde_one, course, assignment, s, cell_timeout_s, env) for s in to_grade]
        for done, future in enumerate(as_completed(running), 1):
            graded.append(future.result())
            log(f"[grade] {graded[-1].student}: {graded[-1].status} ({done}/{len(to_grade)})")
    for o in graded:
        if o.status == "failed":
            # A grader can fail for reasons outside the submission: the SQLite gradebook locked by another grader for
            # longer than SQLite waits (5 s), or a kernel that did not start in time on an overloaded machine. So a
            # failed student is graded once more, alone, after the others; a second failure is reported.
            log(f"[grade] {o.student}: failed ({o.message[-120:]}); grading again, alone")
            o = _autograde_one(course, assignment, o.student, cell_timeout_s, env)
        if o.status == "failed":
            log(f"[grade] {o.student}: FAILED twice: {o.message}")
        outcomes[o.student] = o
    result = [outcomes[s] for s in students]
    _fill_scores(course, assignment, result)
    for o in result:
        if o.status == "graded":
            log(f"[grade] {o.student}: {o.score:g} / {o.max_score:g}")
    return result


def _fill_scores(course: Path, assignment: str, outcomes: list[GradeOutcome]) -> None:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for o in outcomes:
            if o.status == "graded":
                sub = gb.find_submission(assignment, o.student)
                o.score, o.max_score = float(sub.score), float(sub.max_score)


def main(argv: list[str] | None = None) -> int:
    """``python -m instructor.grading autograde DAY [--course DIR] [--jobs N] [--timeout S]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m instructor.grading")
    sub = ap.add_subparsers(dest="command", required=True)
    g = sub.add_parser("autograde", help="grade every submission of an assignment, each in a process of its own")
    g.add_argument("assignment")
    g.add_argument("--course", default=".", help="the nbgrader course folder (default: the current folder)")
    g.add_argument("--jobs", "-j", type=int, default=None,
                   help=f"submissions graded at once (default: the cores this process may use, here "
                        f"{available_cores()})")
    g.add_argument("--timeout", type=int, default=None, help="seconds per cell (default: nbgrader_config.py)")
    args = ap.parse_args(argv)
    outcomes = grade_class(args.course, args.assignment, jobs=args.jobs, cell_timeout_s=args.timeout)
    bad = [o for o in outcomes if o.status != "graded"]
    print(f"[grade] {len(outcomes) - len(bad)} graded, {len(bad)} not graded "
          f"({', '.join(o.student for o in bad) or 'none'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Grading a class: autograde every submission one student at a time, so one broken submission never stops the batch.

    python -m instructor.grading autograde DAY [--timeout S]     # inside an nbgrader course folder

See docs/instructor_guide.md for the whole workflow (generate, collect, autograde, feedback, CSV).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class GradeOutcome:
    """What happened to one student's submission: ``graded``, ``rejected`` (not gradable) or ``failed``."""

    student: str
    status: str
    score: float | None = None
    max_score: float | None = None
    message: str = ""


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


def grade_class(course: str | Path, assignment: str, *, cell_timeout_s: int | None = None,
                log=print) -> list[GradeOutcome]:
    """Autograde every submission of ``assignment`` in the nbgrader course folder ``course``, one student at a time.

    One broken submission never stops the batch: unreadable notebooks are moved to ``rejected/`` with a reason,
    pasted graded cells are neutralised, and a student whose grading fails is reported with nbgrader's message.
    ``cell_timeout_s`` overrides ``Execute.timeout`` (an infinite loop costs that much, then the cell scores 0).
    """
    course = Path(course)
    outcomes: list[GradeOutcome] = []
    students = sorted(p.name for p in (course / "submitted").iterdir() if (p / assignment).is_dir())
    for student in students:
        folder = course / "submitted" / student / assignment
        try:
            for note in sanitize_submission(folder, course / "sanitized_originals" / student / assignment):
                log(f"[grade] {student}: {note}")
        except ValueError as e:
            dest = course / "rejected" / student / assignment
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(dest, ignore_errors=True)
            shutil.move(str(folder), str(dest))
            (dest / "REJECTED.txt").write_text(str(e) + "\n")
            outcomes.append(GradeOutcome(student, "rejected", message=str(e)))
            log(f"[grade] {student}: REJECTED: {e}")
            continue
        cmd = [sys.executable, "-m", "nbgrader", "autograde", assignment, "--student", student, "--create",
               "--force", "--log-level=WARN"]
        if cell_timeout_s is not None:
            cmd.append(f"--Execute.timeout={int(cell_timeout_s)}")
        result = subprocess.run(cmd, cwd=course, capture_output=True, text=True)
        if result.returncode != 0:
            tail = (result.stdout + result.stderr).strip().splitlines()[-6:]
            outcomes.append(GradeOutcome(student, "failed", message=" | ".join(tail)))
            log(f"[grade] {student}: FAILED: {outcomes[-1].message}")
            continue
        outcomes.append(GradeOutcome(student, "graded"))
    _fill_scores(course, assignment, outcomes)
    for o in outcomes:
        if o.status == "graded":
            log(f"[grade] {o.student}: {o.score:g} / {o.max_score:g}")
    return outcomes


def _fill_scores(course: Path, assignment: str, outcomes: list[GradeOutcome]) -> None:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for o in outcomes:
            if o.status == "graded":
                sub = gb.find_submission(assignment, o.student)
                o.score, o.max_score = float(sub.score), float(sub.max_score)


def main(argv: list[str] | None = None) -> int:
    """``python -m instructor.grading autograde DAY [--course DIR] [--timeout S]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m instructor.grading")
    sub = ap.add_subparsers(dest="command", required=True)
    g = sub.add_parser("autograde", help="grade every submission of an assignment, one student at a time")
    g.add_argument("assignment")
    g.add_argument("--course", default=".", help="the nbgrader course folder (default: the current folder)")
    g.add_argument("--timeout", type=int, default=None, help="seconds per cell (default: nbgrader_config.py)")
    args = ap.parse_args(argv)
    outcomes = grade_class(args.course, args.assignment, cell_timeout_s=args.timeout)
    bad = [o for o in outcomes if o.status != "graded"]
    print(f"[grade] {len(outcomes) - len(bad)} graded, {len(bad)} not graded "
          f"({', '.join(o.student for o in bad) or 'none'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

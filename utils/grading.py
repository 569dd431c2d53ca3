"""Grading support: feedback that never reveals hidden tests, and a learner-only export of the course.

``RedactHiddenTests`` is an nbgrader preprocessor, registered for ``nbgrader generate_feedback`` in
``nbgrader_config.py``. nbgrader's own feedback shows the full source of every autograded test cell, hidden tests
included, and a failing hidden assert quotes its line in the traceback. The preprocessor replaces each hidden block
with a one-line placeholder and redacts any output line that quotes hidden code, keeping pass/fail and points.
"""
from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor

BEGIN_HIDDEN = "### BEGIN HIDDEN TESTS"
END_HIDDEN = "### END HIDDEN TESTS"
PLACEHOLDER = "# [hidden tests: {n} line(s) not shown]"
REDACTED = "[line from a hidden test redacted]"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_MIN_QUOTE = 6  # shorter fragments (")", "pass") would redact innocent lines


def split_hidden(source: str) -> tuple[str, list[str]]:
    """Return ``source`` with every hidden block replaced by a placeholder, and the hidden lines removed."""
    out: list[str] = []
    hidden: list[str] = []
    inside = False
    block: list[str] = []
    for line in source.splitlines():
        if line.strip() == BEGIN_HIDDEN:
            inside, block = True, []
            continue
        if line.strip() == END_HIDDEN and inside:
            inside = False
            out.append(PLACEHOLDER.format(n=len(block)))
            hidden += block
            continue
        (block if inside else out).append(line)
    if inside:  # an unterminated block is still hidden
        out.append(PLACEHOLDER.format(n=len(block)))
        hidden += block
    return "\n".join(out), hidden


def _quotes_hidden(text: str, hidden: list[str]) -> bool:
    plain = _ANSI.sub("", text).strip()
    if len(plain) < _MIN_QUOTE:
        return False
    for line in hidden:
        code = line.strip()
        if len(code) >= _MIN_QUOTE and (code in plain or plain in code):
            return True
        # a traceback shows the failing line after an arrow and a line number: "---> 5 assert f(2) == 2"
        if len(code) >= _MIN_QUOTE and code in re.sub(r"^[-> ]*\d+\s*", "", plain):
            return True
    return False


def redact_text(text: str, hidden: list[str]) -> str:
    """Replace each line of ``text`` that quotes one of the ``hidden`` lines."""
    return "\n".join(REDACTED if _quotes_hidden(line, hidden) else line for line in text.split("\n"))


class RedactHiddenTests(NbGraderPreprocessor):
    """Feedback preprocessor: hide hidden-test code and any output that quotes it."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        visible, hidden = split_hidden(cell.source)
        if not hidden:
            return cell, resources
        cell.source = visible
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [redact_text(t, hidden) for t in output.get("traceback", [])]
                if _quotes_hidden(output.get("evalue", ""), hidden):
                    output["evalue"] = REDACTED
            elif output.get("output_type") == "stream":
                output["text"] = redact_text(output.get("text", ""), hidden)
            elif "data" in output and "text/plain" in output["data"]:
                output["data"]["text/plain"] = redact_text(output["data"]["text/plain"], hidden)
        return cell, resources


# --------------------------------------------------------------------------------------------------- export
LEARNER_ITEMS = ("days", "utils", "results", "README.md", "environment.yml", "Dockerfile", ".dockerignore",
                 "Makefile", "pyproject.toml", "requirements-lock.txt")
LEARNER_TESTS = ("test_environment.py", "test_data.py", "test_models.py", "test_timing.py", "test_training.py")
_FORBIDDEN = ("BEGIN SOLUTION", "END SOLUTION", BEGIN_HIDDEN, END_HIDDEN)


def export_learner_release(repo: str | Path, dest: str | Path) -> list[Path]:
    """Copy the learner-facing part of the course from ``repo`` to ``dest`` (which must not exist yet).

    Included: ``days/``, ``utils/``, ``results/``, the setup files, and the unit tests that need no solutions.
    Excluded: ``solutions/``, gradebooks, nbgrader config, instructor docs and notebook tests. Every copied file
    is checked for solution and hidden-test markers; a ``ValueError`` names a file that has one.
    Returns the copied files.
    """
    repo, dest = Path(repo), Path(dest)
    if dest.exists():
        raise FileExistsError(f"{dest} exists: give a new folder, the export never overwrites")
    ignore = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "*.pyc", "*.egg-info", "grading.py",
                                    "test_grading*")
    dest.mkdir(parents=True)
    for item in LEARNER_ITEMS:
        src = repo / item
        if src.is_dir():
            shutil.copytree(src, dest / item, ignore=ignore)
        elif src.is_file():
            shutil.copy2(src, dest / item)
    (dest / "tests").mkdir()
    for name in ("conftest.py",) + LEARNER_TESTS:
        if (repo / "tests" / name).is_file():
            shutil.copy2(repo / "tests" / name, dest / "tests" / name)
    (dest / ".ci").mkdir()
    (dest / ".ci" / "run").write_text("#!/usr/bin/env bash\nset -euo pipefail\ncd \"$(dirname \"$0\")/..\"\n"
                                      "make test-fast\n")
    files = sorted(p for p in dest.rglob("*") if p.is_file())
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if path.suffix in (".ipynb", ".md") or path.parent.name == "days":
            for marker in _FORBIDDEN:
                if marker in text:
                    raise ValueError(f"{path} contains {marker!r}: the learner release must not")
    return files


# --------------------------------------------------------------------------------------------------- class grading
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
    import subprocess
    import sys

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
    """``python -m utils.grading autograde DAY [--timeout S]`` in a course folder; ``export-learners DEST``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m utils.grading")
    sub = ap.add_subparsers(dest="command", required=True)
    g = sub.add_parser("autograde", help="grade every submission of an assignment, one student at a time")
    g.add_argument("assignment")
    g.add_argument("--course", default=".")
    g.add_argument("--timeout", type=int, default=None, help="seconds per cell (default: nbgrader_config.py)")
    e = sub.add_parser("export-learners", help="copy the learner-only part of the course to a new folder")
    e.add_argument("dest")
    e.add_argument("--repo", default=".")
    args = ap.parse_args(argv)
    if args.command == "autograde":
        outcomes = grade_class(args.course, args.assignment, cell_timeout_s=args.timeout)
        bad = [o for o in outcomes if o.status != "graded"]
        print(f"[grade] {len(outcomes) - len(bad)} graded, {len(bad)} not graded "
              f"({', '.join(o.student for o in bad) or 'none'})")
        return 0
    files = export_learner_release(args.repo, args.dest)
    print(f"exported {len(files)} files to {args.dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

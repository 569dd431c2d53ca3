"""Grading a class: 9 synthetic submissions of one day (blank, correct, partly wrong, and broken in the ways real
submissions break), autograded in one batch at smoke size, several at once, checked against expected scores and the
CSV. Every kind of submission is there once (two correct ones: identical submissions must get identical grades);
more copies would only cost suite time."""
from __future__ import annotations

import copy
import csv
import json
import time
from pathlib import Path

import pytest

from conftest import ROOT, record_timing
from grading import make_course_copy, nbgrader
from grader_mutants.day12 import MUTANTS
from instructor.grading import grade_class

# Day 12 runs in about 15 s of cell time at smoke size, its longest cell in under 15 s when loaded: a class of it costs
# about half of what the same class of Day 26 did (28 s of cells, one cell of 20 s that starts five processes).
DAY = "day12"
POINTS = {"accumulate_gradients": 3, "accumulation_plan": 2, "train_epoch_accumulated": 3}
FULL = sum(POINTS.values())
# Two plausible mistakes from tests/grader_mutants/day12.py: the exercises they break are used by no later cell,
# so each costs exactly its own points.
ONE_BIG_FORWARD = next(m for m in MUTANTS if m.cell == "day12_accumulate_gradients")
NO_ZERO_GRAD = next(m for m in MUTANTS if m.cell == "day12_train_epoch_accumulated" and m.replace == ""
                    and "zero_grad" in m.find)


def _cell_with(nb: dict, text: str) -> dict:
    return next(c for c in nb["cells"] if text in "".join(c["source"]))


def _edit(nb: dict, marker: str, old: str, new: str) -> dict:
    nb = copy.deepcopy(nb)
    cell = _cell_with(nb, marker)
    src = "".join(cell["source"])
    assert old in src, f"{old!r} not in the {marker} cell"
    cell["source"] = src.replace(old, new)
    return nb


def _without_cell(nb: dict, grade_id: str) -> dict:
    nb = copy.deepcopy(nb)
    nb["cells"] = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") != grade_id]
    return nb


def _with_pasted_copy(nb: dict, grade_id: str) -> dict:
    nb = copy.deepcopy(nb)
    i = next(i for i, c in enumerate(nb["cells"]) if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)
    twin = copy.deepcopy(nb["cells"][i])
    twin["id"] = "a-pasted-copy"
    nb["cells"].insert(i + 1, twin)
    return nb


def with_one_big_forward(solution: dict) -> dict:
    """Day 12's solution with a plausible mistake that only a hidden assert catches (the exchange and guide tests
    use it too: its feedback must show the AssertionError with the hidden line redacted)."""
    return _edit(solution, "def accumulate_gradients", ONE_BIG_FORWARD.find, ONE_BIG_FORWARD.replace)


def variants(solution: dict) -> dict[str, tuple[dict | str, float | None]]:
    """name -> (notebook JSON or raw text, expected score; None: must be rejected with a clear message)."""
    return {
        # plausible bugs that only the hidden tests catch
        "one_big_forward": (with_one_big_forward(solution), FULL - POINTS["accumulate_gradients"]),
        "no_zero_grad": (_edit(solution, "def train_epoch_accumulated", NO_ZERO_GRAD.find, NO_ZERO_GRAD.replace),
                         FULL - POINTS["train_epoch_accumulated"]),
        # submissions broken the ways real ones break
        "deleted_test_cell": (_without_cell(solution, "day12_accumulation_plan_tests"),
                              FULL - POINTS["accumulation_plan"]),
        "duplicated_grade_id": (_with_pasted_copy(solution, "day12_accumulate_gradients"), FULL),
        # a cell that never returns, as one waiting on a process that died does: interrupted at the cell timeout.
        # It sleeps rather than spins, so that it costs the suite the timeout's wall time but no CPU.
        "hung_cell": (_edit(solution, "def accumulate_gradients", "def accumulate_gradients(",
                            "import time\nwhile True:\n    time.sleep(0.2)\n\ndef accumulate_gradients("),
                      FULL - POINTS["accumulate_gradients"]),
        "invalid_json": ('{"cells": [ this is not json', None),
    }


def build_class(solution: dict, blank: dict, n_blank: int, n_correct: int) -> dict[str, tuple[dict | str, float | None]]:
    students: dict[str, tuple[dict | str, float | None]] = {}
    for i in range(n_blank):
        students[f"blank{i:02d}"] = (blank, 0.0)
    for i in range(n_correct):
        students[f"correct{i:02d}"] = (solution, float(FULL))
    students.update(variants(solution))
    return students


@pytest.mark.notebooks
def test_a_class_of_submissions_grades_as_expected(tmp_path: Path):
    src = next((ROOT / "solutions" / DAY).glob("*.ipynb"))
    solution = json.loads(src.read_text())
    blank = json.loads((ROOT / "days" / DAY / src.name).read_text())
    students = build_class(solution, blank, n_blank=1, n_correct=2)
    assert len(students) == 9
    course = make_course_copy(tmp_path / "course", days=[DAY])
    nbgrader(course, "generate_assignment", DAY, "--force", "--log-level=WARN")
    for name, (nb, _) in students.items():
        folder = course / "submitted" / name / DAY
        folder.mkdir(parents=True)
        (folder / src.name).write_text(nb if isinstance(nb, str) else json.dumps(nb))

    start = time.perf_counter()
    log: list[str] = []
    # A per-cell limit below the configured five minutes, so the hung cell costs only this long; it must stay
    # well above Day 12's longest honest cell (the setup cell, up to 15 s on a loaded machine).
    outcomes = {o.student: o for o in grade_class(course, DAY, cell_timeout_s=40, log=log.append)}
    elapsed = time.perf_counter() - start
    record_timing(f"autograde x{len(students)}", DAY, elapsed)
    assert outcomes["invalid_json"].status == "rejected" and "not a valid notebook" in outcomes["invalid_json"].message
    assert (course / "rejected" / "invalid_json" / DAY / "REJECTED.txt").is_file()
    assert any("duplicated_grade_id" in line and "pasted copy" in line for line in log), log
    assert all(o.status == "graded" for name, o in outcomes.items() if name != "invalid_json"), \
        [(o.student, o.message) for o in outcomes.values() if o.status == "failed"]
    nbgrader(course, "export", "--to", "grades.csv")
    with open(course / "grades.csv") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    for name, (_, expected) in students.items():
        if expected is None:
            assert name not in rows or float(rows[name]["raw_score"] or 0) == 0, rows.get(name)
            continue
        assert name in rows, f"{name} missing from the CSV"
        assert float(rows[name]["raw_score"]) == expected, f"{name}: {rows[name]['raw_score']} != {expected}"
        assert float(rows[name]["max_score"]) == FULL
        assert outcomes[name].score == expected
    per_submission = elapsed / (len(students) - 1)
    print(f"autograded {len(students)} submissions in {elapsed:.0f} s: {per_submission:.1f} s per submission")

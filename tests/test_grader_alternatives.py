"""Grading both ways: every plausible correct answer kept in tests/grader_alternatives/dayNN.py keeps full marks.

An alternative (grader_alternatives.Alternative) is a correct answer to one exercise written another way. For each
day, round k holds the k-th alternative of every exercise in one submission, graded by `nbgrader autograde` as an
instructor grades, with libraries that write to standard error (tests/noisy_libraries.py). Every test cell of the
round must give full marks: a correct answer never loses points, whichever exercise's test would read it. When a
round loses points, each of its alternatives is graded again alone, so the failure names the answer that lost.

`make test` grades the first alternative of every exercise inside the round trip (tests/test_grading.py, one
submission beside the blank and the solution); `make test-grader` grades them all, here. Fast checks (no notebook)
keep the list from rotting, as for the mutants.
"""
from __future__ import annotations

import importlib
import os
import shutil
import time
from pathlib import Path

import pytest

from conftest import ROOT, course_days, record_timing
from grader_alternatives import Alternative
from grading import cell_scores, make_course_copy, mutate_notebook, nbgrader
from test_grader_mutants import day_cells

ALTERNATIVES_DIR = ROOT / "tests" / "grader_alternatives"
# Each exercise keeps at least this many correct alternatives (the issue that introduced them asks for two).
MIN_PER_EXERCISE = 2


def alternative_days() -> list[str]:
    return sorted(p.stem for p in ALTERNATIVES_DIR.glob("day[0-9][0-9].py"))


def load_alternatives(day: str) -> list[Alternative]:
    if day not in alternative_days():
        return []
    alternatives = importlib.import_module(f"grader_alternatives.{day}").ALTERNATIVES
    assert all(isinstance(a, Alternative) for a in alternatives), f"{day}.py: ALTERNATIVES must be Alternatives"
    return list(alternatives)


def label(day: str, a: Alternative) -> str:
    return f"{day} alternative {a.why!r} in {a.cell}"


def rounds_of(alternatives: list[Alternative]) -> list[list[Alternative]]:
    """Round k: the k-th alternative of every exercise (alternatives are correct, so they may share a submission)."""
    rounds: list[list[Alternative]] = []
    rank: dict[str, int] = {}
    for a in alternatives:
        k = rank[a.cell] = rank.get(a.cell, 0) + 1
        if len(rounds) < k:
            rounds.append([])
        rounds[k - 1].append(a)
    return rounds


def submit_alternatives(course: Path, day: str, student: str, alternatives: list[Alternative]) -> None:
    """Place the day's solution notebooks, with ``alternatives`` written in, as ``student``'s submission."""
    cells_of: dict[str, set[str]] = {}
    for c in day_cells(day):
        cells_of.setdefault(c.notebook, set()).add(c.grade_id)
    for nb in sorted((ROOT / "solutions" / day).glob("*.ipynb")):
        changes = [(a.cell, a.find, a.replace, label(day, a)) if not a.source else
                   (a.cell, None, a.source, label(day, a)) for a in alternatives if a.cell in cells_of[nb.name]]
        mutate_notebook(nb, course / "submitted" / student / day / nb.name, changes)


def lost_points(scores: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    return {g: s for g, s in scores.items() if s[0] < s[1]}


@pytest.mark.parametrize("day", alternative_days())
def test_alternatives_name_real_cells_and_text(day: str):
    """Fast: every alternative names a solution cell of its day, and its change still applies."""
    assert day in course_days(), f"tests/grader_alternatives/{day}.py: there is no solutions/{day}"
    cells = {c.grade_id: c for c in day_cells(day) if c.grade_id}
    problems, seen = [], set()
    for a in load_alternatives(day):
        where = label(day, a)
        sol = cells.get(a.cell)
        if sol is None or sol.role != "solution":
            problems.append(f"{where}: {a.cell!r} is not a solution cell of {day}")
        elif a.source:
            if a.find or a.replace:
                problems.append(f"{where}: give either source (the whole cell) or find/replace, not both")
            if a.source.strip() == sol.source.strip():
                problems.append(f"{where}: the source is the course's solution itself")
        elif (found := sol.source.count(a.find)) != 1 or not a.find:
            problems.append(f"{where}: the text to change occurs {found} times in the cell, not once (the solution was "
                            f"edited: update the entry): {a.find!r}")
        elif a.find == a.replace:
            problems.append(f"{where}: the change must differ from the solution")
        if not a.why.strip():
            problems.append(f"{where}: say how this answer differs and why it is correct")
        key = (a.cell, a.find, a.replace, a.source)
        if key in seen:
            problems.append(f"{where}: listed twice")
        seen.add(key)
    assert not problems, "\n".join(problems)


def test_rounds_hold_the_kth_alternative_of_each_exercise():
    a1, a2, b1, a3 = (Alternative(c, f"way {k}", source=f"x = {k}") for c, k in [("a", 1), ("a", 2), ("b", 1),
                                                                                   ("a", 3)])
    assert rounds_of([a1, a2, b1, a3]) == [[a1, b1], [a2], [a3]]


@pytest.mark.notebooks
@pytest.mark.slow
@pytest.mark.parametrize("day", alternative_days())
def test_every_alternative_keeps_full_marks(day: str, tmp_path: Path):
    """All rounds (`make test-grader`). `make test` sets GRADER_ALTERNATIVES=first: the round trip grades round 1."""
    if os.environ.get("GRADER_ALTERNATIVES", "all") == "first":
        pytest.skip("round 1 is graded by the round trip (tests/test_grading.py)")
    rounds = rounds_of(load_alternatives(day))
    course = make_course_copy(tmp_path / "course", days=[day])
    nbgrader(course, "generate_assignment", day, "--force", "--log-level=WARN")
    start = time.perf_counter()
    for k, r in enumerate(rounds):
        submit_alternatives(course, day, f"round{k + 1}", r)
    nbgrader(course, "autograde", day, "--create", "--force", "--log-level=WARN", timeout=1800, noisy_libraries=True)
    got = cell_scores(course, day, [f"round{k + 1}" for k in range(len(rounds))])
    failed_rounds = [r for k, r in enumerate(rounds) if lost_points(got[f"round{k + 1}"])]
    failures = []
    if failed_rounds:    # each alternative of a failed round alone, to name the answer that lost points
        shutil.rmtree(course / "submitted")
        alone = [a for r in failed_rounds for a in r]
        for i, a in enumerate(alone):
            submit_alternatives(course, day, f"alone{i + 1}", [a])
        nbgrader(course, "autograde", day, "--create", "--force", "--log-level=WARN", timeout=1800,
                 noisy_libraries=True)
        again = cell_scores(course, day, [f"alone{i + 1}" for i in range(len(alone))])
        failures = [f"{label(day, a)}: lost {lost_points(again[f'alone{i + 1}'])}" for i, a in enumerate(alone)
                    if lost_points(again[f"alone{i + 1}"])]
        if not failures:
            failures = [f"{day}: a round lost points that no alternative loses alone (they interfere): "
                        f"{[label(day, a) for a in r]}" for r in failed_rounds]
    record_timing("autograde alternatives", f"{day}: {sum(map(len, rounds))} in {len(rounds)} rounds",
                  time.perf_counter() - start)
    assert not failures, "correct answers lose points (change the test or state the requirement):\n" + \
        "\n".join(failures)


@pytest.mark.parametrize("day", course_days())
def test_every_exercise_has_at_least_two_correct_alternatives(day: str):
    """Fast: each exercise (a code cell the learner writes) keeps MIN_PER_EXERCISE correct answers written another
    way, so that a test stricter than the exercise's text fails `make test-grader` instead of a learner."""
    counts = {c.grade_id: 0 for c in day_cells(day) if c.role == "solution" and c.code}
    for a in load_alternatives(day):
        if a.cell in counts:
            counts[a.cell] += 1
    short = {cell: n for cell, n in counts.items() if n < MIN_PER_EXERCISE}
    assert not short, (f"tests/grader_alternatives/{day}.py: exercises with fewer than {MIN_PER_EXERCISE} correct "
                       f"alternatives: {short}")

"""The instructor guide's exercise table (tools/exercise_table.py) lists exactly the course's graded cells."""
from __future__ import annotations

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
from exercise_table import GUIDE, Row, graded_cells, guide_rows, table  # noqa: E402

FIX = "run `python tools/exercise_table.py --write` and describe any new row"


def test_guide_lists_every_graded_cell_with_its_points():
    listed = [(r.day, r.grade_id, r.points) for r in guide_rows(GUIDE.read_text(encoding="utf-8"))]
    course = [(r.day, r.grade_id, r.points) for r in graded_cells()]
    missing = [c for c in course if c not in listed]
    stale = [r for r in listed if r not in course]
    assert not missing and not stale, f"the guide lacks {missing} and lists {stale}, which no notebook has: {FIX}"
    assert listed == course, f"the guide's rows are out of course order: {FIX}"


def test_every_row_says_what_it_checks():
    rows = guide_rows(GUIDE.read_text(encoding="utf-8"))
    empty = [r.grade_id for r in rows if not r.checks]
    assert not empty, f"say what the hidden tests of {empty} check (the mechanism), in docs/instructor_guide.md"
    piped = [r.grade_id for r in rows if "|" in r.checks.replace("\\|", "")]
    assert not piped, f"a '|' in the description of {piped} splits the Markdown row: write it as '\\|'"


def test_table_round_trips_and_keeps_descriptions():
    rows = [Row("day03", "day03_a_tests", 2.0), Row("day12", "day12_b_tests", 1.5)]
    text = f"intro\n<!-- exercise-table:start -->\n{table(rows, {'day03_a_tests': 'counts syncs'})}\n" \
           "<!-- exercise-table:end -->\n"
    assert guide_rows(text) == [Row("day03", "day03_a_tests", 2.0, "counts syncs"), Row("day12", "day12_b_tests", 1.5)]

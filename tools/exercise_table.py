#!/usr/bin/env python3
"""The instructor guide's table of graded exercises: one row per graded cell of solutions/, with its points.

    python tools/exercise_table.py           # print the table (what-it-checks text kept from the guide)
    python tools/exercise_table.py --write   # rewrite the table in docs/instructor_guide.md

The day, grade_id and points columns come from the notebooks' nbgrader metadata; the "what it checks" column is
prose, kept from the guide's current table by grade_id. A graded cell that the guide does not describe yet gets an
empty description, which tests/test_exercise_table.py rejects: write one line saying what the hidden tests check.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "instructor_guide.md"
START, END = "<!-- exercise-table:start -->", "<!-- exercise-table:end -->"
HEADER = ["| Day | Exercise (`grade_id`) | Points | What it checks |", "|---|---|---|---|"]


@dataclass(frozen=True)
class Row:
    day: str
    grade_id: str
    points: float
    checks: str = ""

    def markdown(self) -> str:
        return f"| {int(self.day[3:])} | `{self.grade_id}` | {self.points:g} | {self.checks} |"


def graded_cells(root: Path = ROOT) -> list[Row]:
    """Every cell with points (nbgrader ``grade: true``) in solutions/, in course and notebook order."""
    rows = []
    for nb in sorted((root / "solutions").glob("day[0-9][0-9]/*.ipynb")):
        for cell in json.loads(nb.read_text(encoding="utf-8"))["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade"):
                rows.append(Row(nb.parent.name, meta["grade_id"], float(meta.get("points", 0))))
    return rows


_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`([^`]+)`\s*\|\s*([\d.]+)\s*\|(.*)\|\s*$")


def guide_rows(text: str) -> list[Row]:
    """The rows of the table between the guide's markers (an error if the markers are missing)."""
    if START not in text or END not in text:
        raise ValueError(f"{GUIDE.relative_to(ROOT)} has no {START} ... {END} block")
    block = text.split(START, 1)[1].split(END, 1)[0]
    rows = []
    for line in block.splitlines():
        if m := _ROW.match(line.strip()):
            rows.append(Row(f"day{int(m[1]):02d}", m[2], float(m[3]), m[4].strip()))
    return rows


def table(rows: list[Row], described: dict[str, str]) -> str:
    return "\n".join(HEADER + [Row(r.day, r.grade_id, r.points, described.get(r.grade_id, "")).markdown()
                               for r in rows])


def main(argv: list[str]) -> int:
    text = GUIDE.read_text(encoding="utf-8")
    described = {r.grade_id: r.checks for r in guide_rows(text)}
    rows = graded_cells()
    new = table(rows, described)
    if argv == ["--write"]:
        before, rest = text.split(START, 1)
        GUIDE.write_text(f"{before}{START}\n{new}\n{END}{rest.split(END, 1)[1]}", encoding="utf-8")
        todo = [r.grade_id for r in rows if not described.get(r.grade_id)]
        print(f"wrote {len(rows)} rows to {GUIDE.relative_to(ROOT)}"
              + (f"; describe what these check: {', '.join(todo)}" if todo else ""))
    elif not argv:
        print(new)
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Regenerate the learner notebooks: days/dayNN from solutions/dayNN with `nbgrader generate_assignment`.

    python tools/generate_days.py            # every day that has a solutions/ folder (`make days`)
    python tools/generate_days.py 07 day08   # only these days (`make days DAY=07`)

solutions/dayNN/*.ipynb is the only source: days/ is never edited by hand, and tests/test_grading.py fails when it
differs from a fresh generation.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def generate(course_root: Path, day: str) -> None:
    """Run nbgrader in ``course_root`` (which holds nbgrader_config.py and solutions/) for one assignment."""
    cmd = [sys.executable, "-m", "nbgrader", "generate_assignment", day, "--force", "--no-db",
           "--log-level=WARN"]
    result = subprocess.run(cmd, cwd=course_root, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"nbgrader generate_assignment {day} failed:\n{result.stdout}\n{result.stderr}")


def day_name(arg: str) -> str:
    """``"7"``, ``"07"`` or ``"day07"`` -> ``"day07"``; a ``ValueError`` when solutions/ has no such day."""
    digits = arg.lower().removeprefix("day")
    if not digits.isdigit():
        raise ValueError(f"{arg!r} is not a day: give its number, e.g. 07 or day07")
    day = f"day{int(digits):02d}"
    if not (ROOT / "solutions" / day).is_dir():
        raise ValueError(f"solutions/{day} does not exist")
    return day


def main(argv: list[str]) -> int:
    try:
        days = [day_name(a) for a in argv]
    except ValueError as e:
        print(f"generate_days: {e}", file=sys.stderr)
        return 2
    days = days or sorted(p.name for p in (ROOT / "solutions").glob("day[0-9][0-9]") if p.is_dir())
    for day in days:
        generate(ROOT, day)
        print(f"generated days/{day}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

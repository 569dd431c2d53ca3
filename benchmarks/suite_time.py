#!/usr/bin/env python3
"""Summarise the test suite's notebook timings (written by tests/conftest.py to build/notebook_timings.json).

    python benchmarks/suite_time.py [path/to/notebook_timings.json]

Prints the total, the time per kind of run (papermill, nbgrader autograde, grading workflow) and the slowest ten.
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

DEFAULT = Path(__file__).resolve().parents[1] / "build" / "notebook_timings.json"


def summarise(rows: list[dict], top: int = 10) -> str:
    if not rows:
        return "no notebook timings recorded: run `make test` first"
    by_kind: dict[str, float] = defaultdict(float)
    for r in rows:
        by_kind[r["kind"]] += r["seconds"]
    lines = [f"total {sum(by_kind.values()):.1f} s over {len(rows)} notebook runs (summed; workers run in parallel)"]
    lines += [f"  {kind:<14} {secs:8.1f} s" for kind, secs in sorted(by_kind.items())]
    lines.append(f"slowest {min(top, len(rows))}:")
    for r in sorted(rows, key=lambda r: -r["seconds"])[:top]:
        lines.append(f"  {r['seconds']:7.1f} s  {r['kind']:<14} {r['name']}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else DEFAULT
    if not path.exists():
        print(f"{path} does not exist: run `make test` first (the suite writes it)")
        return 1
    print(summarise(json.loads(path.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Plausible *correct* answers that must keep full marks, one module per day (``dayNN.py``).

The other direction of tests/grader_mutants/: each module defines ``ALTERNATIVES: list[Alternative]``, answers to
one graded exercise written as a different learner would write them (another loop structure, another library call,
float64 where float32 would do, windowed timing where per-step timing would do). Graded by nbgrader with libraries
that write to standard error (tests/noisy_libraries.py), every test cell must still give full marks. An alternative
that fails shows a test that checks one way of writing the answer instead of the mechanism that matters, or a
requirement the exercise text does not state: change the test or the text, never drop the alternative.

An alternative is either a whole new solution cell (``source``: what the learner would have typed between the
solution markers, the cell's other lines included), or a small change to the course's solution (``find``, which
must occur exactly once in the cell, and ``replace``).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Alternative:
    cell: str          # grade_id of the solution cell the answer goes into
    why: str           # how this answer differs from the course's, and why it is still correct
    source: str = ""   # the whole cell as this learner wrote it; or, instead:
    find: str = ""     # exact text in the course's solution cell (must occur exactly once) ...
    replace: str = ""  # ... and the text this learner wrote in its place

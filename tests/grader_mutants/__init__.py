"""Plausible wrong answers that the hidden tests must catch, one module per day (``dayNN.py``).

Each module defines ``MUTANTS: list[Mutant]``. A mutant is a small code change to the solution of one graded
exercise: the mistake a learner plausibly makes (a missing ``.to(device)``, ``optimizer.step()`` instead of
``scaler.step(optimizer)``, a cache on the class). The grader regression test applies each one to the solution
notebook and checks that the named test cell no longer gives full marks. When a new hole in a hidden test is
found, its mutant is added here first, then the test is fixed.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    cell: str       # grade_id of the solution cell the mistake goes into
    find: str       # exact text in that cell's source; must occur exactly once
    replace: str    # the text that makes the plausible mistake
    why: str        # the mistake, in the words of a learner's bug report
    caught_by: str  # grade_id of the test cell that must lose points

"""instructor.grading's parallel part, without running nbgrader: how many graders run at once, how many cores it
counts, what happens to a grader that fails. tests/test_class_grading.py and tests/test_exchange.py grade real
submissions."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from instructor import grading
from instructor.grading import GradeOutcome, available_cores, grade_class


class _NoGradebook:
    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def course(tmp_path: Path, monkeypatch) -> Path:
    """A course folder with six submissions (one not valid JSON), and nbgrader's gradebook replaced."""
    import nbgrader.api

    monkeypatch.setattr(nbgrader.api, "Gradebook", _NoGradebook)
    def scores(course, assignment, outcomes):
        for o in outcomes:
            o.score, o.max_score = (6.0, 6.0) if o.status == "graded" else (None, None)

    monkeypatch.setattr(grading, "_fill_scores", scores)
    for i in range(6):
        folder = tmp_path / "submitted" / f"s{i}" / "day26"
        folder.mkdir(parents=True)
        (folder / "nb.ipynb").write_text('{"cells": [ broken' if i == 5 else
                                         '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    return tmp_path


def _fake_grader(monkeypatch, outcome=lambda student, calls: "graded"):
    """Replace the nbgrader process with a 0.2 s stand-in that records how many ran at once."""
    state = {"running": 0, "peak": 0, "calls": [], "envs": []}
    lock = threading.Lock()

    def fake(course, assignment, student, cell_timeout_s, env):
        with lock:
            state["running"] += 1
            state["peak"] = max(state["peak"], state["running"])
            state["calls"].append(student)
            state["envs"].append(env)
        time.sleep(0.2)
        with lock:
            state["running"] -= 1
        status = outcome(student, state["calls"])
        return GradeOutcome(student, "graded") if status == "graded" else GradeOutcome(student, "failed", message=status)

    monkeypatch.setattr(grading, "_autograde_one", fake)
    return state


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_at_most_jobs_graders_run_at_once_and_broken_ones_never_reach_them(course, monkeypatch, jobs):
    state = _fake_grader(monkeypatch)
    outcomes = grade_class(course, "day26", jobs=jobs, log=lambda line: None)
    assert state["peak"] == jobs
    assert sorted(state["calls"]) == [f"s{i}" for i in range(5)]  # s5 is rejected before any grader starts
    assert [o.student for o in outcomes] == [f"s{i}" for i in range(6)]
    assert outcomes[5].status == "rejected" and (course / "rejected" / "s5" / "day26" / "REJECTED.txt").is_file()
    assert all(o.status == "graded" for o in outcomes[:5])


def test_graders_share_the_cores(course, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(grading, "available_cores", lambda: 8)
    state = _fake_grader(monkeypatch)
    grade_class(course, "day26", jobs=4, log=lambda line: None)
    assert {env["OMP_NUM_THREADS"] for env in state["envs"]} == {"2"}
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the instructor's own choice wins
    grade_class(course, "day26", jobs=4, log=lambda line: None)
    assert state["envs"][-1]["OMP_NUM_THREADS"] == "3"


def test_a_failed_grader_is_graded_again_alone_after_the_others(course, monkeypatch):
    # the first try of s2 fails the way a busy gradebook makes it fail; the second succeeds
    def locked_once(student, calls):
        return "sqlite3.OperationalError: database is locked" if calls.count(student) == 1 and student == "s2" \
            else "graded"

    state = _fake_grader(monkeypatch, locked_once)
    log: list[str] = []
    outcomes = {o.student: o for o in grade_class(course, "day26", jobs=2, log=log.append)}
    assert state["calls"].count("s2") == 2 and outcomes["s2"].status == "graded"
    assert state["calls"][-1] == "s2", "the second try runs after every first try"
    assert any("s2: failed" in line and "grading again" in line for line in log)


def test_a_second_failure_is_reported(course, monkeypatch):
    state = _fake_grader(monkeypatch, lambda s, calls: "KeyError: 'day26_train_step'" if s == "s1" else "graded")
    outcomes = {o.student: o for o in grade_class(course, "day26", jobs=2, log=lambda line: None)}
    assert state["calls"].count("s1") == 2
    assert outcomes["s1"].status == "failed" and "KeyError" in outcomes["s1"].message
    assert all(o.status == "graded" for name, o in outcomes.items() if name not in ("s1", "s5"))


def test_jobs_must_be_positive(course):
    with pytest.raises(ValueError, match="1 or more"):
        grade_class(course, "day26", jobs=0)


def test_available_cores_honours_a_cgroup_cpu_quota(tmp_path: Path, monkeypatch):
    affinity = len(os.sched_getaffinity(0))
    cpu_max = tmp_path / "cpu.max"
    monkeypatch.setattr(grading, "_CGROUP_CPU_MAX", cpu_max)
    assert available_cores() == affinity  # no cgroup file
    cpu_max.write_text("max 100000\n")
    assert available_cores() == affinity  # no quota
    cpu_max.write_text("50000 100000\n")  # half a core (Docker --cpus=0.5): still one grader
    assert available_cores() == 1
    cpu_max.write_text(f"{(affinity + 8) * 100000} 100000\n")  # a quota above the affinity does not add cores
    assert available_cores() == affinity

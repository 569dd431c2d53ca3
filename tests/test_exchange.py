"""nbgrader's exchange end to end, as the instructor guide's "A class on a shared hub" section runs it: every block of
that section, verbatim, for an instructor and four students with homes and nbgrader settings of their own and one
shared exchange folder, in the environment the hub gives their servers (hub/jupyterhub_config.py).

alice submits a wrong notebook, then the solution (a resubmission: the newest one is graded); bob submits a plausible
bug that only hidden tests catch; the deadline passes; carol submits the solution late; dave's notebook is not
valid JSON. Grades, the CSV, and the feedback students fetch (no hidden test in it) are checked.
"""
from __future__ import annotations

import csv
import datetime
import html
import json
import os
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import ROOT, record_timing
from test_class_grading import DAY, FULL, with_one_big_forward  # Day 12: the cheapest day to grade
from test_instructor import GUIDE, hidden_lines
from instructor.feedback import REDACTED

HUB_CONFIG = ROOT / "hub" / "jupyter"


def guide_block(title: str) -> str:
    """The guide's bash block whose first line is ``# <title>``."""
    blocks = [b for b in re.findall(r"```bash\n(.*?)```", GUIDE.read_text(), re.S) if b.startswith(f"# {title}\n")]
    assert len(blocks) == 1, f"the guide must have one block starting with '# {title}'"
    return blocks[0]


class Account:
    """A user's server as the hub starts it: a home, a course folder, and hub/jupyterhub_config.py's environment."""

    def __init__(self, root: Path, name: str, role: str, exchange: Path):
        self.name, self.home = name, root / "home" / name
        self.days = self.home / "course" / "days"
        self.days.mkdir(parents=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "NBGRADER", "COURSE"))}
        self.env.update({
            "HOME": str(self.home), "JUPYTERHUB_USER": name, "COURSE_ROLE": role, "DAY": DAY,
            "NBGRADER_EXCHANGE": str(exchange), "COURSE_DAYS_DIR": str(self.days),
            "JUPYTER_CONFIG_DIR": str(self.home / ".jupyter"),
            "JUPYTER_CONFIG_PATH": os.pathsep.join([str(HUB_CONFIG / role), str(HUB_CONFIG)]),
        })
        if role == "instructor":
            self.env.update(REPO=str(ROOT), COURSE_GRADING_DIR=str(self.home / "grading" / "gpu-bootcamp"))

    def run(self, title: str, **env: str) -> str:
        result = subprocess.run(["bash", "-c", guide_block(title)], env={**self.env, **env}, cwd=self.home,
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, f"{self.name}: '{title}' failed:\n{result.stdout[-3000:]}\n{result.stderr[-4000:]}"
        return result.stdout + result.stderr

    def notebook(self) -> Path:
        (path,) = (self.days / DAY).glob("*.ipynb")
        return path


def _each(accounts: list[Account], title: str) -> None:
    """Run one student block for several students at once (separate processes, as on separate servers)."""
    with ThreadPoolExecutor(len(accounts)) as pool:
        list(pool.map(lambda a: a.run(title), accounts))


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


@pytest.mark.slow
@pytest.mark.notebooks
def test_exchange_round_trip_with_resubmission_late_and_broken_submissions(tmp_path: Path):
    start = time.perf_counter()
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)  # what the hub does: one folder every server may write to
    teacher = Account(tmp_path, "teacher", "instructor", exchange)
    alice, bob, carol, dave = (Account(tmp_path, n, "student", exchange) for n in ("alice", "bob", "carol", "dave"))
    solution = json.loads(next((ROOT / "solutions" / DAY).glob("*.ipynb")).read_text())
    wrong = with_one_big_forward(solution)

    teacher.run("instructor: release a day")
    teacher.run("instructor: set or move the deadline", DUE="2099-01-01 00:00:00 UTC")
    _each([alice, bob, carol, dave], "student: fetch a released day")
    released = json.loads(alice.notebook().read_text())
    assert "BEGIN SOLUTION" not in json.dumps(released), "students fetched the instructor's copy"

    # before the deadline: alice submits a wrong copy and then the solution; bob submits a wrong copy
    alice.notebook().write_text(json.dumps(wrong))
    bob.notebook().write_text(json.dumps(wrong))
    _each([alice, bob], "student: submit (again for a resubmission)")
    alice.notebook().write_text(json.dumps(solution))
    alice.run("student: submit (again for a resubmission)")
    # the deadline passes; carol submits the solution late, dave a file that is not a notebook
    due = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) + datetime.timedelta(seconds=1)
    teacher.run("instructor: set or move the deadline", DUE=due.strftime("%Y-%m-%d %H:%M:%S UTC"))
    time.sleep(max(0.0, (due - datetime.datetime.now(datetime.timezone.utc)).total_seconds()) + 0.1)
    carol.notebook().write_text(json.dumps(solution))
    dave.notebook().write_text('{"cells": [ not json')
    _each([carol, dave], "student: submit (again for a resubmission)")
    inbound = sorted(p.name.split("+")[0] for p in (exchange / "gpu-bootcamp" / "inbound").iterdir())
    assert inbound == ["alice", "alice", "bob", "carol", "dave"], inbound  # student ids are the hub's user names

    grading = teacher.run("instructor: collect and autograde")
    course = Path(teacher.env["COURSE_GRADING_DIR"])
    assert (course / "rejected" / "dave" / DAY / "REJECTED.txt").is_file(), grading
    assert "not a valid notebook" in (course / "rejected" / "dave" / DAY / "REJECTED.txt").read_text()
    teacher.run("instructor: feedback and grades")
    _each([alice, bob, carol, dave], "student: fetch feedback")
    record_timing("exchange x4", DAY, time.perf_counter() - start)

    # grades: the newest submission counts, a late one scores 0 with its raw score kept, dave has none
    with open(course / "grades.csv") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    assert float(rows["alice"]["score"]) == FULL and float(rows["alice"]["max_score"]) == FULL, rows["alice"]
    assert 0 < float(rows["bob"]["score"]) < FULL, rows["bob"]
    assert float(rows["carol"]["raw_score"]) == FULL and float(rows["carol"]["score"]) == 0, rows["carol"]
    assert float(rows["carol"]["late_submission_penalty"]) == FULL, rows["carol"]
    assert rows["carol"]["timestamp"] > rows["carol"]["duedate"] > rows["alice"]["timestamp"], rows
    assert float(rows.get("dave", {}).get("score") or 0) == 0
    collected = (course / "submitted" / "alice" / DAY / "timestamp.txt").read_text().strip()

    # feedback: one page per graded submission, for the graded one only, without hidden tests
    secret = hidden_lines(sorted((ROOT / "solutions" / DAY).glob("*.ipynb")))
    for student in (alice, bob, carol):
        stamps = sorted(p.name for p in (student.days / DAY / "feedback").iterdir())
        assert len(stamps) == 1, f"{student.name}: feedback for {stamps}"
        (page,) = (student.days / DAY / "feedback" / stamps[0]).glob("*.html")
        text = _text(page)
        leaks = [line for line in secret if line in text]
        assert not leaks, f"{student.name}'s feedback shows hidden test lines: {leaks[:3]}"
        assert "hidden tests:" in text
    assert sorted(p.name for p in (alice.days / DAY / "feedback").iterdir()) == [collected], \
        "alice's feedback must be for her newest submission"
    bob_text = _text(next((bob.days / DAY / "feedback").rglob("*.html")))
    assert "AssertionError" in bob_text and REDACTED in bob_text, "bob's failing hidden assert must be redacted"
    assert not (dave.days / DAY / "feedback").exists(), "a rejected submission has no feedback"

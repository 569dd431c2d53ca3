"""tools/workspace.py: the learner's own copy of the days, filled from days/ and never overwritten."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import workspace as ws  # noqa: E402


def notebook(answer: str = "raise NotImplementedError()", prose: str = "Exercise 1", extra_exercise: bool = False):
    cells = [{"cell_type": "markdown", "id": "m", "metadata": {}, "source": [prose]},
             {"cell_type": "code", "id": "s", "execution_count": None, "outputs": [], "source": [answer],
              "metadata": {"nbgrader": {"solution": True, "grade": False, "grade_id": "day07_fit", "locked": False,
                                        "schema_version": 3, "task": False}}}]
    if extra_exercise:
        cells.append({**cells[1], "id": "s2", "metadata": {"nbgrader": {**cells[1]["metadata"]["nbgrader"],
                                                                         "grade_id": "day07_extra"}}})
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def write(path: Path, nb: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=1))
    return path


def source_of(path: Path, grade_id: str) -> str:
    nb = json.loads(path.read_text())
    return "".join(next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)
                   ["source"])


def test_new_days_are_copied_and_a_second_sync_changes_nothing(tmp_path):
    days, work = tmp_path / "days", tmp_path / "workspace"
    write(days / "day07" / "day07.ipynb", notebook())
    report = ws.sync(days, work)
    assert report.copied == ["day07/day07.ipynb"] and (work / "day07" / "day07.ipynb").exists()
    again = ws.sync(days, work)
    assert not (again.copied or again.replaced or again.merged)
    assert "up to date" in again.lines(work)[-1]


def test_an_untouched_copy_takes_the_update_and_a_saved_answer_is_never_lost(tmp_path):
    days, work = tmp_path / "days", tmp_path / "workspace"
    write(days / "day07" / "day07.ipynb", notebook())
    write(days / "day08" / "day08.ipynb", notebook(prose="Day 8"))
    ws.sync(days, work)
    mine = work / "day07" / "day07.ipynb"
    write(mine, notebook(answer="def fit():\n    return 42"))             # the learner saves an answer
    write(days / "day07" / "day07.ipynb", notebook(prose="Exercise 1, clearer"))   # the course updates both
    write(days / "day08" / "day08.ipynb", notebook(prose="Day 8, clearer"))
    report = ws.sync(days, work, now=0)
    assert report.replaced == ["day08/day08.ipynb"], "a copy the learner never saved just takes the update"
    assert report.merged == ["day07/day07.ipynb"]
    assert source_of(mine, "day07_fit") == "def fit():\n    return 42", "the answer is carried into the update"
    assert "clearer" in "".join(json.loads(mine.read_text())["cells"][0]["source"])
    previous = work / "previous" / "day07-19700101-000000.ipynb"
    assert source_of(previous, "day07_fit") == "def fit():\n    return 42", "the old notebook is kept as it was"
    assert any("your answers are in the new version" in line for line in report.lines(work))
    # a second update, the merged copy untouched since: the answer must survive again
    write(days / "day07" / "day07.ipynb", notebook(prose="Exercise 1, clearer still"))
    ws.sync(days, work, now=60)
    assert source_of(mine, "day07_fit") == "def fit():\n    return 42"


def test_answers_to_removed_exercises_are_named_and_kept_in_the_previous_notebook(tmp_path):
    days, work = tmp_path / "days", tmp_path / "workspace"
    write(days / "day07" / "day07.ipynb", notebook(extra_exercise=True))
    ws.sync(days, work)
    write(work / "day07" / "day07.ipynb", notebook(answer="x = 1", extra_exercise=True))
    write(days / "day07" / "day07.ipynb", notebook(prose="new"))
    report = ws.sync(days, work, now=0)
    assert report.not_carried == {"day07/day07.ipynb": ["day07_extra"]}
    assert any("no longer has" in line and "day07_extra" in line for line in report.lines(work))


def test_files_the_learner_made_and_unreadable_notebooks_are_left_alone(tmp_path):
    days, work = tmp_path / "days", tmp_path / "workspace"
    write(days / "day07" / "day07.ipynb", notebook())
    ws.sync(days, work)
    (work / "day07" / "notes.txt").write_text("mine")
    broken = work / "day07" / "day07.ipynb"
    broken.write_text("{ half a notebook")
    write(days / "day07" / "day07.ipynb", notebook(prose="new"))
    report = ws.sync(days, work)
    assert broken.read_text() == "{ half a notebook" and (work / "day07" / "notes.txt").read_text() == "mine"
    updates = sorted((work / "day07").glob("day07.course-update-*.ipynb"))
    assert len(updates) == 1
    assert "not a readable notebook" in " ".join(report.lines(work))
    # The learner starts working in the update; later syncs of the same release, and of a newer one, never write
    # over it, and no broken copies pile up in previous/.
    updates[0].write_text("my work in the update")
    ws.sync(days, work)
    write(days / "day07" / "day07.ipynb", notebook(prose="newer"))
    ws.sync(days, work)
    assert updates[0].read_text() == "my work in the update"
    assert len(list((work / "day07").glob("day07.course-update-*.ipynb"))) == 2
    assert not any((work / ws.PREVIOUS).glob("*"))


def test_a_write_cut_short_leaves_the_previous_state_and_the_next_sync_works(tmp_path, monkeypatch):
    days, work = tmp_path / "days", tmp_path / "workspace"
    write(days / "day07" / "day07.ipynb", notebook())
    ws.sync(days, work)
    state = next(work.glob(".course*.json"))
    before = state.read_text()
    write(days / "day08" / "day08.ipynb", notebook())
    real_write_text = Path.write_text

    def disk_full(self, text, *args, **kwargs):
        real_write_text(self, text[: len(text) // 2], *args, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_full)
    try:
        ws.sync(days, work)
    except OSError:
        pass
    monkeypatch.setattr(Path, "write_text", real_write_text)
    assert state.read_text() == before                      # still valid JSON: the next `make lab` can read it
    ws.sync(days, work)                                     # no JSONDecodeError, and the leftover is renamed away
    assert "day07/day07.ipynb" in json.loads(state.read_text()) and not list(work.glob(".*.partial"))

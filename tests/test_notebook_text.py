"""Notebooks reviewed as text: tools/nbtext.py (git's textconv for *.ipynb) and the pre-commit hook that refuses
notebooks with outputs, both wired up by `make hooks`."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, solution_notebooks

sys.path.insert(0, str(ROOT / "tools"))
from nbtext import notebook_text  # noqa: E402

NBGRADER = {"grade": True, "grade_id": "day99_f_tests", "locked": True, "points": 3, "schema_version": 3,
            "solution": False, "task": False}
ANSWER = {"grade": False, "grade_id": "day99_f", "locked": False, "schema_version": 3, "solution": True, "task": False}


def small_notebook() -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3"}}, "cells": [
        {"cell_type": "markdown", "id": "day99-md-000", "metadata": {}, "source": ["# Day 99\n", "\n", "Intro."]},
        {"cell_type": "code", "id": "day99-params-001", "metadata": {"tags": ["parameters"]}, "outputs": [],
         "execution_count": None, "source": "SMOKE = False"},
        {"cell_type": "code", "id": "day99_f", "metadata": {"nbgrader": ANSWER},
         "outputs": [], "execution_count": None, "source": "def f():\n    ### BEGIN SOLUTION\n    return 1\n"
                                                           "    ### END SOLUTION"},
        {"cell_type": "code", "id": "day99_f_tests", "metadata": {"nbgrader": dict(NBGRADER)}, "outputs": [],
         "execution_count": None, "source": "assert f() == 1"},
    ]}


def test_cells_print_as_percent_text_with_their_nbgrader_role_on_the_header():
    text = notebook_text(small_notebook())
    assert text.splitlines()[1:] == [
        "",
        "# %% [markdown] id=day99-md-000", "# # Day 99", "#", "# Intro.",
        "",
        "# %% id=day99-params-001 tags=parameters", "SMOKE = False",
        "",
        "# %% id=day99_f nbgrader=answer grade_id=day99_f",
        "def f():", "    ### BEGIN SOLUTION", "    return 1", "    ### END SOLUTION",
        "",
        "# %% id=day99_f_tests nbgrader=tests points=3 grade_id=day99_f_tests", "assert f() == 1",
    ]


def test_grading_metadata_changes_show_on_the_header_line():
    before = notebook_text(small_notebook())
    nb = small_notebook()
    meta = nb["cells"][3]["metadata"]["nbgrader"]
    meta["points"], meta["locked"] = 5, False  # more points, and the test cell is no longer read-only
    nb["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x"}]
    nb["cells"][1]["execution_count"] = 4
    changed = set(notebook_text(nb).splitlines()) - set(before.splitlines())
    assert changed == {
        '# %% id=day99_f_tests nbgrader={"grade":true,"locked":false,"solution":false,"task":false} points=5 '
        'grade_id=day99_f_tests',
        "# %% id=day99-params-001 tags=parameters outputs=1 execution_count=4",
    }


def test_every_solution_notebook_prints_every_cell_and_code_line():
    for path in solution_notebooks():
        nb = json.loads(path.read_text(encoding="utf-8"))
        text = notebook_text(nb)
        assert text.count("\n# %%") == len(nb["cells"]), path
        lines = set(text.splitlines())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert set("".join(cell["source"]).splitlines()) <= lines, f"{path.name} cell {cell['id']}"


# --------------------------------------------------------------------------------------------------- git wiring
def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=repo,
                          capture_output=True, text=True, check=check, timeout=60)


def _repo_with_make_hooks(tmp_path: Path) -> tuple[Path, Path]:
    """A fresh git repository with the course's .gitattributes and tools/, set up by `make hooks`, holding Day 01."""
    if shutil.which("git") is None or shutil.which("make") is None:
        pytest.skip("needs git and make")
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "tools", repo / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / ".gitattributes", repo / ".gitattributes")
    src = solution_notebooks()[0]
    nb = repo / "solutions" / src.parent.name / src.name
    nb.parent.mkdir(parents=True)
    shutil.copy2(src, nb)
    _git(repo, "init", "-q")
    subprocess.run(["make", "-s", "-f", str(ROOT / "Makefile"), "hooks", f"PYTHON={sys.executable}"], cwd=repo,
                   check=True, capture_output=True, timeout=60)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "init")
    return repo, nb


def _rewrite(path: Path, change) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    change(nb)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")


@pytest.mark.slow
def test_git_diff_of_a_one_sentence_edit_is_one_line_and_names_the_cell(tmp_path: Path):
    repo, nb = _repo_with_make_hooks(tmp_path)
    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    i = next(i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and len(c["source"]) > 2)
    old_line = cells[i]["source"][1]

    def edit(notebook: dict) -> None:
        notebook["cells"][i]["source"][1] = "An edited sentence.\n"

    _rewrite(nb, edit)
    diff = _git(repo, "diff", "-U0").stdout
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed == ["-" + ("# " + old_line.rstrip("\n")).rstrip(), "+# An edited sentence."], diff
    hunk = next(line for line in diff.splitlines() if line.startswith("@@"))
    assert f"# %% [markdown] id={cells[i]['id']}" in hunk, hunk


@pytest.mark.slow
def test_pre_commit_hook_refuses_a_notebook_with_outputs_and_accepts_it_stripped(tmp_path: Path):
    repo, nb = _repo_with_make_hooks(tmp_path)
    clean = nb.read_bytes()

    def run_a_cell(notebook: dict) -> None:
        cell = next(c for c in notebook["cells"] if c["cell_type"] == "code")
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["hello\n"]}]
        cell["execution_count"] = 1
        cell["source"] = "".join(cell["source"]) + "\n# edited"

    _rewrite(nb, run_a_cell)
    _git(repo, "add", ".")
    refused = _git(repo, "commit", "-m", "with outputs", check=False)
    assert refused.returncode != 0, refused.stdout
    assert nb.name in refused.stdout + refused.stderr and "nbstripout --keep-id" in refused.stderr

    subprocess.run([sys.executable, "-m", "nbstripout", "--keep-id", str(nb)], check=True, timeout=60)
    stripped = json.loads(nb.read_text(encoding="utf-8"))
    assert [c["id"] for c in stripped["cells"]] == [c["id"] for c in json.loads(clean)["cells"]]
    assert nb.read_bytes() != clean  # the source edit stays; only outputs and the count went
    _git(repo, "add", ".")
    accepted = _git(repo, "commit", "-m", "stripped", check=False)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr


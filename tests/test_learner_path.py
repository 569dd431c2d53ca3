"""The learner's path end to end, on a fresh clone: `make lab`'s workspace step, an answer saved, a course update
pulled and brought in with `make update`, the answer still there, the clone still clean for git, and `make test-fast`
still green (learners never work in the tracked days/, so nothing of theirs reaches what the tests read)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

VENV = Path(sys.prefix)
SKIP_SETUP = ["-o", f"{VENV}/.installed", "-o", f"{VENV}/.torch-build"]


def run(cmd: list[str], cwd: Path, timeout: int = 600) -> str:
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def git(*args: str, cwd: Path) -> str:
    return run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd)


def solution_cell(nb: dict) -> dict:
    return next(c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution")
                and c["cell_type"] == "code")


@pytest.mark.slow
def test_a_learners_answers_survive_a_course_update(tmp_path: Path):
    origin, clone = tmp_path / "origin", tmp_path / "clone"
    origin.mkdir()
    tracked = run(["git", "ls-files", "-z"], ROOT).split("\0")
    for rel in filter(None, tracked):
        if (ROOT / rel).is_file():
            (origin / rel).parent.mkdir(parents=True, exist_ok=True)
            (origin / rel).write_bytes((ROOT / rel).read_bytes())
    git("init", "-q", "-b", "main", cwd=origin)
    git("add", "-A", cwd=origin)
    git("commit", "-q", "-m", "the course", cwd=origin)
    git("clone", "-q", str(origin), str(clone), cwd=tmp_path)

    out = run(["make", "--no-print-directory", f"VENV={VENV}", "workspace"], clone)
    assert "your work lives in workspace/" in out
    day07 = next((clone / "workspace" / "day07").glob("*.ipynb"))
    nb = json.loads(day07.read_text())
    solution_cell(nb)["source"] = ["# my answer\n", "x = 42\n"]
    nb["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["saved with outputs\n"]}]
    day07.write_text(json.dumps(nb))

    release = origin / "days" / "day07" / day07.name
    upstream = json.loads(release.read_text())
    upstream["cells"][0]["source"].append("\n\nA clearer sentence from the course.")
    release.write_text(json.dumps(upstream, indent=1, ensure_ascii=False) + "\n")
    git("commit", "-q", "-am", "day07: a clearer sentence", cwd=origin)

    out = run(["make", "--no-print-directory", f"VENV={VENV}", "update"], clone)
    assert f"updated upstream: day07/{day07.name}" in out, out
    merged = json.loads(day07.read_text())
    assert "".join(solution_cell(merged)["source"]) == "# my answer\nx = 42\n", "the answer was lost"
    assert "A clearer sentence from the course." in "".join(merged["cells"][0]["source"])
    assert list((clone / "workspace" / "previous").glob("day07*.ipynb")), "the previous notebook is kept"
    assert run(["git", "status", "--porcelain"], clone) == "", "the learner's work shows up in git status"
    run(["make", "--no-print-directory", f"VENV={VENV}", *SKIP_SETUP, "test-fast", "PYTEST_WORKERS=1"], clone,
        timeout=900)

"""The instructor workflow of docs/instructor_guide.md, run as written: grade, feedback without hidden tests, CSV;
and the learner-only export."""
from __future__ import annotations

import csv
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, record_timing
from instructor.feedback import PLACEHOLDER, REDACTED, redact_text, split_hidden
from instructor.release import export_learner_release
from test_class_grading import DAY, with_one_big_forward  # Day 12: the cheapest day to grade

GUIDE = ROOT / "docs" / "instructor_guide.md"


def guide_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", GUIDE.read_text(), re.S)


def _imported_modules(path: Path) -> set[str]:
    """Top-level names of the modules a Python file imports."""
    import ast

    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def hidden_lines(notebooks: list[Path]) -> list[str]:
    """Lines that only hidden tests contain (a line such as `except RuntimeError:` may also be visible)."""
    lines = []
    for nb in notebooks:
        visible, hidden = [], []
        for cell in json.loads(nb.read_text())["cells"]:
            shown, secret = split_hidden("".join(cell["source"]))
            visible.append(shown)
            hidden += [line.strip() for line in secret if len(line.strip()) >= 6]
        everything_visible = "\n".join(visible)
        lines += [line for line in hidden if line not in everything_visible]
    return lines


# --------------------------------------------------------------------------------------------------- units
def test_split_hidden_replaces_each_block():
    src = "assert a\n### BEGIN HIDDEN TESTS\nassert b == 2\nassert c\n### END HIDDEN TESTS\nprint('ok')"
    visible, hidden = split_hidden(src)
    assert visible == f"assert a\n{PLACEHOLDER.format(n=2)}\nprint('ok')"
    assert hidden == ["assert b == 2", "assert c"]
    assert split_hidden("x = 1") == ("x = 1", [])


def test_redact_text_catches_traceback_lines_with_ansi_and_arrows():
    hidden = ['assert visible_devices("0,-1,2", 4) == [0], "parsing stops"']
    tb = '\x1b[0;32m----> 3\x1b[0m assert visible_devices("0,-1,2", 4) == [0], "parsing stops"\nAssertionError: x'
    out = redact_text(tb, hidden)
    assert "visible_devices(\"0,-1,2\"" not in out and REDACTED in out and "AssertionError" in out


# --------------------------------------------------------------------------------------------------- workflow
def _wrong_copy(src: Path, dest: Path) -> None:
    """Day 12 with a plausible bug only a hidden assert catches: the micro-batches in one big forward pass."""
    dest.write_text(json.dumps(with_one_big_forward(json.loads(src.read_text()))))


@pytest.mark.notebooks
def test_guide_grading_workflow_runs_and_feedback_hides_hidden_tests(tmp_path: Path):
    blocks = [b for b in guide_blocks() if "autograde" in b and "generate_feedback" in b]
    assert len(blocks) == 1, "the guide must have one grading block"
    src = sorted((ROOT / "solutions" / DAY).glob("*.ipynb"))
    assert len(src) == 1
    subs = tmp_path / "submissions"
    for student in ("blank", "solution", "wrong"):
        (subs / student / DAY).mkdir(parents=True)
    shutil.copy2(ROOT / "days" / DAY / src[0].name, subs / "blank" / DAY / src[0].name)
    shutil.copy2(src[0], subs / "solution" / DAY / src[0].name)
    _wrong_copy(src[0], subs / "wrong" / DAY / src[0].name)
    course = tmp_path / "course"
    env = dict(os.environ, REPO=str(ROOT), DAY=DAY, SUBMISSIONS=str(subs), COURSE=str(course))
    import time

    start = time.perf_counter()
    result = subprocess.run(["bash", "-c", blocks[0]], env=env, capture_output=True, text=True, timeout=1200)
    record_timing("grading x3", DAY, time.perf_counter() - start)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]

    with open(course / "grades.csv") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    score = {s: float(rows[s]["raw_score"]) for s in rows}
    max_score = float(rows["solution"]["max_score"])
    assert score["blank"] == 0 and score["solution"] == max_score
    assert 0 < score["wrong"] < max_score, score

    secret = hidden_lines(src)
    assert secret
    for student in ("blank", "solution", "wrong"):
        pages = list((course / "feedback" / student / DAY).glob("*.html"))
        assert pages, f"no feedback for {student}"
        raw = pages[0].read_text()
        text = html.unescape(re.sub(r"<[^>]+>", "", raw))
        leaks = [line for line in secret if line in text]
        assert not leaks, f"feedback for {student} shows hidden test lines: {leaks[:3]}"
        assert "hidden tests:" in text
    wrong_text = html.unescape(re.sub(r"<[^>]+>", "", next((course / "feedback" / "wrong" / DAY).glob("*.html"))
                                      .read_text()))
    assert "AssertionError" in wrong_text and REDACTED in wrong_text, "the failing hidden assert must be redacted"


# --------------------------------------------------------------------------------------------------- export
def test_learner_package_needs_no_instructor_tooling():
    for py in sorted((ROOT / "utils").rglob("*.py")):
        imported = _imported_modules(py)
        assert not imported & {"nbgrader", "instructor"}, f"{py.relative_to(ROOT)} imports {imported}: " \
                                                          "instructor tooling belongs in instructor/"


def test_learner_release_has_no_solutions_or_hidden_tests(tmp_path: Path):
    dest = tmp_path / "learners"
    files = export_learner_release(ROOT, dest)
    assert (dest / "days").is_dir() and (dest / "utils").is_dir() and (dest / "README.md").is_file()
    for instructor_only in ("solutions", "instructor", "tools/generate_days.py", "tools/gpu_check", "nbgrader_config.py",
                            "docs"):
        assert not (dest / instructor_only).exists(), f"the learner release contains {instructor_only}"
    assert not list(dest.rglob("gradebook.db"))
    # the release installs: its package discovery finds the learner's packages and not the instructor's
    import setuptools
    import tomllib

    find = tomllib.loads((dest / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert sorted(setuptools.find_packages(str(dest), include=find["include"])) == ["course_lab", "utils"]
    # its setup runs: every file the Makefile's setup and the Dockerfile's COPY steps use is there
    dry_run = subprocess.run(["make", "-n", "-C", str(dest), "setup", "workspace"], capture_output=True, text=True)
    assert dry_run.returncode == 0, dry_run.stderr
    for line in (dest / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            *sources, _ = [word for word in line.split()[1:] if not word.startswith("--")]
            missing = [source for source in sources if not (dest / source).exists()]
            assert not missing, f"the copy's Dockerfile copies {missing}, which the release left out"
    # nothing in it needs the instructor package, and only the Validate button's lab extension uses nbgrader
    for py in dest.rglob("*.py"):
        imported = _imported_modules(py)
        allowed = {"nbgrader"} if py.parent.name == "course_lab" else set()
        assert not imported & ({"nbgrader", "instructor"} - allowed), f"{py.relative_to(dest)} imports {imported}"
    solution_markers = ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS")
    for path in files:
        if path.suffix not in (".ipynb", ".md", ".py", ".txt", ".yml", ".toml"):
            continue
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".ipynb":
            assert not any(m in text for m in solution_markers), path
            sources = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"])
            secret = hidden_lines(sorted((ROOT / "solutions" / path.parent.name).glob("*.ipynb")))
            leaks = [line for line in secret if line in sources]
            assert not leaks, f"{path} contains hidden test lines {leaks[:2]}"
    with pytest.raises(FileExistsError):
        export_learner_release(ROOT, dest)

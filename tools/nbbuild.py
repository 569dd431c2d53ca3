"""Build course notebooks from Python (an authoring aid; the committed .ipynb in solutions/ is the source).

    from tools.nbbuild import Notebook
    nb = Notebook("day01")
    nb.md("# Day 01 ...")
    nb.params('SMOKE = False\\nDEVICE = "auto"')
    nb.code("run = course_setup(SMOKE, DEVICE)")
    nb.solution("def f(x):\\n    ### BEGIN SOLUTION\\n    return x\\n    ### END SOLUTION", grade_id="day01_f")
    nb.tests("assert f(1) == 1", grade_id="day01_f_tests", points=2, hidden="assert f(2) == 2")
    nb.write("solutions/day01/day01_environment.ipynb")

Cells get stable ids (from the grade_id, or the day and position), outputs are never written, and the nbgrader
metadata follows schema 3, so `nbgrader generate_assignment` produces the learner copy in days/.
"""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

_ID_OK = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _clean(src: str) -> str:
    return textwrap.dedent(src).strip("\n")


class Notebook:
    def __init__(self, prefix: str):
        self.prefix = prefix
        self.cells: list = []
        self.grade_ids: set[str] = set()

    def _id(self, kind: str) -> str:
        return f"{self.prefix}-{kind}-{len(self.cells):03d}"

    def _grade_meta(self, grade_id: str, *, grade: bool, solution: bool, locked: bool, points: float = 0) -> dict:
        if not _ID_OK.match(grade_id):
            raise ValueError(f"grade_id {grade_id!r}: use letters, digits, '-' and '_' only")
        if not grade_id.startswith(self.prefix):
            raise ValueError(f"grade_id {grade_id!r} must start with {self.prefix!r} to stay unique across the course")
        if grade_id in self.grade_ids:
            raise ValueError(f"duplicate grade_id {grade_id!r}")
        self.grade_ids.add(grade_id)
        meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution,
                "task": False}
        if grade:
            meta["points"] = points
        return meta

    def md(self, text: str) -> "Notebook":
        self.cells.append(new_markdown_cell(_clean(text), id=self._id("md")))
        return self

    def code(self, src: str) -> "Notebook":
        self.cells.append(new_code_cell(_clean(src), id=self._id("code")))
        return self

    def params(self, src: str) -> "Notebook":
        """The papermill parameters cell (tag ``parameters``, no nbgrader metadata). Must define SMOKE."""
        src = _clean(src)
        if "SMOKE" not in src:
            raise ValueError("the parameters cell must define SMOKE")
        cell = new_code_cell(src, id=self._id("params"))
        cell.metadata["tags"] = ["parameters"]
        self.cells.append(cell)
        return self

    def solution(self, src: str, grade_id: str) -> "Notebook":
        """An autograded answer cell: everything between ### BEGIN/END SOLUTION is replaced by a stub."""
        src = _clean(src)
        if "### BEGIN SOLUTION" not in src or "### END SOLUTION" not in src:
            raise ValueError(f"{grade_id}: a solution cell needs ### BEGIN SOLUTION / ### END SOLUTION")
        cell = new_code_cell(src, id=grade_id)
        cell.metadata["nbgrader"] = self._grade_meta(grade_id, grade=False, solution=True, locked=False)
        self.cells.append(cell)
        return self

    def written_answer(self, text: str, grade_id: str, points: float) -> "Notebook":
        """A manually graded markdown answer (between ### BEGIN/END SOLUTION)."""
        cell = new_markdown_cell(_clean(text), id=grade_id)
        cell.metadata["nbgrader"] = self._grade_meta(grade_id, grade=True, solution=True, locked=False,
                                                     points=points)
        self.cells.append(cell)
        return self

    def tests(self, visible: str, grade_id: str, points: float, hidden: str | None = None) -> "Notebook":
        """A locked, autograded test cell: visible asserts, then hidden ones that learners never see."""
        if points <= 0:
            raise ValueError(f"{grade_id}: a test cell needs points > 0")
        src = _clean(visible)
        if hidden:
            src += "\n\n### BEGIN HIDDEN TESTS\n" + _clean(hidden) + "\n### END HIDDEN TESTS"
        cell = new_code_cell(src, id=grade_id)
        cell.metadata["nbgrader"] = self._grade_meta(grade_id, grade=True, solution=False, locked=True,
                                                     points=points)
        self.cells.append(cell)
        return self

    def write(self, path: str | Path) -> Path:
        nb = new_notebook(cells=self.cells, metadata={
            "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
            "language_info": {"name": "python", "pygments_lexer": "ipython3"},
        })
        nbformat.validate(nb)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(path))
        return path

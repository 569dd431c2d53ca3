#!/usr/bin/env python3
"""Print a notebook as percent-format text (like jupytext's ``# %%``), for reviewing notebooks in ``git diff``.

    python tools/nbtext.py solutions/day07/day07_week1_review.ipynb

Git uses it as the textconv driver of ``*.ipynb`` (``.gitattributes``; ``make hooks`` sets
``diff.notebook.textconv``), so a one-sentence edit in a notebook shows as a one-line diff. Every cell starts with a
header line that carries its id, tags and nbgrader role, e.g.::

    # %% [markdown] id=day07-md-003
    # %% id=day07_quiz_part1_tests nbgrader=tests points=3 grade_id=day07_quiz_part1_tests

so a change to grading metadata (points, a lost grade_id, an unlocked test cell) is visible in the diff too. Markdown
lines are prefixed with ``# ``. Outputs are not printed, only counted on the header (``outputs=2
execution_count=5``): solutions/ is committed without them. Standard library only: git runs this on every diff.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

# nbgrader's cell types (the "Create Assignment" toolbar), by their flags: grade, solution, locked, task.
_ROLES = {
    (False, True, False, False): "answer",  # autograded answer
    (True, False, True, False): "tests",  # autograder tests
    (True, True, False, False): "manual",  # manually graded answer
    (False, False, True, False): "readonly",
    (False, False, True, True): "task",  # manually graded task
}
_NBGRADER_FLAGS = ("grade", "solution", "locked", "task")
_NBGRADER_SCHEMA = 3


def _value(value: object) -> str:
    """A header value: bare when it is a simple word, JSON otherwise (so spaces and quotes stay unambiguous)."""
    text = str(value)
    if isinstance(value, str) and text and all(ch.isalnum() or ch in "_-.:/" for ch in text):
        return text
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def nbgrader_fields(meta: dict) -> list[str]:
    """``key=value`` words for a cell's ``metadata.nbgrader``: its role, points, grade_id and anything unusual."""
    if not meta:
        return []
    flags = tuple(bool(meta.get(k, False)) for k in _NBGRADER_FLAGS)
    role = _ROLES.get(flags)
    words = [f"nbgrader={role}" if role else "nbgrader=" + _value({k: meta.get(k) for k in _NBGRADER_FLAGS})]
    if "points" in meta:
        words.append(f"points={_value(meta['points'])}")
    words.append(f"grade_id={_value(meta.get('grade_id'))}")
    if meta.get("schema_version") != _NBGRADER_SCHEMA:
        words.append(f"schema_version={_value(meta.get('schema_version'))}")
    known = {"grade_id", "points", "schema_version", *_NBGRADER_FLAGS}
    words += [f"nbgrader.{k}={_value(v)}" for k, v in sorted(meta.items()) if k not in known]
    return words


def cell_header(cell: dict) -> str:
    """The ``# %%`` line of one cell."""
    kind = cell.get("cell_type", "code")
    words = ["# %%"] + ([] if kind == "code" else [f"[{kind}]"])
    if "id" in cell:
        words.append(f"id={_value(cell['id'])}")
    meta = dict(cell.get("metadata", {}))
    tags = meta.pop("tags", None)
    if tags:
        words.append(f"tags={','.join(map(str, tags))}")
    words += nbgrader_fields(meta.pop("nbgrader", {}))
    words += [f"{k}={_value(v)}" for k, v in sorted(meta.items())]
    if cell.get("outputs"):
        words.append(f"outputs={len(cell['outputs'])}")
    if cell.get("execution_count") is not None:
        words.append(f"execution_count={cell['execution_count']}")
    if cell.get("attachments"):
        words.append(f"attachments={','.join(sorted(cell['attachments']))}")
    return " ".join(words)


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def notebook_text(nb: dict) -> str:
    """The whole notebook as percent-format text: a notebook header, then each cell's header and source."""
    lines = [f"# notebook nbformat={nb.get('nbformat')}.{nb.get('nbformat_minor')} "
             f"metadata={_value(nb.get('metadata', {}))}"]
    for cell in nb.get("cells", []):
        lines += ["", cell_header(cell)]
        body = _source(cell).split("\n")
        if cell.get("cell_type") == "code":
            lines += body
        else:
            lines += [("# " + line).rstrip() for line in body]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: nbtext.py NOTEBOOK.ipynb", file=sys.stderr)
        return 2
    raw = Path(argv[0]).read_text(encoding="utf-8")
    try:
        nb = json.loads(raw)
    except json.JSONDecodeError as e:  # show the broken file as it is, so the diff still says something
        sys.stdout.write(f"# not valid notebook JSON ({e}); raw text follows\n{raw}")
        return 0
    sys.stdout.write(notebook_text(nb))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

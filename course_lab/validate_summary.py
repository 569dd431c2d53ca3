"""nbgrader's Validate button with a count and short errors.

nbgrader's dialog lists every failing test cell as its full source and its whole traceback, with no count: a
learner with one exercise left cannot tell that from a notebook that fails everywhere. This extension wraps the
Validate handler's answer (``ValidateAssignmentHandler.validate_notebook``): the first entry starts with
"3 of 5 graded test cells pass (7 of 12 points). Still failing: ...", each failing cell is named by its
``grade_id`` and points with only the first lines of its source, and each error is cut to its last lines (the
exception and the assert that failed). A notebook that passes everything is left as nbgrader reports it.
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

SOURCE_LINES = 4
ERROR_LINES = 6
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _graded_tests(notebook: dict) -> list[tuple[str, float, str]]:
    """(grade_id, points, stripped source) of every graded code cell."""
    out = []
    for cell in notebook.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and cell.get("cell_type") == "code":
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            out.append((meta.get("grade_id", "?"), float(meta.get("points", 0) or 0), source.strip()))
    return out


def summarize(result: dict, notebook: dict) -> dict:
    """nbgrader's validation ``result`` for ``notebook`` (its JSON), with a count and short errors."""
    failed = result.get("failed")
    if not failed:
        return result
    tests = _graded_tests(notebook)
    by_source = {source: (gid, points) for gid, points, source in tests}
    named = [by_source.get(f.get("source", "").strip(), ("a cell", 0.0)) for f in failed]
    failing_ids = [gid for gid, _ in named if gid != "a cell"]
    total = len(tests)
    points = sum(p for _, p, _ in tests)
    lost = sum(p for gid, p in named if gid != "a cell")
    entries = []
    for i, (f, (gid, pts)) in enumerate(zip(failed, named)):
        lines = f.get("source", "").strip().splitlines()
        head = "\n".join(lines[:SOURCE_LINES]) + ("\n..." if len(lines) > SOURCE_LINES else "")
        error = _ANSI.sub("", f.get("raw_error", "")).strip().splitlines()
        short = "\n".join(error[-ERROR_LINES:])
        text = html.escape(short)
        if i == 0:
            text = (f"<b>{total - len(failing_ids)} of {total} graded test cells pass ({points - lost:g} of "
                    f"{points:g} points). Still failing: {html.escape(', '.join(failing_ids) or 'see below')}.</b>"
                    f"\n\n{text}")
        label = f"{gid} ({pts:g} points)" if gid != "a cell" else "a cell"
        entries.append({**f, "source": f"{label}\n{head}", "error": text})
    return {**result, "failed": entries}


def _load_jupyter_server_extension(serverapp) -> None:
    from nbgrader.server_extensions.validate_assignment.handlers import ValidateAssignmentHandler

    original = ValidateAssignmentHandler.validate_notebook
    if getattr(original, "course_lab", False):
        return

    def validate_notebook(self, path):
        answer = original(self, path)
        if answer.get("success") and isinstance(answer.get("value"), dict):
            try:
                notebook = json.loads((Path(self.root_dir) / path).read_text(encoding="utf-8"))
                answer = {**answer, "value": summarize(answer["value"], notebook)}
            except (OSError, ValueError) as e:      # never lose nbgrader's own answer to a summary
                self.log.warning("course_lab: no validation summary for %s: %s", path, e)
        return answer

    validate_notebook.course_lab = True
    ValidateAssignmentHandler.validate_notebook = validate_notebook
    serverapp.log.info("course_lab: the Validate button reports a count and short errors")

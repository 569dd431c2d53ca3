"""Feedback that never reveals hidden tests.

``RedactHiddenTests`` is an nbgrader preprocessor, registered for ``nbgrader generate_feedback`` in
``nbgrader_config.py``. nbgrader's own feedback shows the full source of every autograded test cell, hidden tests
included, and a failing hidden assert quotes its line in the traceback. The preprocessor replaces each hidden block
with a one-line placeholder and redacts any output line that quotes hidden code, keeping pass/fail and points.
"""
from __future__ import annotations

import re

from nbgrader.preprocessors import NbGraderPreprocessor

BEGIN_HIDDEN = "### BEGIN HIDDEN TESTS"
END_HIDDEN = "### END HIDDEN TESTS"
PLACEHOLDER = "# [hidden tests: {n} line(s) not shown]"
REDACTED = "[line from a hidden test redacted]"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_MIN_QUOTE = 6  # shorter fragments (")", "pass") would redact innocent lines


def split_hidden(source: str) -> tuple[str, list[str]]:
    """Return ``source`` with every hidden block replaced by a placeholder, and the hidden lines removed."""
    out: list[str] = []
    hidden: list[str] = []
    inside = False
    block: list[str] = []
    for line in source.splitlines():
        if line.strip() == BEGIN_HIDDEN:
            inside, block = True, []
            continue
        if line.strip() == END_HIDDEN and inside:
            inside = False
            out.append(PLACEHOLDER.format(n=len(block)))
            hidden += block
            continue
        (block if inside else out).append(line)
    if inside:  # an unterminated block is still hidden
        out.append(PLACEHOLDER.format(n=len(block)))
        hidden += block
    return "\n".join(out), hidden


def _quotes_hidden(text: str, hidden: list[str]) -> bool:
    plain = _ANSI.sub("", text).strip()
    if len(plain) < _MIN_QUOTE:
        return False
    for line in hidden:
        code = line.strip()
        if len(code) >= _MIN_QUOTE and (code in plain or plain in code):
            return True
        # a traceback shows the failing line after an arrow and a line number: "---> 5 assert f(2) == 2"
        if len(code) >= _MIN_QUOTE and code in re.sub(r"^[-> ]*\d+\s*", "", plain):
            return True
    return False


def redact_text(text: str, hidden: list[str]) -> str:
    """Replace each line of ``text`` that quotes one of the ``hidden`` lines."""
    return "\n".join(REDACTED if _quotes_hidden(line, hidden) else line for line in text.split("\n"))


class RedactHiddenTests(NbGraderPreprocessor):
    """Feedback preprocessor: hide hidden-test code and any output that quotes it."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        visible, hidden = split_hidden(cell.source)
        if not hidden:
            return cell, resources
        cell.source = visible
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [redact_text(t, hidden) for t in output.get("traceback", [])]
                if _quotes_hidden(output.get("evalue", ""), hidden):
                    output["evalue"] = REDACTED
            elif output.get("output_type") == "stream":
                output["text"] = redact_text(output.get("text", ""), hidden)
            elif "data" in output and "text/plain" in output["data"]:
                output["data"]["text/plain"] = redact_text(output["data"]["text/plain"], hidden)
        return cell, resources

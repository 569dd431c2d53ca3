"""course_lab: nbgrader's Validate button answers with a count and short errors (the learner's lab)."""
from __future__ import annotations

import json

from course_lab.validate_summary import summarize

TRACEBACK = "\n".join(["\x1b[0;31m---------------------------------------------------------------\x1b[0m"] +
                      [f"  frame {i}" for i in range(30)] +
                      ["\x1b[0;31mAssertionError\x1b[0m: the loss must be a mean <b>per sample</b>"])


def nb(*cells):
    return {"cells": [{"cell_type": "code", "source": src, "metadata": {"nbgrader": {
        "grade": True, "grade_id": gid, "points": pts}}} for gid, pts, src in cells]}


NOTEBOOK = nb(("day07_a_tests", 2, "assert a() == 1\n"), ("day07_b_tests", 3, "\n".join(f"assert b({i})" for i in
                                                                                        range(10))),
              ("day07_c_tests", 1, "assert c()"))


def test_the_first_entry_counts_and_names_what_still_fails():
    result = {"failed": [{"source": "\n".join(f"assert b({i})" for i in range(10)), "error": "<html>",
                          "raw_error": TRACEBACK}]}
    out = summarize(result, NOTEBOOK)["failed"]
    assert out[0]["error"].startswith("<b>2 of 3 graded test cells pass (3 of 6 points). Still failing: "
                                      "day07_b_tests.</b>")
    assert out[0]["source"].startswith("day07_b_tests (3 points)\nassert b(0)") and out[0]["source"].endswith("...")
    assert "frame 5" not in out[0]["error"], "only the last lines of the traceback"
    assert "AssertionError: the loss must be a mean &lt;b&gt;per sample&lt;/b&gt;" in out[0]["error"], \
        "ANSI codes stripped, the message escaped for the dialog's innerHTML"


def test_a_passing_notebook_is_reported_as_nbgrader_reports_it():
    assert summarize({}, NOTEBOOK) == {}
    changed = {"changed": [{"source": "x"}]}
    assert summarize(changed, NOTEBOOK) == changed


def test_the_extension_wraps_nbgrader_s_handler_once(monkeypatch, tmp_path):
    from nbgrader.server_extensions.validate_assignment.handlers import ValidateAssignmentHandler

    import course_lab.validate_summary as ext

    (tmp_path / "n.ipynb").write_text(json.dumps(NOTEBOOK))
    monkeypatch.setattr(ValidateAssignmentHandler, "validate_notebook",
                        lambda self, path: {"success": True, "value": {"failed": [
                            {"source": "assert c()", "raw_error": "AssertionError"}]}})

    class App:
        class log:
            info = warning = staticmethod(lambda *a: None)

    ext._load_jupyter_server_extension(App)
    ext._load_jupyter_server_extension(App)
    handler = type("H", (), {"root_dir": str(tmp_path), "log": App.log})()
    answer = ValidateAssignmentHandler.validate_notebook(handler, "n.ipynb")
    assert answer["value"]["failed"][0]["error"].startswith("<b>2 of 3 graded test cells pass (5 of 6 points)")
    assert answer["value"]["failed"][0]["error"].count("<b>") == 1, "wrapped once, not twice"

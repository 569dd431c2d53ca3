"""utils.exercise_hints: an unsolved exercise is named as the cause, and the cell still fails as before."""
from __future__ import annotations

import pytest

from utils.exercise_hints import _handler, hint_for, install_exercise_hints


def test_hints_name_the_unsolved_exercise_and_leave_other_errors_alone():
    try:
        fit  # noqa: F821  (the name an unsolved exercise would have defined)
    except NameError as e:
        assert "'fit' is not defined" in hint_for(e) and "Run All stops" in hint_for(e)
    assert "not solved yet" in hint_for(NotImplementedError())
    assert hint_for(ValueError("x")) is None and hint_for(KeyError("k")) is None


class FakeShell:
    def __init__(self):
        self.shown, self.registered = [], None

    def showtraceback(self, exc_tuple, tb_offset=None):
        self.shown.append(exc_tuple[0])

    def set_custom_exc(self, types, handler):
        self.registered = (types, handler)


def test_the_handler_prints_the_hint_closes_figures_and_still_shows_the_error(capsys):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.figure()
    shell = FakeShell()
    _handler(shell, NameError, NameError("name 'fit' is not defined", name="fit"), None)
    assert "[exercise] 'fit' is not defined" in capsys.readouterr().out
    assert shell.shown == [NameError], "the traceback must still be shown: the cell fails as before"
    assert plt.get_fignums() == [], "a half-drawn figure must not be shown"


def test_install_outside_ipython_changes_nothing(monkeypatch):
    import IPython

    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    assert install_exercise_hints() is False
    shell = FakeShell()
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    assert install_exercise_hints() is True
    assert {NameError, NotImplementedError} <= set(shell.registered[0])


def test_an_exercise_unsolved_in_a_worker_process_is_named_too(monkeypatch, capsys):
    import IPython

    import utils.exercise_hints as hints
    from utils.processes import DistributedRunError, RankOutcome

    unsolved = DistributedRunError("2 of 2 ranks failed; rank 0: NotImplementedError", [
        RankOutcome(0, error="Traceback (most recent call last):\n  ...\nNotImplementedError\n"), RankOutcome(1)])
    assert "not solved yet" in hint_for(unsolved) and "worker process" in hint_for(unsolved)
    other = DistributedRunError("1 of 2 ranks failed; rank 1: ValueError: x",
                                [RankOutcome(0), RankOutcome(1, error="Traceback ...\nValueError: x\n")])
    assert hint_for(other) is None and hint_for(RuntimeError("NotImplementedError")) is None
    # importing utils.processes registered its error with the handler, in a shell installed before or after
    shell = FakeShell()
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    monkeypatch.setattr(hints, "_shell", None)
    assert install_exercise_hints() and DistributedRunError in shell.registered[0]
    # a worker error with another cause shows only its traceback: no hint, the figures left open
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.figure()
    _handler(shell, DistributedRunError, other, None)
    assert "[exercise]" not in capsys.readouterr().out and plt.get_fignums() and shell.shown == [DistributedRunError]
    plt.close("all")

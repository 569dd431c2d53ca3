"""Tell the learner, in the notebook, when a cell fails because an exercise above it is not solved yet.

Each exercise starts as ``raise NotImplementedError()``. Run All stops at the first unsolved one; a learner who runs
a later cell by hand gets a bare ``NameError`` (the exercise's cell never defined the name) or a
``NotImplementedError`` from inside a helper that calls the unsolved function, and often a half-drawn figure.
:func:`install_exercise_hints` (called by :func:`utils.course.course_setup` in Jupyter) registers an IPython handler
for those two errors that says what happened and what to do, closes the half-drawn figures, and then shows the usual
traceback. The cell still fails exactly as before: graders and ``nbgrader validate`` see the same error.

An exercise that runs in worker processes fails in the notebook as ``utils.processes.DistributedRunError``, whose
failed rank's traceback ends in the ``NotImplementedError``; ``utils.processes`` registers that error type with
:func:`also_hint_for` (a module above this one registers itself, so this one imports nothing from it).
"""
from __future__ import annotations

import sys

__all__ = ["also_hint_for", "hint_for", "install_exercise_hints"]

_HINTED_ERRORS: tuple[type[BaseException], ...] = (NameError, NotImplementedError)
_shell = None   # the IPython shell the handler is installed in, if any


def _unsolved_in_a_worker(error: BaseException) -> bool:
    # utils.processes.DistributedRunError: each rank's outcome carries its traceback text, last line the error.
    for outcome in getattr(error, "outcomes", None) or []:
        lines = (getattr(outcome, "error", None) or "").strip().splitlines()
        if lines and lines[-1].startswith("NotImplementedError"):
            return True
    return False


def hint_for(error: BaseException) -> str | None:
    """The learner-facing hint for ``error``, or ``None`` when it is not an unsolved-exercise error."""
    in_a_worker = _unsolved_in_a_worker(error)
    if isinstance(error, NotImplementedError) or in_a_worker:
        where = (" in a worker process, so it reaches this cell as a DistributedRunError" if in_a_worker else "")
        return ("This cell is, or calls, an exercise you have not solved yet (its code still raises "
                f"NotImplementedError{where}). Write your answer in the exercise's cell, run it and its test cell, "
                "then run the cells below it.")
    if isinstance(error, NameError):
        name = getattr(error, "name", None) or str(error)
        return (f"{name!r} is not defined. If an exercise above defines it, solve that exercise and run its cell "
                "first: Run All stops at the first unsolved exercise, so the cells below it have not run yet. "
                "Otherwise, run the cells above this one in order.")
    return None


def _handler(shell, etype, value, tb, tb_offset=None):
    hint = hint_for(value)
    if hint:
        print(f"[exercise] {hint}")
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            plt.close("all")   # the figure the failing cell had started would be shown half-drawn
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    return None


def install_exercise_hints() -> bool:
    """Register the hint for ``NameError``, ``NotImplementedError`` (and what :func:`also_hint_for` added) in the
    running IPython shell.

    Returns ``True`` when a shell was found (Jupyter, IPython), ``False`` elsewhere (plain Python, pytest), where
    nothing changes. Calling it again is harmless.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    global _shell
    shell = get_ipython()
    if shell is None:
        return False
    _shell = shell
    shell.set_custom_exc(_HINTED_ERRORS, _handler)
    return True


def also_hint_for(error_type: type[BaseException]) -> None:
    """Let the handler also see ``error_type``, an error that can carry an unsolved exercise's (``hint_for`` decides
    per error; any other cause only shows the usual traceback). Takes effect at once where the handler is installed."""
    global _HINTED_ERRORS
    if error_type not in _HINTED_ERRORS:
        _HINTED_ERRORS = (*_HINTED_ERRORS, error_type)
    if _shell is not None:
        _shell.set_custom_exc(_HINTED_ERRORS, _handler)

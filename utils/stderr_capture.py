"""Keep what libraries print on standard error out of a notebook cell, and show it only when the cell fails.

Some libraries write to file descriptor 2 from C++ whatever Python's warning filters say: the profiler's kineto
logs ``USDT: ... profiler_start`` and, without a GPU, ``gpuGetDeviceCount failed with code 35``; the compiler and
subprocesses print their own lines. In Jupyter that text appears in red under the cell, and nbgrader scores a test
cell with *any* standard-error output as failed, so a correct answer would lose its marks to a library's log.

:func:`capture_stderr` redirects both ``sys.stderr`` (Python warnings, tracebacks printed by libraries) and
descriptor 2 itself (C/C++ code, child processes that inherit it) into a temporary file for the length of a
``with`` block. If the block raises, the captured text is printed to standard output before the error propagates,
so a failing cell still shows what the libraries said.

:func:`ignore_float_of_grad_tensor_warning` is the one warning filter test cells share: torch's warning when
``float()`` (or ``complex()``) reads a tensor that requires a gradient, which a correct ``float(loss)`` triggers.
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import warnings
from dataclasses import dataclass
from typing import Iterator

__all__ = ["CapturedStderr", "capture_stderr", "ignore_float_of_grad_tensor_warning"]

# The start of torch's message (python_variable_methods.cpp), matched as a regular expression at its start.
FLOAT_OF_GRAD_TENSOR_WARNING = "Converting a tensor with requires_grad=True to a scalar"


@dataclass
class CapturedStderr:
    """What was written to standard error inside :func:`capture_stderr`; ``text`` is filled when the block ends."""

    text: str = ""

    def lines(self) -> list[str]:
        """The captured text as a list of non-empty lines."""
        return [line for line in self.text.splitlines() if line.strip()]


@contextlib.contextmanager
def capture_stderr(*, show_on_error: bool = True) -> Iterator[CapturedStderr]:
    """Capture ``sys.stderr`` and file descriptor 2 inside the ``with`` block.

    Yields a :class:`CapturedStderr` whose ``text`` holds everything captured once the block has ended. When the
    block raises and ``show_on_error`` is true, the captured text is printed to ``sys.stdout`` under a heading and
    the exception propagates unchanged. Not thread-safe: another thread's writes to descriptor 2 during the block
    are captured too.
    """
    captured = CapturedStderr()
    python_side = io.StringIO()
    for stream in (sys.stdout, sys.stderr, sys.__stderr__):
        with contextlib.suppress(Exception):
            stream.flush()
    saved_fd = os.dup(2)
    with tempfile.TemporaryFile() as fd_side:
        os.dup2(fd_side.fileno(), 2)
        failed = False
        try:
            with contextlib.redirect_stderr(python_side):
                yield captured
        except BaseException:
            failed = True
            raise
        finally:
            with contextlib.suppress(Exception):
                sys.__stderr__.flush()
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            fd_side.seek(0)
            captured.text = python_side.getvalue() + fd_side.read().decode("utf-8", errors="replace")
            if failed and show_on_error and captured.text.strip():
                print("--- standard error captured while the failing call ran ---\n" + captured.text.rstrip(),
                      file=sys.stdout)


def ignore_float_of_grad_tensor_warning() -> None:
    """Keep torch's ``UserWarning`` about ``float(t)`` or ``complex(t)`` of a tensor that requires a gradient off
    standard error.

    ``float(loss)`` is a correct way to read a loss value (the number is the same as ``loss.item()``), but torch
    warns about it on standard error, and nbgrader scores a test cell that writes there as failed. A test cell that
    runs a learner's training code calls this first. It adds one ``warnings`` filter for that message only, for the
    rest of the process; every other warning still shows.
    """
    warnings.filterwarnings("ignore", message=FLOAT_OF_GRAD_TENSOR_WARNING)

"""utils.stderr_capture: library output on descriptor 2 stays out of a cell unless the cell fails."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

import torch

from utils.stderr_capture import capture_stderr, ignore_float_of_grad_tensor_warning


def test_captures_descriptor_2_python_stderr_and_child_processes(capfd):
    with capture_stderr() as got:
        os.write(2, b"USDT: profiler_start from C++\n")
        print("a warning line", file=sys.stderr)
        subprocess.run([sys.executable, "-c", "import os; os.write(2, b'child says hi\\n')"], check=True)
    out, err = capfd.readouterr()
    assert err == "", f"leaked to standard error: {err!r}"
    for text in ("USDT: profiler_start", "a warning line", "child says hi"):
        assert text in got.text
    assert len(got.lines()) >= 3


def test_descriptor_2_is_restored_after_the_block(capfd):
    with capture_stderr():
        pass
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"


def test_a_failing_block_shows_what_was_captured_and_raises(capfd):
    with pytest.raises(ValueError, match="boom"):
        with capture_stderr() as got:
            os.write(2, b"gpuGetDeviceCount failed with code 35\n")
            raise ValueError("boom")
    out, err = capfd.readouterr()
    assert "gpuGetDeviceCount failed with code 35" in out and "standard error captured" in out
    assert err == ""
    assert "code 35" in got.text


def test_a_failing_block_can_stay_silent(capfd):
    with pytest.raises(KeyError):
        with capture_stderr(show_on_error=False):
            os.write(2, b"noise\n")
            raise KeyError("x")
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_processes_started_by_a_test_do_not_see_pytest():
    # conftest.py removes it while a test runs: ipykernel stops forwarding descriptor 2 when it sees it, which hid
    # from the round trip what an instructor's grading scores as a failed cell.
    assert "PYTEST_CURRENT_TEST" not in os.environ


def test_the_float_of_a_grad_tensor_warning_is_silenced_and_no_other():
    loss = torch.ones(3, requires_grad=True).sum()
    always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)     # torch warns once per process otherwise: each block must see its own warning
    try:
        with warnings.catch_warnings(record=True) as before:
            warnings.simplefilter("always")
            float(loss)
        assert any("requires_grad=True to a scalar" in str(w.message) for w in before), \
            "torch no longer warns here: the filter may be dropped"
        with warnings.catch_warnings(record=True) as after:
            warnings.simplefilter("always")
            ignore_float_of_grad_tensor_warning()
            assert float(loss) == 3.0 and complex(loss) == 3
            warnings.warn("another warning")
        assert [str(w.message) for w in after] == ["another warning"]
    finally:
        torch.set_warn_always(always)

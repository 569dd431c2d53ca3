"""tools/pip_progress.py: a long pip install shows what it installs, how much is left, and that it is alive."""
from __future__ import annotations

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
from pip_progress import PipProgress  # noqa: E402

PIP_LOG = """\
Looking in indexes: https://pypi.org/simple
Collecting torch==2.14.1 (from -r requirements-lock.txt (line 180))
  Downloading torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl (899.7 MB)
Requirement already satisfied: numpy==2.3.4 in ./.venv/lib/python3.11/site-packages (from -r x (line 90))
Collecting nvidia-cublas==13.0.0.19 (from -r requirements-lock.txt (line 100))
  Using cached nvidia_cublas-13.0.0.19-py3-none-manylinux_2_27_x86_64.whl (542.8 MB)
Installing collected packages: nvidia-cublas, torch
WARNING: The script torchrun is installed in '/x/bin' which is not on PATH.
Successfully installed nvidia-cublas-13.0.0.19 torch-2.14.1
"""


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_one_line_per_package_with_a_count_downloads_with_sizes_and_warnings_unchanged():
    lines, clock = [], Clock()
    progress = PipProgress(3, lines.append, clock)
    for line in PIP_LOG.splitlines():
        clock.t += 10
        progress.feed(line)
    assert lines[0] == "[setup] 1/3 collecting torch==2.14.1"
    assert lines[1] == "[setup]     downloading torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl (899.7 MB)"
    assert lines[2] == "[setup] 3/3 collecting nvidia-cublas==13.0.0.19", "an installed package still counts"
    assert "542.8 MB" in lines[3]
    assert lines[4].startswith("[setup] unpacking and installing 2 packages (1 already installed)")
    assert lines[5].startswith("WARNING: The script torchrun"), "warnings pass through unchanged"
    assert lines[6] == "[setup] installed 2 packages in 1 min 30 s"
    assert not any("Looking in indexes" in line for line in lines)


def test_a_heartbeat_only_after_a_silence():
    lines, clock = [], Clock()
    progress = PipProgress(3, lines.append, clock)
    progress.feed("Installing collected packages: torch")
    clock.t = 20
    assert progress.heartbeat(30) is None
    clock.t = 95
    assert progress.heartbeat(30) == "[setup] still installing (1 min 35 s so far)"
    assert progress.heartbeat(30) is None, "one heartbeat per silence interval"


def test_run_with_progress_streams_a_real_process_and_returns_its_exit_code():
    from pip_progress import run_with_progress

    lines = []
    script = "print('Collecting a==1'); print('Successfully installed a-1'); raise SystemExit(3)"
    assert run_with_progress([sys.executable, "-c", script], 1, out=lines.append) == 3
    assert lines[0] == "[setup] 1/1 collecting a==1" and lines[1].startswith("[setup] installed 1 packages")

"""Short progress lines for a long `pip install`: what is being installed, how much is left, and that it is alive.

`make setup` installs about 200 pinned packages, several GB with a CUDA build of PyTorch, once. pip's own output
is either silent (``--quiet``: nine minutes without a word, indistinguishable from a hang) or hundreds of lines.
:class:`PipProgress` reads pip's log line by line and prints one line per package with a count
(``[setup] 37/215 collecting numpy==2.3.4``), each download with its size, and, during the long unpacking phase in
which pip prints nothing, a heartbeat every ``heartbeat_s`` seconds. Errors and warnings pass through unchanged.

    python tools/pip_progress.py TOTAL -- pip install ...   # run pip and show its progress
"""
from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from typing import Callable, Optional

_COLLECTING = re.compile(r"^Collecting (\S+)")
_SATISFIED = re.compile(r"^Requirement already satisfied: (\S+)")
_DOWNLOAD = re.compile(r"^\s+(?:Downloading|Using cached) (\S+) \(([^)]+)\)")
_INSTALLING = re.compile(r"^Installing collected packages: (.*)")
_DONE = re.compile(r"^Successfully installed (.*)")
# Lines pip prints that say nothing a learner needs (the Makefile drops the local-index warnings before this).
_NOISE = re.compile(r"^\s*(Obtaining|Preparing metadata|Building|Created wheel|Stored in|Attempting uninstall|"
                    r"Found existing|Uninstalling|Successfully uninstalled|Looking in indexes|Processing)")


def _minutes(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


class PipProgress:
    """Turn pip's log into progress lines for ``total`` requirements, printed with ``out``."""

    def __init__(self, total: int, out: Callable[[str], None] = print, clock: Callable[[], float] = time.monotonic):
        self.total, self.out, self.clock = max(total, 1), out, clock
        self.seen = 0
        self.satisfied = 0
        self.installing = False
        self.start = self.last_output = clock()

    def _say(self, text: str) -> None:
        self.out(f"[setup] {text}")
        self.last_output = self.clock()

    def feed(self, line: str) -> None:
        line = line.rstrip("\n")
        if m := _COLLECTING.match(line):
            self.seen += 1
            self._say(f"{self.seen}/{self.total} collecting {m.group(1)}")
        elif m := _SATISFIED.match(line):
            self.seen += 1
            self.satisfied += 1
            self.last_output = self.clock()
        elif m := _DOWNLOAD.match(line):
            self._say(f"    downloading {m.group(1).rsplit('/', 1)[-1]} ({m.group(2)})")
        elif m := _INSTALLING.match(line):
            self.installing = True
            n = len([p for p in m.group(1).split(",") if p.strip()])
            self._say(f"unpacking and installing {n} packages ({self.satisfied} already installed); the CUDA "
                      "libraries make this the longest step, a few minutes with no other output")
        elif m := _DONE.match(line):
            self.installing = False
            n = len(m.group(1).split())
            self._say(f"installed {n} packages in {_minutes(self.clock() - self.start)}")
        elif line.strip() and not _NOISE.match(line):
            self.out(line)      # warnings, errors and anything unexpected, unchanged
            self.last_output = self.clock()

    def heartbeat(self, every_s: float) -> Optional[str]:
        """The line to print when nothing was printed for ``every_s`` seconds, else None."""
        now = self.clock()
        if now - self.last_output < every_s:
            return None
        self.last_output = now
        what = "installing" if self.installing else "working"
        return f"[setup] still {what} ({_minutes(now - self.start)} so far)"


def run_with_progress(cmd: list, total: int, heartbeat_s: float = 30.0, out: Callable[[str], None] = print,
                      env: Optional[dict] = None) -> int:
    """Run ``cmd`` (a pip install), printing :class:`PipProgress` lines; return its exit code."""
    import os

    progress = PipProgress(total, out)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            env={**(env or os.environ), "PYTHONUNBUFFERED": "1"})
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(1.0):
            line = progress.heartbeat(heartbeat_s)
            if line:
                out(line)

    ticker = threading.Thread(target=beat, daemon=True)
    ticker.start()
    try:
        for line in proc.stdout or []:
            progress.feed(line)
    finally:
        stop.set()
        ticker.join()
    return proc.wait()


def main(argv: list) -> int:
    if "--" not in argv or not argv[0].isdigit():
        print("usage: pip_progress.py TOTAL -- pip install ...", file=sys.stderr)
        return 2
    cut = argv.index("--")
    return run_with_progress(argv[cut + 1:], int(argv[0]), out=lambda s: print(s, flush=True))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

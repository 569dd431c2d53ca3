"""Scratch folders: files a notebook writes only to read them back, removed when the notebook's kernel exits."""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path


def scratch_dir(prefix: str) -> Path:
    """A new, empty folder in the system's temporary directory (``tempfile.gettempdir()``), named ``<prefix>XXXXXXXX``.

    It is removed with everything in it when the process that made it exits normally (a kernel shutdown or
    restart, the end of a script). Processes forked from it (DataLoader workers, ``multiprocessing`` children) do
    not remove it when they exit. Use it for throw-away files (a PNG tree to time decoding, a log of reads, a module
    for worker processes to import); keep what the learner should look at in the day's outputs folder.
    """
    if not prefix or os.sep in prefix or (os.altsep and os.altsep in prefix):
        raise ValueError(f"prefix must be a plain name such as 'day10_pngs_', got {prefix!r}")
    path = Path(tempfile.mkdtemp(prefix=prefix))
    owner = os.getpid()

    def remove() -> None:
        if os.getpid() == owner:  # a forked child inherits this handler: only the maker removes the folder
            shutil.rmtree(path, ignore_errors=True)

    atexit.register(remove)
    return path

"""Scratch folders: files a notebook writes only to read them back, removed when the notebook's kernel exits."""
from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
from pathlib import Path

#: Beside each scratch folder ``X``, the file ``X.owner`` names the process that made it: "<host name> <process id>"
#: (beside, not inside: a folder's contents are what the notebook lists and tests).
OWNER_SUFFIX = ".owner"


def _owner_file(folder: Path) -> Path:
    return folder.with_name(folder.name + OWNER_SUFFIX)


def _owner_is_gone(folder: Path) -> bool:
    """True when ``folder`` is a scratch folder made on this machine by a process that no longer runs."""
    try:
        host, pid = _owner_file(folder).read_text().split()
        if host != socket.gethostname():
            return False  # a /tmp shared with another machine or container: its processes are not visible here
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (OSError, ValueError):  # no owner file (not a scratch folder), unreadable, or a process of another user
        return False
    return False


def scratch_dir(prefix: str) -> Path:
    """A new, empty folder in the system's temporary directory (``tempfile.gettempdir()``), named ``<prefix>XXXXXXXX``.

    It is removed with everything in it when the process that made it exits normally (a kernel shutdown or
    restart, the end of a script). Processes forked from it (DataLoader workers, ``multiprocessing`` children) do
    not remove it when they exit. A process that is killed (a kernel that dies, or one a grader stops after its
    shutdown wait) cannot clean up: the folders with the same prefix that such processes left behind are removed
    by the next call. Use it for throw-away files (a PNG tree to time decoding, a log of reads, a module for worker
    processes to import); keep what the learner should look at in the day's outputs folder.
    """
    if not prefix or os.sep in prefix or (os.altsep and os.altsep in prefix):
        raise ValueError(f"prefix must be a plain name such as 'day10_pngs_', got {prefix!r}")
    for stale in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        if stale.is_dir() and _owner_is_gone(stale):
            shutil.rmtree(stale, ignore_errors=True)
            _owner_file(stale).unlink(missing_ok=True)
    path = Path(tempfile.mkdtemp(prefix=prefix))
    owner = os.getpid()
    _owner_file(path).write_text(f"{socket.gethostname()} {owner}\n")

    def remove() -> None:
        if os.getpid() == owner:  # a forked child inherits this handler: only the maker removes the folder
            shutil.rmtree(path, ignore_errors=True)
            _owner_file(path).unlink(missing_ok=True)

    atexit.register(remove)
    return path

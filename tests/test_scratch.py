"""utils.scratch: a scratch folder disappears when its process exits, not when a forked child does."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from utils.scratch import scratch_dir

# Loads utils/scratch.py on its own: importing the utils package would import torch (about 2 s per process).
LOAD = ("import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('scratch', {str(Path(__file__).parents[1] / 'utils' / 'scratch.py')!r})\n"
        "scratch = importlib.util.module_from_spec(spec); spec.loader.exec_module(scratch)\n")


def run(code: str, tmp_path: Path) -> list[str]:
    done = subprocess.run([sys.executable, "-c", LOAD + code], capture_output=True, text=True, timeout=60,
                          env={"TMPDIR": str(tmp_path), "PATH": ""})
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_folder_and_its_files_are_removed_when_the_process_exits(tmp_path):
    folder, = run("d = scratch.scratch_dir('day99_pngs_'); (d / 'a').mkdir(); (d / 'a' / 'x.png').write_bytes(b'1')\n"
                  "print(d)", tmp_path)
    assert Path(folder).parent == tmp_path and Path(folder).name.startswith("day99_pngs_")
    assert not Path(folder).exists() and not list(tmp_path.iterdir()), "the folder or its owner file was left"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_that_exits_leaves_the_folder_to_its_maker(tmp_path):
    out = run("import os\n"
              "d = scratch.scratch_dir('day99_fork_')\n"
              "pid = os.fork()\n"
              "if pid == 0:\n"
              "    sys.exit(0)  # runs the child's atexit handlers, as a multiprocessing child started with fork can\n"
              "os.waitpid(pid, 0)\n"
              "print(d, d.exists())", tmp_path)
    assert out[1] == "True", "the forked child removed its parent's folder"
    assert not Path(out[0]).exists()


@pytest.mark.parametrize("prefix", ["", "a/b", "../x"])
def test_a_prefix_that_is_not_a_plain_name_is_refused(prefix):
    with pytest.raises(ValueError, match="plain name"):
        scratch_dir(prefix)


def test_folders_left_by_killed_processes_are_removed_by_the_next_call(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    host = socket.gethostname()
    left = {}
    for name, owner in [("killed", f"{host} {dead}"), ("alive", f"{host} {os.getpid()}"),
                        ("other_host", f"another-machine {dead}"), ("no_owner", None)]:
        folder = tmp_path / f"day99_pngs_{name}"
        (folder / "0").mkdir(parents=True)
        if owner is not None:
            (tmp_path / f"{folder.name}.owner").write_text(owner + "\n")
        left[name] = folder
    (tmp_path / "day98_other_killed").mkdir()                  # another prefix: not this call's business
    (tmp_path / "day98_other_killed.owner").write_text(f"{host} {dead}\n")
    fresh = scratch_dir("day99_pngs_")
    assert fresh.is_dir() and not any(fresh.iterdir()), "a new folder is empty: its owner file lies beside it"
    assert not left["killed"].exists() and not (tmp_path / "day99_pngs_killed.owner").exists()
    assert all(left[k].exists() for k in ("alive", "other_host", "no_owner"))
    assert (tmp_path / "day98_other_killed").exists()

"""utils.scratch: a scratch folder disappears when its process exits, not when a forked child does."""
from __future__ import annotations

import subprocess
import sys
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
    assert not Path(folder).exists()


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
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

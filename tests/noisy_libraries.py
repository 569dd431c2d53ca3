"""An IPython start-up file that makes libraries write to standard error, for grading under noise.

On some machines every profiler run logs ``USDT: ... profiler_start`` (and ``gpuGetDeviceCount failed with code
35`` without a GPU) to file descriptor 2; compilers, DataLoader workers, process groups and subprocesses print their
own lines. nbgrader scores a test cell with any standard-error output as failed, so the course's test cells must keep
that output away from the cell (``utils.stderr_capture``). The round trip proves they do: it grades each solution
with this file in the kernel's start-up folder (``grading.nbgrader(..., noisy_libraries=True)``), which makes each of
those calls write a line to descriptor 2 the way the real libraries do. Nothing here imports torch early: the
patches are applied when the notebook itself imports it (some notebooks set environment variables first).
"""
import importlib.abc
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

# The round trip grades the plausible wrong answers (students "mutant_round<k>", "mutant_alone<k>") in the same
# nbgrader run, and nbgrader runs each submission's kernel in autograded/<student>/<day>/. Those are graded quietly:
# noise would fail a mutant's test cell for a reason other than its hidden asserts and so hide a hole in them.
QUIET = Path.cwd().parent.name.startswith("mutant_")


def _noise(what: str) -> None:
    os.write(2, f"USDT: noisy-library stand-in: {what}\n".encode())


_popen_init = subprocess.Popen.__init__


def _noisy_popen_init(self, *args, **kwargs):
    _noise("subprocess started")
    _popen_init(self, *args, **kwargs)


def _patch_torch(torch) -> None:
    import torch.autograd.profiler as autograd_profiler
    import torch.utils.data.dataloader as dataloader

    start_trace = autograd_profiler.profile._start_trace

    def noisy_start_trace(self):
        _noise("SyncActivityProfilerHandler.cpp:39] profiler_start")
        return start_trace(self)

    autograd_profiler.profile._start_trace = noisy_start_trace

    compile_fn = torch.compile

    def noisy_compile(*args, **kwargs):
        _noise("torch.compile called")
        return compile_fn(*args, **kwargs)

    torch.compile = noisy_compile

    # Worker processes inherit descriptor 2, so a line written when the workers start reaches the cell exactly as a
    # worker's own would (fork, spawn or forkserver alike). Patching the worker function itself would break spawn:
    # its pickled reference would name a function the child cannot import.
    iterator = dataloader._MultiProcessingDataLoaderIter
    start_workers = iterator.__init__

    def noisy_start_workers(self, *args, **kwargs):
        _noise("DataLoader workers started")
        return start_workers(self, *args, **kwargs)

    iterator.__init__ = noisy_start_workers

    import torch.distributed as dist
    if dist.is_available():
        init = dist.init_process_group

        def noisy_init(*args, **kwargs):
            _noise("[Gloo] Rank 0 is connected to 0 peer ranks")
            return init(*args, **kwargs)

        dist.init_process_group = noisy_init


class _AfterTorchImport(importlib.abc.MetaPathFinder):
    """Finds ``torch`` with the normal finders, then patches it right after its module code has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        original = spec.loader

        def exec_module(module, _exec=original.exec_module):
            _exec(module)
            _patch_torch(module)

        original.exec_module = exec_module
        return spec


if not QUIET:
    subprocess.Popen.__init__ = _noisy_popen_init
    if "torch" in sys.modules:
        _patch_torch(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _AfterTorchImport())

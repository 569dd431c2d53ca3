"""Launch a training *script* on several processes of this machine, with a hard time limit.

* :func:`run_torchrun` runs ``python -m torch.distributed.run --standalone`` (what the ``torchrun`` command is),
  exactly as you would in a terminal.
* :func:`run_script_ranks` does by hand what torchrun does: it starts ``world_size`` copies of the script, each
  with ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` in its environment. Cheaper
  (no supervising agent), no restarts.

Each rank's stdout and stderr go to **its own files** (torchrun's ``--redirects``), never to one shared pipe where
lines of different ranks interleave, so the output can be read back and parsed (``LaunchResult.rank_stdout``).
A script that reports numbers should still write them to a file from one rank. On timeout the launcher and every
process it started are killed, including the workers torchrun puts in sessions of their own.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import psutil

TERMINATE_GRACE_S = 10.0  # seconds between SIGTERM (torchrun then stops its workers) and SIGKILL


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (for ``MASTER_PORT``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LaunchResult:
    """What a launched job left behind. ``seconds`` is wall-clock time including process start-up.

    ``stdout``/``stderr`` hold what the launcher itself printed (torchrun's agent; empty for
    :func:`run_script_ranks`); ``rank_stdout``/``rank_stderr`` hold each rank's own output, keyed by rank.
    """

    command: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    rank_stdout: dict[int, str] = field(default_factory=dict)
    rank_stderr: dict[int, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def check(self) -> "LaunchResult":
        """Raise ``RuntimeError`` with each rank's last stderr lines unless the job succeeded; return self."""
        if self.ok:
            return self
        why = f"timed out after {self.seconds:.0f} s" if self.timed_out else f"exit code {self.returncode}"
        parts = [f"{' '.join(self.command)} failed ({why})."]
        for rank, err in sorted(self.rank_stderr.items()):
            if err.strip():
                parts.append(f"rank {rank}, last stderr lines:\n" + "\n".join(err.strip().splitlines()[-8:]))
        if self.stderr.strip():
            parts.append("launcher, last stderr lines:\n" + "\n".join(self.stderr.strip().splitlines()[-8:]))
        raise RuntimeError("\n".join(parts))


def torchrun_command(script: str | os.PathLike, nproc_per_node: int = 2, args: Sequence[str] = (), *,
                     python: str | None = None, standalone: bool = True, extra: Sequence[str] = ()) -> list[str]:
    """The ``torchrun`` command line for a single-node job, as a list (``python -m torch.distributed.run`` is the
    same program as the ``torchrun`` entry point, but is sure to use this interpreter)."""
    cmd = [python or sys.executable, "-m", "torch.distributed.run"]
    if standalone:
        cmd.append("--standalone")
    cmd += [f"--nproc_per_node={int(nproc_per_node)}", *extra, str(script), *map(str, args)]
    return cmd


def _job_env(env: dict[str, str] | None, threads_per_process: int | None) -> dict[str, str]:
    full = dict(os.environ)
    if threads_per_process is not None:
        full["OMP_NUM_THREADS"] = str(threads_per_process)
    full.update(env or {})
    # The package root, so that a script in any folder can `import utils`.
    root = str(Path(__file__).resolve().parent.parent)
    full["PYTHONPATH"] = root + (os.pathsep + full["PYTHONPATH"] if full.get("PYTHONPATH") else "")
    return full


def _terminate(procs: Sequence[subprocess.Popen], grace_s: float = TERMINATE_GRACE_S) -> None:
    """SIGTERM each process's group, wait ``grace_s``, then SIGKILL whatever is left of them and their descendants.

    The descendants are listed first: torchrun starts every worker with ``start_new_session=True``, so a signal to
    torchrun's own group does not reach them, and a torchrun killed before it stopped them would leave them running.
    """
    family: list[psutil.Process] = []
    for p in procs:
        try:
            family += psutil.Process(p.pid).children(recursive=True)
        except psutil.Error:
            pass
    for p in procs:
        _signal_group(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:
        _signal_group(p.pid, signal.SIGKILL)
    for child in family:
        try:
            child.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(family, timeout=5)
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.is_file() else ""


def _torchrun_rank_logs(log_dir: Path) -> tuple[dict[int, str], dict[int, str]]:
    """Each local rank's stdout and stderr from torchrun's ``<log_dir>/<run id>/attempt_<n>/<rank>/`` (last attempt)."""
    latest: dict[int, tuple[int, Path]] = {}
    for f in log_dir.glob("*/attempt_*/*/stdout.log"):
        rank, attempt = int(f.parent.name), int(f.parent.parent.name.split("_")[-1])
        if rank not in latest or attempt > latest[rank][0]:
            latest[rank] = (attempt, f.parent)
    ranks = sorted(latest)
    return ({r: _read(latest[r][1] / "stdout.log") for r in ranks},
            {r: _read(latest[r][1] / "stderr.log") for r in ranks})


def run_torchrun(script: str | os.PathLike, nproc_per_node: int = 2, args: Sequence[str] = (), *,
                 timeout_s: float = 120.0, env: dict[str, str] | None = None, threads_per_process: int | None = 1,
                 cwd: str | os.PathLike | None = None, extra: Sequence[str] = (),
                 log_dir: str | os.PathLike | None = None) -> LaunchResult:
    """Run ``torchrun --standalone --nproc_per_node=N script args...`` and return its output.

    Every process is killed after ``timeout_s`` seconds (``LaunchResult.timed_out`` is then True), so a hung
    collective cannot hang the caller. ``env`` entries are added to this process's environment;
    ``threads_per_process`` sets ``OMP_NUM_THREADS`` (1 keeps N processes from fighting over a few CPU cores).
    Each rank's output is written under ``log_dir`` (a temporary folder, deleted afterwards, when not given) and
    returned in ``rank_stdout``/``rank_stderr``.
    """
    keep = log_dir is not None
    logs = Path(log_dir).resolve() if keep else Path(tempfile.mkdtemp(prefix="torchrun_logs_"))
    logs.mkdir(parents=True, exist_ok=True)
    cmd = torchrun_command(script, nproc_per_node, args, extra=[f"--log-dir={logs}", "--redirects=3", *extra])
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_job_env(env, threads_per_process), cwd=cwd, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        _terminate([proc])
        out, err = proc.communicate()
        timed_out = True
    seconds = time.perf_counter() - start
    rank_out, rank_err = _torchrun_rank_logs(logs)
    if not keep:
        shutil.rmtree(logs, ignore_errors=True)
    return LaunchResult(cmd, proc.returncode, out, err, seconds, timed_out, rank_out, rank_err)


def run_script_ranks(script: str | os.PathLike, world_size: int = 2, args: Sequence[str] = (), *,
                     timeout_s: float = 120.0, env: dict[str, str] | None = None,
                     threads_per_process: int | None = 1, cwd: str | os.PathLike | None = None,
                     log_dir: str | os.PathLike | None = None) -> LaunchResult:
    """Start ``world_size`` copies of ``python script args...`` with the variables torchrun would set, by hand.

    Same time limit, environment handling and per-rank output as :func:`run_torchrun`; the files are
    ``<log_dir>/<rank>/stdout.log`` and ``stderr.log``. ``returncode`` is 0 when every rank exited with 0, else the
    first non-zero exit code in rank order.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    keep = log_dir is not None
    logs = Path(log_dir).resolve() if keep else Path(tempfile.mkdtemp(prefix="rank_logs_"))
    base = _job_env(env, threads_per_process)
    base.update({"WORLD_SIZE": str(world_size), "LOCAL_WORLD_SIZE": str(world_size),
                 "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())})
    cmd = [sys.executable, str(script), *map(str, args)]
    start = time.perf_counter()
    procs = []
    for rank in range(world_size):
        folder = logs / str(rank)
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "stdout.log", "w") as out, open(folder / "stderr.log", "w") as err:
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=err, cwd=cwd, start_new_session=True,
                                          env={**base, "RANK": str(rank), "LOCAL_RANK": str(rank)}))
    deadline = time.monotonic() + timeout_s
    timed_out = False
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            break
    if timed_out:
        _terminate(procs)
    seconds = time.perf_counter() - start
    codes = [p.returncode for p in procs]
    returncode = None if timed_out else next((c for c in codes if c != 0), 0)
    rank_out = {r: _read(logs / str(r) / "stdout.log") for r in range(world_size)}
    rank_err = {r: _read(logs / str(r) / "stderr.log") for r in range(world_size)}
    if not keep:
        shutil.rmtree(logs, ignore_errors=True)
    return LaunchResult(cmd, returncode, "", "", seconds, timed_out, rank_out, rank_err)

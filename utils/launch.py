"""Launch a training *script* on several processes of this machine, with a hard time limit.

* :func:`run_torchrun` runs ``python -m torch.distributed.run --standalone`` (what the ``torchrun`` command is),
  exactly as you would in a terminal; with ``fork=True`` it runs torchrun's own agent forked from this process
  instead, so that no new interpreter imports torch (seconds of CPU each).
* :func:`run_script_ranks` does by hand what torchrun does: it starts ``world_size`` copies of the script, each
  with ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` in its environment. Cheaper
  (no supervising agent), no restarts.
* :func:`run_torchrun_nodes` runs a *multi-node* job on this machine: one torchrun agent per "node", all meeting at
  a c10d rendezvous on 127.0.0.1, as agents on separate nodes meet at node 0's address; with ``max_restarts`` the
  agents restart the whole worker group after a failure (:func:`attempt_logs` reads every attempt's output).
  :func:`run_elastic_nodes` runs the same agents on a Python function, forked from this process: no new
  interpreter imports torch, so a notebook can afford it.

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
import logging
import multiprocessing as mp
import tempfile
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import psutil

from .stderr_capture import capture_stderr

TERMINATE_GRACE_S = 10.0  # seconds between SIGTERM (torchrun then stops its workers) and SIGKILL


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (for ``MASTER_PORT``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# free_port() releases the port it found, and another process (another job's store, a hub, any bind to port 0) can
# take it before the job's rendezvous host binds it. The host then fails with this message (torch's own launcher
# retries on it), and the launchers here start the job again on a new port, at most PORT_ATTEMPTS times.
PORT_TAKEN_MESSAGE = "address already in use"
PORT_ATTEMPTS = 3


def port_was_taken(text: str) -> bool:
    """Whether a process's output says it could not bind its port because another process holds it."""
    return PORT_TAKEN_MESSAGE in text.lower()


@dataclass
class LaunchResult:
    """What a launched job left behind. ``seconds`` is wall-clock time including process start-up.

    ``stdout``/``stderr`` hold what the launcher itself printed (torchrun's agent; empty for
    :func:`run_script_ranks`); ``rank_stdout``/``rank_stderr`` hold each rank's own output, keyed by local rank (the rank itself in a one-node
    job; in a :class:`NodesResult` every node counts from 0).
    """

    command: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    rank_stdout: dict[int, str] = field(default_factory=dict)
    rank_stderr: dict[int, str] = field(default_factory=dict)
    pid: int | None = None          # the launcher's process id (torchrun's agent); its workers are its children

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
    _kill_all(family)
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _kill_all(processes: Sequence[psutil.Process]) -> None:
    """SIGKILL each process (already gone is fine) and reap it."""
    for child in processes:
        try:
            child.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(processes, timeout=5)


def _wait_or_stop(procs: Sequence, timeout_s: float, host_log: Path | None, exitcode: Callable[[Any], int | None],
                  stop: Callable[[bool], None]) -> str:
    """Wait for every process until ``timeout_s`` seconds from now. Returns ``"done"``; ``"timed_out"`` after
    ``stop(False)``; or ``"port_taken"`` after ``stop(True)``, as soon as the first process (the rendezvous host)
    failed and ``host_log`` says its port was taken: the others would wait for a store that is not there, so they
    are stopped at once and the caller starts again on a new port. ``exitcode(p)`` is None while ``p`` runs."""
    deadline = time.monotonic() + timeout_s
    while True:
        if host_log is not None and exitcode(procs[0]) not in (None, 0) and port_was_taken(_read(host_log)):
            stop(True)
            return "port_taken"
        if all(exitcode(p) is not None for p in procs):
            return "done"
        if time.monotonic() >= deadline:
            stop(False)
            return "timed_out"
        time.sleep(0.05)


def _wait_or_terminate(procs: Sequence[subprocess.Popen], timeout_s: float, host_log: Path | None = None) -> str:
    """:func:`_wait_or_stop` for started commands; they are stopped by :func:`_terminate` (at once when the port
    was taken)."""
    return _wait_or_stop(procs, timeout_s, host_log, lambda p: p.poll(),
                         lambda port_taken: _terminate(procs, grace_s=0.0 if port_taken else TERMINATE_GRACE_S))


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.is_file() else ""


def attempt_logs(log_dir: str | os.PathLike) -> dict[int, dict[int, str]]:
    """Every local rank's stdout, per attempt, from torchrun's ``<log_dir>/<run id>/attempt_<n>/<rank>/stdout.log``.

    ``n`` is the agent's restart count (``TORCHELASTIC_RESTART_COUNT``). An agent that restarts its workers because
    another node rejoined (a membership change) does not count a restart, so it writes the same ``attempt_<n>``
    again: torchrun empties that folder first, and the earlier attempt's output is gone.
    """
    logs: dict[int, dict[int, str]] = {}
    for f in Path(log_dir).glob("*/attempt_*/*/stdout.log"):
        attempt, rank = int(f.parent.parent.name.split("_")[-1]), int(f.parent.name)
        logs.setdefault(attempt, {})[rank] = _read(f)
    return {a: dict(sorted(r.items())) for a, r in sorted(logs.items())}


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


def run_script_main(script: str, args: Sequence[str] = (), cwd: str | None = None) -> None:
    """A torchrun worker's entry point that does what torchrun does with a script in a new interpreter: run
    ``script`` as ``__main__`` with ``args`` in ``sys.argv``, its folder first on ``sys.path``, in ``cwd``."""
    import runpy

    if cwd is not None:
        os.chdir(cwd)
    sys.argv = [script, *map(str, args)]
    sys.path.insert(0, str(Path(script).parent))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            raise RuntimeError(f"the script exited with code {exit_.code}") from exit_
    except BaseException:
        traceback.print_exc()           # into the rank's stderr log, as a script's uncaught error would be
        raise
    finally:
        sys.stdout.flush()


def can_fork_agent() -> bool:
    """True when torchrun's agent can be forked from this process: fork exists and CUDA is not initialised here."""
    import torch

    return "fork" in mp.get_all_start_methods() and not torch.cuda.is_initialized()


def run_torchrun(script: str | os.PathLike, nproc_per_node: int = 2, args: Sequence[str] = (), *,
                 timeout_s: float = 120.0, env: dict[str, str] | None = None, threads_per_process: int | None = 1,
                 cwd: str | os.PathLike | None = None, extra: Sequence[str] = (),
                 log_dir: str | os.PathLike | None = None, fork: bool = False) -> LaunchResult:
    """Run ``torchrun --standalone --nproc_per_node=N script args...`` and return its output.

    Every process is killed after ``timeout_s`` seconds (``LaunchResult.timed_out`` is then True), so a hung
    collective cannot hang the caller. ``env`` entries are added to a copy of this process's environment for the
    job (``os.environ`` is not changed); ``threads_per_process`` sets ``OMP_NUM_THREADS`` (1 keeps N processes from fighting over a few CPU cores).
    Each rank's output is written under ``log_dir`` (a temporary folder, deleted afterwards, when not given) and
    returned in ``rank_stdout``/``rank_stderr``.

    With ``fork=True`` (and :func:`can_fork_agent`; ``extra`` must be empty), torchrun's own agent runs the job,
    forked from this process (:func:`run_elastic_nodes` with one node: the same rendezvous, variables and log files
    as ``--standalone``), and its workers run the script with :func:`run_script_main`: nobody starts a new Python
    and imports torch again, which costs seconds of CPU per process. ``command`` is still the torchrun command the
    job stands for; ``stdout`` is empty and ``stderr`` holds the agent's log (its standard output and error, one
    file). Otherwise the command itself runs.
    """
    keep = log_dir is not None
    logs = Path(log_dir).resolve() if keep else Path(tempfile.mkdtemp(prefix="torchrun_logs_"))
    logs.mkdir(parents=True, exist_ok=True)
    if fork and not extra and can_fork_agent():
        job = run_elastic_nodes(run_script_main, (str(Path(script).resolve()), [str(a) for a in args],
                                                  None if cwd is None else str(cwd)),
                                nnodes=1, nproc_per_node=nproc_per_node, timeout_s=timeout_s, env=env,
                                threads_per_process=threads_per_process, log_dir=logs)
        node = job.nodes[0]
        if not keep:
            shutil.rmtree(logs, ignore_errors=True)
        return LaunchResult(torchrun_command(script, nproc_per_node, args), node.returncode, "", node.stderr,
                            node.seconds, node.timed_out, node.rank_stdout, node.rank_stderr, node.pid)
    cmd = torchrun_command(script, nproc_per_node, args, extra=[f"--log-dir={logs}", "--redirects=3", *extra])
    start = time.perf_counter()
    with capture_stderr():           # the job's output goes to its own files, never to this process's stderr
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
    first non-zero exit code in rank order; None when the job ran past ``timeout_s`` (``timed_out`` is then True).
    """
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    keep = log_dir is not None
    logs = Path(log_dir).resolve() if keep else Path(tempfile.mkdtemp(prefix="rank_logs_"))
    base = _job_env(env, threads_per_process)
    base.update({"WORLD_SIZE": str(world_size), "LOCAL_WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1"})
    cmd = [sys.executable, str(script), *map(str, args)]
    start = time.perf_counter()
    for _attempt in range(PORT_ATTEMPTS):
        base["MASTER_PORT"] = str(free_port())
        procs = []
        for rank in range(world_size):
            folder = logs / str(rank)
            folder.mkdir(parents=True, exist_ok=True)
            with open(folder / "stdout.log", "w") as out, open(folder / "stderr.log", "w") as err, \
                    capture_stderr():
                procs.append(subprocess.Popen(cmd, stdout=out, stderr=err, cwd=cwd, start_new_session=True,
                                              env={**base, "RANK": str(rank), "LOCAL_RANK": str(rank)}))
        waited = _wait_or_terminate(procs, max(0.0, timeout_s - (time.perf_counter() - start)),
                                    host_log=logs / "0" / "stderr.log")
        if waited != "port_taken":
            break
    timed_out = waited == "timed_out"
    seconds = time.perf_counter() - start
    codes = [p.returncode for p in procs]
    returncode = None if timed_out else next((c for c in codes if c != 0), 0)
    rank_out = {r: _read(logs / str(r) / "stdout.log") for r in range(world_size)}
    rank_err = {r: _read(logs / str(r) / "stderr.log") for r in range(world_size)}
    if not keep:
        shutil.rmtree(logs, ignore_errors=True)
    return LaunchResult(cmd, returncode, "", "", seconds, timed_out, rank_out, rank_err)


# What a torchrun agent logs when it decides something about its workers (with LOGLEVEL=INFO for the "I" lines).
AGENT_DECISIONS = ("restart_count=", "failed (exitcode", "Worker group FAILED", "will restart worker group",
                   "closing signal", "successfully finished")


def agent_decisions(agent_log: str) -> list[tuple[float, str]]:
    """The lines of a torchrun agent's log that record a decision, as ``(seconds since midnight, message)``.

    The agent logs ``I1202 04:22:23.800000 <pid> <file>:<line>] <message>`` (local time of day); run it with
    ``LOGLEVEL=INFO`` to see the rendezvous and restart lines, not only warnings and errors. The ``restart_count=N``
    line of a completed rendezvous round comes back as ``rendezvous round complete: restart_count=N``.
    """
    out = []
    for line in agent_log.splitlines():
        head, sep, message = line.partition("] ")
        parts = head.split()
        message = message.strip()
        if not sep or len(parts) < 2 or not any(k in message for k in AGENT_DECISIONS):
            continue
        if message.startswith("restart_count="):
            message = f"rendezvous round complete: {message}"
        try:
            h, m, sec = parts[1].split(":")
            out.append((int(h) * 3600 + int(m) * 60 + float(sec), message))
        except ValueError:
            continue
    return out


def torchrun_node_command(script: str, nnodes: int, nproc_per_node: int, args: Sequence[str] = (), *,
                          endpoint: str, run_id: str, max_restarts: int = 0, hosts_store: bool | None = None,
                          module: bool = False, python: str | None = None,
                          extra: Sequence[str] = ()) -> list[str]:
    """The torchrun command line of one node of a multi-node job (every node runs the same one).

    ``endpoint`` (``host:port``) is where the agents meet: node 0's address on a cluster; the agent on that host
    runs the rendezvous store (``hosts_store`` says so explicitly instead of letting torchrun compare host names).
    ``run_id`` names the job: agents with another id never join it. ``module`` runs ``script`` as ``python -m``.
    """
    cmd = [python or sys.executable, "-m", "torch.distributed.run", f"--nnodes={int(nnodes)}",
           f"--nproc-per-node={int(nproc_per_node)}", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}",
           f"--rdzv-id={run_id}", f"--max-restarts={int(max_restarts)}"]
    if hosts_store is not None:
        cmd.append(f"--rdzv-conf=is_host={int(hosts_store)}")
    cmd += [*extra, *(["-m"] if module else []), str(script), *map(str, args)]
    return cmd


@dataclass
class NodesResult:
    """What a multi-node job left behind: one :class:`LaunchResult` per agent (node), in node order, each with the
    output of its workers' last attempt; ``attempts[node]`` holds every attempt's (see :func:`attempt_logs`)."""

    nodes: list[LaunchResult]
    attempts: list[dict[int, dict[int, str]]]
    seconds: float
    timed_out: bool

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(n.ok for n in self.nodes)

    def check(self) -> "NodesResult":
        """Raise ``RuntimeError`` with each failed node's last lines unless every node succeeded; return self."""
        errors = []
        for i, node in enumerate(self.nodes):
            try:
                node.check()
            except RuntimeError as err:
                errors.append(f"node {i}: {err}")
        if errors:
            raise RuntimeError("\n".join(errors))
        return self


def run_torchrun_nodes(script: str | os.PathLike, nnodes: int = 2, nproc_per_node: int = 1,
                       args: Sequence[str] = (), *, max_restarts: int = 0, module: bool = False,
                       timeout_s: float = 180.0, env: dict[str, str] | None = None,
                       threads_per_process: int | None = 1, cwd: str | os.PathLike | None = None,
                       log_dir: str | os.PathLike | None = None) -> NodesResult:
    """Run a job of ``nnodes`` "nodes" on this machine: one torchrun agent each, all meeting at 127.0.0.1.

    Each agent is started as it would be on its own node (:func:`torchrun_node_command`, node 0 hosting the
    rendezvous store), with its own log folder ``<log_dir>/node<i>`` and its own stdout/stderr files. Every process
    is killed after ``timeout_s`` seconds. The agents' ranks are assigned by the rendezvous, so node ``i`` here is
    the ``i``-th agent started, not necessarily ``GROUP_RANK`` ``i``.
    """
    keep = log_dir is not None
    logs = Path(log_dir).resolve() if keep else Path(tempfile.mkdtemp(prefix="torchrun_nodes_"))
    job_env = _job_env(env, threads_per_process)
    start = time.perf_counter()
    for _attempt in range(PORT_ATTEMPTS):
        endpoint, run_id = f"127.0.0.1:{free_port()}", f"course-{uuid.uuid4().hex[:8]}"
        procs, cmds = [], []
        for node in range(nnodes):
            folder = logs / f"node{node}"
            if _attempt:
                shutil.rmtree(folder, ignore_errors=True)    # the failed attempt's workers' logs (another run id)
            folder.mkdir(parents=True, exist_ok=True)
            cmd = torchrun_node_command(str(script), nnodes, nproc_per_node, args, endpoint=endpoint,
                                        run_id=run_id, max_restarts=max_restarts, hosts_store=node == 0,
                                        module=module, extra=[f"--log-dir={folder / 'workers'}", "--redirects=3",
                                                              "--local-addr=127.0.0.1"])
            with open(folder / "agent_stdout.log", "w") as out, open(folder / "agent_stderr.log", "w") as err, \
                    capture_stderr():
                procs.append(subprocess.Popen(cmd, stdout=out, stderr=err, env=job_env, cwd=cwd,
                                              start_new_session=True))
            cmds.append(cmd)
        waited = _wait_or_terminate(procs, max(0.0, timeout_s - (time.perf_counter() - start)),
                                    host_log=logs / "node0" / "agent_stderr.log")
        if waited != "port_taken":
            break
    timed_out = waited == "timed_out"
    seconds = time.perf_counter() - start
    nodes, attempts = [], []
    for node, (p, cmd) in enumerate(zip(procs, cmds)):
        folder = logs / f"node{node}"
        rank_out, rank_err = _torchrun_rank_logs(folder / "workers")
        nodes.append(LaunchResult(cmd, None if timed_out else p.returncode, _read(folder / "agent_stdout.log"),
                                  _read(folder / "agent_stderr.log"), seconds, timed_out, rank_out, rank_err, p.pid))
        attempts.append(attempt_logs(folder / "workers"))
    if not keep:
        shutil.rmtree(logs, ignore_errors=True)
    return NodesResult(nodes, attempts, seconds, timed_out)


class _EveryLineFormatter(logging.Formatter):
    """torchrun's log format (``I1202 04:22:23.800000 <pid> <file>:<line>] <message>``, here with the logger's name
    in place of ``<file>:<line>``) on every line of a message."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%m%d %H:%M:%S", time.localtime(record.created))
        prefix = f"{record.levelname[:1]}{stamp}.{int(record.msecs):03d}000 {record.process} {record.name}] "
        text = record.getMessage() + (("\n" + self.formatException(record.exc_info)) if record.exc_info else "")
        return "\n".join(prefix + line for line in text.splitlines())


def _agent_main(config, fn, args: tuple, log_path: str, env: dict[str, str], threads: int | None) -> None:
    """One forked torchrun agent: its output goes to ``log_path``; exits 0 when its workers succeeded, else 1."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    os.environ.update(env)
    if threads is not None:                       # first, before any parallel region: this process is a fork, and
        import torch                              # OpenMP's thread pool does not survive a fork (run_processes too)

        os.environ["OMP_NUM_THREADS"] = str(threads)
        torch.set_num_threads(threads)           # the forked workers inherit it
    from torch.distributed.elastic.utils.logging import get_logger
    from torch.distributed.launcher.api import elastic_launch

    handler = logging.StreamHandler(sys.stderr)  # the agent's loggers, at the level torchrun would use
    handler.setFormatter(_EveryLineFormatter())
    level = os.environ.get("LOGLEVEL", "WARNING")
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("torch.distributed.elastic") or name.startswith("torch.distributed.launcher"):
            log = logging.getLogger(name)
            log.setLevel(level)
            log.handlers = [handler]
            log.propagate = False
    get_logger()
    try:
        elastic_launch(config, fn)(*args)
    except Exception as err:                      # ChildFailedError: the workers failed more often than allowed
        cause = err.__cause__                     # e.g. a RendezvousConnectionError's "address already in use"
        because = f" (caused by {type(cause).__name__}: {str(cause)[:1000]})" if cause is not None else ""
        print(f"E {type(err).__name__}: {str(err)[:2000]}{because}", file=sys.stderr, flush=True)
        sys.exit(1)
    sys.exit(0)


def _kill_agents(procs: Sequence) -> None:
    """SIGKILL forked agents and every process below them (their workers)."""
    family = []
    for p in procs:
        try:
            family += psutil.Process(p.pid).children(recursive=True)
        except psutil.Error:
            pass
        p.kill()
    _kill_all(family)
    for p in procs:
        p.join(timeout=5)


def _wait_for_agents(procs: Sequence, timeout_s: float, host_log: Path) -> str:
    """:func:`_wait_or_stop` for forked agents (``multiprocessing`` processes), killed with their workers when the
    time runs out or the port was taken."""
    waited = _wait_or_stop(procs, timeout_s, host_log, lambda p: p.exitcode, lambda _port_taken: _kill_agents(procs))
    if waited == "done":
        for p in procs:
            p.join()
    return waited


def run_elastic_nodes(fn, args: Sequence = (), *, nnodes: int = 2, nproc_per_node: int = 1, max_restarts: int = 0,
                      timeout_s: float = 180.0, env: dict[str, str] | None = None,
                      threads_per_process: int | None = 1,
                      log_dir: str | os.PathLike | None = None) -> NodesResult:
    """The job of :func:`run_torchrun_nodes`, with the function ``fn(*args)`` as the workers' entry point.

    Each agent is torchrun's own (``torch.distributed.launcher.api.elastic_launch``, which the ``torchrun`` command
    calls once it has read its arguments: ``torch/distributed/run.py``), with the configuration of
    :func:`torchrun_node_command`, started by forking this process; the agents fork their workers (``start_method=
    "fork"``). Nothing imports torch again, so a restart costs a fork, not a Python start-up. ``fn`` must be
    importable (a module's function) and this process must not have initialised CUDA (the job is refused with a RuntimeError,
    whatever ``fn`` does). Every agent and
    worker is killed after ``timeout_s``; each agent's log is ``<log_dir>/node<i>/agent_stderr.log``.
    """
    import torch
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.launcher.api import LaunchConfig

    if torch.cuda.is_initialized() or "fork" not in mp.get_all_start_methods():
        raise RuntimeError("run_elastic_nodes forks its agents, which is unsafe once this process has initialised "
                           "CUDA (or impossible here): run the job with run_torchrun_nodes, which starts the torchrun "
                           "command in fresh processes")
    keep = log_dir is not None
    logs = Path(log_dir).resolve() if keep else Path(tempfile.mkdtemp(prefix="elastic_nodes_"))
    agent_env = {k: v for k, v in _job_env(env, threads_per_process).items() if k in (env or {}) or
                 k in ("OMP_NUM_THREADS", "PYTHONPATH")}
    ctx = mp.get_context("fork")
    start = time.perf_counter()
    for _attempt in range(PORT_ATTEMPTS):
        endpoint, run_id = f"127.0.0.1:{free_port()}", f"course-{uuid.uuid4().hex[:8]}"
        procs = []
        for node in range(nnodes):
            folder = logs / f"node{node}"
            if _attempt:
                shutil.rmtree(folder, ignore_errors=True)    # the failed attempt's logs (another run id)
            folder.mkdir(parents=True, exist_ok=True)
            config = LaunchConfig(min_nodes=nnodes, max_nodes=nnodes, nproc_per_node=nproc_per_node, run_id=run_id,
                                  rdzv_backend="c10d", rdzv_endpoint=endpoint,
                                  rdzv_configs={"is_host": "1" if node == 0 else "0", "timeout": 900},
                                  max_restarts=max_restarts, start_method="fork", local_addr="127.0.0.1",
                                  logs_specs=DefaultLogsSpecs(log_dir=str(folder / "workers"), redirects=Std.ALL))
            with capture_stderr():
                p = ctx.Process(target=_agent_main, args=(config, fn, tuple(args), str(folder / "agent_stderr.log"),
                                                          agent_env, threads_per_process), daemon=False)
                p.start()
            procs.append(p)
        waited = _wait_for_agents(procs, max(0.0, timeout_s - (time.perf_counter() - start)),
                                  logs / "node0" / "agent_stderr.log")
        if waited != "port_taken":
            break
    timed_out = waited == "timed_out"
    seconds = time.perf_counter() - start
    command = torchrun_node_command(f"{fn.__module__}.{fn.__qualname__}", nnodes, nproc_per_node, [],
                                    endpoint=endpoint, run_id=run_id, max_restarts=max_restarts)
    nodes, attempts = [], []
    for node, p in enumerate(procs):
        folder = logs / f"node{node}"
        rank_out, rank_err = _torchrun_rank_logs(folder / "workers")
        nodes.append(LaunchResult(command, None if timed_out else p.exitcode, "", _read(folder / "agent_stderr.log"),
                                  seconds, timed_out, rank_out, rank_err, p.pid))
        attempts.append(attempt_logs(folder / "workers"))
    if not keep:
        shutil.rmtree(logs, ignore_errors=True)
    return NodesResult(nodes, attempts, seconds, timed_out)

"""Part A of the GPU check: every solution notebook at smoke size on the GPU, a few at once, under a time budget.

Each notebook runs in its own papermill process (``python -m papermill``) with ``SMOKE=True`` and ``DEVICE`` set,
its own working folder and its own output copy under the kit's work folder: the repository's notebooks are never
written. Each papermill process starts a session (process group) of its own; one that overruns is killed with every
process under it, the kernel (which jupyter_client starts in a session of its own) and its DataLoader workers and
process groups included. A notebook still running when its limit is reached is ``timeout``; one that never started
is ``not run``.

Order and concurrency: notebooks start longest first, by the CPU smoke times carried in
``tools/gpu_check/notebook_seconds.json`` (written by the rehearsal, ``tools/gpu_rehearsal.py``), so that the slots
finish together. At most ``workers`` run at once (four by default: eight contexts on one card made notebooks that
time things or size batches from free memory fail for no fault of their own), and the notebooks in
:data:`EXCLUSIVE` run alone: Day 09 searches for the largest batch that fits, which needs the whole card.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ORDER_FILE = Path(__file__).with_name("notebook_seconds.json")
EXCLUSIVE = {"day09"}          # days whose notebook must have the GPU to itself (its memory, its timings)
DEFAULT_WORKERS = 4
NOTEBOOK_LIMIT_S = 90.0        # one smoke notebook on the GPU; the CPU dry run multiplies it


def carried_seconds(path: Path = ORDER_FILE) -> dict[str, float]:
    """``{"solutions/dayNN/x.ipynb": seconds}`` from the carried order file, or ``{}``."""
    try:
        return {k: float(v) for k, v in json.loads(path.read_text()).get("seconds", {}).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def running_order(notebooks: list[Path], seconds: dict[str, float]) -> list[Path]:
    """Exclusive notebooks first (the others wait for them anyway), then longest first; a notebook without a
    carried time counts as the median of the known ones."""
    known = sorted(seconds.values())
    default = known[len(known) // 2] if known else 0.0
    return sorted(notebooks, key=lambda p: (p.parent.name not in EXCLUSIVE, -seconds.get(str(p), default), str(p)))


def first_error(executed: Path) -> str | None:
    """``"cell 12: NameError: ..."`` for the first cell of an executed notebook that raised, or ``None``."""
    try:
        nb = json.loads(executed.read_text())
    except (OSError, ValueError):
        return None
    for index, cell in enumerate(nb.get("cells", [])):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return f"cell {index}: {out.get('ename')}: {str(out.get('evalue'))[:300]}"
    return None


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``, every process below it and every process group they lead (a kernel's session, whose
    DataLoader workers may already have lost their parent)."""
    try:
        import psutil

        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except Exception:            # psutil missing, or the process already gone
        procs = []
    groups = {pid}
    for proc in procs:
        try:
            groups.add(os.getpgid(proc.pid))
        except OSError:
            pass
    groups.discard(os.getpgid(0))                    # never this kit's own group
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
    for proc in procs:
        try:
            proc.kill()
        except Exception:
            pass


class Slots:
    """``n`` slots: an ordinary notebook takes one, an exclusive notebook all of them."""

    def __init__(self, n: int):
        self.n, self.free = n, n
        self.cond = threading.Condition()

    def take(self, k: int) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.free >= k)
            self.free -= k

    def give(self, k: int) -> None:
        with self.cond:
            self.free += k
            self.cond.notify_all()


def run_notebooks(notebooks: list[Path], repo: Path, work: Path, device: str, workers: int, budget_s: float,
                  env: dict[str, str], log=print, limit_s: float = NOTEBOOK_LIMIT_S,
                  seconds: dict[str, float] | None = None) -> list[dict]:
    """Run ``notebooks`` (paths relative to ``repo``) with papermill, ``workers`` at a time, each for at most
    ``limit_s`` seconds and all within ``budget_s`` seconds. Returns one row per notebook: ``notebook``, ``status``
    (pass / fail / timeout / not run), ``seconds`` and ``error`` (the failing cell, or the end of papermill's
    output)."""
    deadline = time.monotonic() + budget_s
    queue = running_order(notebooks, carried_seconds() if seconds is None else seconds)
    slots = Slots(max(1, workers))
    lock = threading.Lock()

    def one(rel: Path) -> dict:
        row = {"notebook": str(rel), "status": "not run", "seconds": 0.0, "error": "the part's time budget was spent"}
        need = slots.n if rel.parent.name in EXCLUSIVE else 1
        slots.take(need)
        try:
            left = min(limit_s, deadline - time.monotonic())
            if left < 1:
                return row
            cwd = work / "runs" / rel.parent.name
            cwd.mkdir(parents=True, exist_ok=True)
            out = work / "executed" / rel.name
            out.parent.mkdir(parents=True, exist_ok=True)
            cmd = [sys.executable, "-m", "papermill", str(repo / rel), str(out), "-p", "SMOKE", "True", "-p",
                   "DEVICE", device, "--cwd", str(cwd), "-k", "python3", "--no-progress-bar", "--log-level", "ERROR"]
            start = time.monotonic()
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    start_new_session=True)
            try:
                output, _ = proc.communicate(timeout=left)
                status = "pass" if proc.returncode == 0 else "fail"
                error = None if status == "pass" else (first_error(out) or (output or "")[-400:].strip())
            except subprocess.TimeoutExpired:
                kill_tree(proc.pid)
                proc.communicate()
                status = "timeout"
                error = (f"still running after {left:.0f} s (limit {limit_s:.0f} s a notebook, "
                         f"{budget_s:.0f} s the part)")
            row.update(status=status, seconds=round(time.monotonic() - start, 1), error=error)
            with lock:
                log(f"  {status:<8} {row['seconds']:6.1f} s  {rel}" + (f"  <- {error}" if error else ""))
            return row
        finally:
            slots.give(need)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        rows = list(pool.map(one, queue))
    return sorted(rows, key=lambda r: r["notebook"])


def markdown_table(rows: list[dict], title: str) -> str:
    """Part A's result as a markdown table, failures first."""
    passed = sum(r["status"] == "pass" for r in rows)
    lines = [f"# {title}", "", f"{passed} of {len(rows)} notebooks passed.", "",
             "| notebook | status | seconds | error |", "|---|---|---:|---|"]
    for r in sorted(rows, key=lambda r: (r["status"] == "pass", r["notebook"])):
        error = (r.get("error") or "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r['notebook']} | {r['status']} | {r['seconds']:.1f} | {error} |")
    return "\n".join(lines) + "\n"


def quiet_env(env: dict[str, str], threads: int) -> dict[str, str]:
    """``env`` with ``threads`` OpenMP/MKL threads and no telemetry (MLflow, and tools that honour DO_NOT_TRACK):
    for every process the kit starts, notebooks, recorders and benchmarks alike."""
    return dict(env, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), MLFLOW_DISABLE_TELEMETRY="true",
                DO_NOT_TRACK="true", PYTHONUNBUFFERED="1")


def notebook_env(repo: Path, workers: int) -> dict[str, str]:
    """The environment of each papermill run: ``utils`` importable from the checkout, a share of the cores each,
    no GUI backend, no progress bars, no telemetry."""
    threads = max(1, (os.cpu_count() or 2) // max(1, workers))
    env = quiet_env(dict(os.environ, MPLBACKEND="Agg", TQDM_DISABLE="1"), threads)
    env["PYTHONPATH"] = os.pathsep.join([str(repo)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env

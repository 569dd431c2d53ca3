"""Part A of the GPU check: every solution notebook at smoke size on the GPU, several at once, under a time budget.

Each notebook runs in its own papermill process (``python -m papermill``) with ``SMOKE=True`` and ``DEVICE`` set,
its own working folder and its own output copy under the kit's work folder: the repository's notebooks are never
written. Longest notebooks start first (known durations from ``build/notebook_timings.json`` when the test suite
left one), so that N workers finish together. A notebook still running when the part's budget is spent is killed
and reported as ``timeout``; one that never started is ``not run``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def known_durations(timings_file: Path) -> dict[str, float]:
    """``{"solutions/dayNN/x.ipynb": seconds}`` from the suite's timing table, or ``{}``."""
    try:
        rows = json.loads(timings_file.read_text())
    except (OSError, ValueError):
        return {}
    return {r["name"]: float(r["seconds"]) for r in rows if r.get("kind") == "papermill"}


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


def run_notebooks(notebooks: list[Path], repo: Path, work: Path, device: str, workers: int, budget_s: float,
                  env: dict[str, str], log=print) -> list[dict]:
    """Run ``notebooks`` (paths relative to ``repo``) with papermill, ``workers`` at a time, within ``budget_s``
    seconds in all. Returns one row per notebook: ``notebook``, ``status`` (pass / fail / timeout / not run),
    ``seconds`` and ``error`` (the failing cell, or the end of papermill's output)."""
    deadline = time.monotonic() + budget_s
    order = known_durations(repo / "build" / "notebook_timings.json")
    queue = sorted(notebooks, key=lambda p: (-order.get(str(p), 0.0), str(p)))
    lock = threading.Lock()

    def one(rel: Path) -> dict:
        row = {"notebook": str(rel), "status": "not run", "seconds": 0.0, "error": "the part's time budget was spent"}
        left = deadline - time.monotonic()
        if left < 1:
            return row
        day = rel.parent.name
        cwd = work / "runs" / day
        cwd.mkdir(parents=True, exist_ok=True)
        out = work / "executed" / rel.name
        out.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "papermill", str(repo / rel), str(out), "-p", "SMOKE", "True", "-p", "DEVICE",
               device, "--cwd", str(cwd), "-k", "python3", "--no-progress-bar", "--log-level", "ERROR"]
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=left)
            status = "pass" if proc.returncode == 0 else "fail"
            error = None if status == "pass" else (first_error(out) or (proc.stderr or proc.stdout)[-400:].strip())
        except subprocess.TimeoutExpired:
            status, error = "timeout", f"still running when the part's budget ({budget_s:.0f} s) was spent"
        row.update(status=status, seconds=round(time.monotonic() - start, 1), error=error)
        with lock:
            log(f"  {status:<8} {row['seconds']:6.1f} s  {rel}" + (f"  <- {error}" if error else ""))
        return row

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


def notebook_env(repo: Path, workers: int) -> dict[str, str]:
    """The environment of each papermill run: ``utils`` importable from the checkout, a share of the cores each,
    no GUI backend, no progress bars."""
    threads = str(max(1, (os.cpu_count() or 2) // max(1, workers)))
    env = dict(os.environ, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads, MPLBACKEND="Agg", TQDM_DISABLE="1",
               PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(repo)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env

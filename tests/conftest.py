"""Shared test fixtures and the notebook timing table printed at the end of the suite."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

# Two pytest workers share two cores: one thread per process (and per notebook kernel) avoids oversubscription.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
# No MPLBACKEND or TQDM_DISABLE here: kernels started by the tests inherit this environment, and those variables
# change what cells print (Agg warns on plt.show()), so grading would no longer see what an instructor's does.
# nbgrader runs helper executables (alembic) by name: make the environment's own bin folder come first.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

ROOT = Path(__file__).resolve().parents[1]
TIMINGS_DIR = ROOT / "build" / "timings"


def solution_notebooks() -> list[Path]:
    return sorted((ROOT / "solutions").glob("day[0-9][0-9]/*.ipynb"))


def course_days() -> list[str]:
    return sorted(p.name for p in (ROOT / "solutions").glob("day[0-9][0-9]") if p.is_dir())


def record_timing(kind: str, name: str, seconds: float) -> None:
    """Append one notebook timing (seconds); each xdist worker writes its own file, merged at session end."""
    TIMINGS_DIR.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(TIMINGS_DIR / f"{worker}.jsonl", "a") as f:
        f.write(json.dumps({"kind": kind, "name": name, "seconds": round(seconds, 2), "time": time.time()}) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run each test without PYTEST_CURRENT_TEST in the environment, so that the processes it starts (nbgrader,
    papermill, their kernels) behave as they do from an instructor's shell: ipykernel stops forwarding descriptor 2
    (C++ logs, child processes) to the notebook when it sees that variable, and nbgrader scores a test cell with
    standard-error output as failed. With it, the round trip passed cells that an instructor's grading failed."""
    value = os.environ.pop("PYTEST_CURRENT_TEST", None)
    try:
        yield
    finally:
        if value is not None:
            os.environ["PYTEST_CURRENT_TEST"] = value


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):  # the controller, not an xdist worker
        for f in TIMINGS_DIR.glob("*.jsonl"):
            f.unlink()


# A unit test slower than this belongs under @pytest.mark.slow, so that `make test-fast` stays under a minute.
SLOW_UNMARKED_S = 2.0
_unmarked_slow: list[tuple[str, float]] = []


def pytest_runtest_logreport(report):
    if report.when == "call" and report.duration > SLOW_UNMARKED_S and not {"slow", "notebooks"} & set(
            report.keywords):
        _unmarked_slow.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _unmarked_slow:
        terminalreporter.section(f"tests over {SLOW_UNMARKED_S:g} s without a slow marker (make test-fast runs them)")
        for nodeid, seconds in sorted(_unmarked_slow, key=lambda r: -r[1]):
            terminalreporter.write_line(f"{seconds:6.1f} s  {nodeid}")
    rows = []
    for f in sorted(TIMINGS_DIR.glob("*.jsonl")):
        rows += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    if not rows:
        return
    rows.sort(key=lambda r: (r["kind"], r["name"]))
    out = ROOT / "build" / "notebook_timings.json"
    out.write_text(json.dumps(rows, indent=1))
    tr = terminalreporter
    tr.section("notebook run times (seconds)")
    for r in rows:
        tr.write_line(f"{r['kind']:<12} {r['name']:<48} {r['seconds']:>8.1f}")
    tr.write_line(f"total {sum(r['seconds'] for r in rows):.1f} s over {len(rows)} runs; written to {out}")

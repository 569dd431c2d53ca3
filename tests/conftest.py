"""Shared test fixtures and the notebook timing table printed at the end of the suite."""
from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

import pytest

# Several pytest workers (three by default, Makefile) share the cores: one thread per process (and per notebook
# kernel) avoids oversubscription.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
# No MPLBACKEND or TQDM_DISABLE here: kernels started by the tests inherit this environment, and those variables
# change what cells print (Agg warns on plt.show()), so grading would no longer see what an instructor's does.
# nbgrader runs helper executables (alembic) by name: make the environment's own bin folder come first.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

ROOT = Path(__file__).resolve().parents[1]
TIMINGS_DIR = ROOT / "build" / "timings"
# The suite's subprocesses (nbgrader, papermill, kernels) skip one optional import that costs every nbgrader and
# papermill command about 1.5 s of CPU and checks nothing the suite grades: tests/import_shortcuts/rfc3987_syntax.py.
IMPORT_SHORTCUTS = Path(__file__).resolve().parent / "import_shortcuts"
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(IMPORT_SHORTCUTS), os.environ.get("PYTHONPATH")]))


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
        for f in TIMINGS_DIR.glob("*.jsonl*"):
            f.unlink()


def _cpu_s() -> float:
    """CPU seconds of this process and of its finished children (nbgrader, kernels, workers), user + system."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Record each test's CPU seconds (its own and its subprocesses'): unlike wall time, a measure of the suite's
    cost that does not change when the machine is busy. The slowest are listed at the end of the run."""
    wall, cpu = time.perf_counter(), _cpu_s()
    yield
    TIMINGS_DIR.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(TIMINGS_DIR / f"{worker}.jsonl.cpu", "a") as f:
        f.write(json.dumps({"test": item.nodeid, "cpu_s": round(_cpu_s() - cpu, 2),
                            "wall_s": round(time.perf_counter() - wall, 2),
                            "unmarked": not {"slow", "notebooks"} & set(item.keywords)}) + "\n")


# A unit test that costs more CPU than this belongs under @pytest.mark.slow, so that `make test-fast` stays under a
# minute. CPU seconds, not wall seconds: on a busy machine every test is slow by the clock.
SLOW_UNMARKED_S = 2.0


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    tests = [json.loads(line) for f in sorted(TIMINGS_DIR.glob("*.jsonl.cpu"))
             for line in f.read_text().splitlines() if line.strip()]
    unmarked_slow = [t for t in tests if t["unmarked"] and t["cpu_s"] > SLOW_UNMARKED_S]
    if unmarked_slow:
        terminalreporter.section(f"tests over {SLOW_UNMARKED_S:g} s of CPU without a slow marker (make test-fast runs "
                                 "them)")
        for t in sorted(unmarked_slow, key=lambda t: -t["cpu_s"]):
            terminalreporter.write_line(f"{t['cpu_s']:6.1f} s CPU  {t['test']}")
    if tests:
        total_cpu = sum(t["cpu_s"] for t in tests)
        terminalreporter.section("where the suite's CPU time goes (tests and their subprocesses)")
        for t in sorted(tests, key=lambda t: -t["cpu_s"])[:25]:
            terminalreporter.write_line(f"{t['cpu_s']:7.1f} s CPU {t['wall_s']:7.1f} s wall  {t['test']}")
        terminalreporter.write_line(f"total {total_cpu:.0f} s CPU over {len(tests)} tests")
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


# The suite's longest tests, longest first (from the per-test CPU list at the end of a run). Started first, with
# `--dist worksteal` (the Makefile) handing queued tests to an idle worker, they run side by side with the many short
# tests instead of leaving one worker alone at the end of the run.
LONGEST_FIRST = (
    "test_class_grading.py::",
    "test_exchange.py::",
    "test_learner_path.py::",
    "test_instructor.py::test_guide_grading_workflow",
    "test_elastic_restart.py::",
    "test_grading.py::test_round_trip",
    "test_grader_mutants.py::test_hidden_tests_catch_every_mutant",
    "test_gpu_check.py::test_dry_run",
)


# Among the days' round trips, the costliest first (CPU seconds of their round trips, measured on 2026-12-04:
# 180, 147, 125, 108, 106, 94, 90, 86, 78, 72): in day order they came last, and the run ended with one worker
# grading Day 32 alone while the other waited.
COSTLIEST_DAYS_FIRST = ("day18", "day20", "day19", "day17", "day26", "day32", "day05", "day31", "day30", "day04")


def pytest_collection_modifyitems(config, items):
    def rank(item) -> tuple[int, int]:
        group = next((k for k, key in enumerate(LONGEST_FIRST) if key in item.nodeid), len(LONGEST_FIRST))
        day = next((k for k, d in enumerate(COSTLIEST_DAYS_FIRST) if f"[{d}]" in item.nodeid), len(COSTLIEST_DAYS_FIRST))
        return group, day

    items.sort(key=rank)      # stable: the order inside each group is kept, the costliest days first

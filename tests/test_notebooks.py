"""Every solution notebook runs top to bottom at smoke size under papermill, into a temp folder.

The repository's notebooks are never written to. A failure names the notebook and the cell. Test ids start with the
day (`day07/day07_week1_review.ipynb`), so `make test DAY=07` selects one day's run with `pytest -k day07`.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from conftest import ROOT, record_timing, solution_notebooks

CELL_TIMEOUT_S = 240


@pytest.mark.notebooks
@pytest.mark.parametrize("notebook", solution_notebooks(), ids=lambda p: p.parent.name + "/" + p.name)
def test_solution_notebook_runs_in_smoke_mode(notebook: Path, tmp_path: Path):
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    before = notebook.read_bytes()
    out = tmp_path / notebook.name
    start = time.perf_counter()
    try:
        pm.execute_notebook(str(notebook), str(out), parameters={"SMOKE": True}, cwd=str(tmp_path),
                            kernel_name="python3", execution_timeout=CELL_TIMEOUT_S, progress_bar=False,
                            log_output=False)
    except PapermillExecutionError as e:
        pytest.fail(f"{notebook.relative_to(ROOT)} failed in cell {e.cell_index} (execution count "
                    f"{e.exec_count}): {e.ename}: {e.evalue}\n{e.source[:600]}")
    elapsed = time.perf_counter() - start
    record_timing("papermill", str(notebook.relative_to(ROOT)), elapsed)
    assert notebook.read_bytes() == before, "the run modified the repository's notebook"

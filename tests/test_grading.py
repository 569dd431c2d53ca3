"""nbgrader machinery: days/ is a fresh generation of solutions/, notebooks carry no outputs, grade_ids are unique,
and every day survives a round trip: the blank learner copy scores 0, the solution scores full marks.

Every per-day test has the day in its id, so `make test DAY=07` (pytest -k day07) runs just that day's."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import ROOT, course_days, record_timing, solution_notebooks
from grading import cell_scores, make_course_copy, nbgrader, scores, submit
from test_grader_alternatives import label, load_alternatives, lost_points, rounds_of, submit_alternatives
from test_grader_mutants import (MISSED, day_cells, graded_in_the_round_trip, load_mutants, missed_mutants,
                                 mutant_days, mutants_to_grade, plan_rounds, reach, round_students, submit_mutants)


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def test_every_day_has_a_notebook_and_a_learner_copy():
    days = course_days()
    assert days, "no solutions/dayNN folders"
    for day in days:
        src = sorted(p.name for p in (ROOT / "solutions" / day).glob("*.ipynb"))
        rel = sorted(p.name for p in (ROOT / "days" / day).glob("*.ipynb"))
        assert src, f"solutions/{day} has no notebook"
        assert src == rel, f"days/{day} has {rel}, solutions/{day} has {src}: run `make days`"


def test_grading_kernels_use_unix_sockets_outside_the_submission(tmp_path, monkeypatch):
    """nbgrader_config.py gives every kernel nbgrader starts Unix sockets in the private runtime folder: a TCP kernel
    can lose a port it was given to another process before it binds it, and dies before it starts (a distributed day
    graded next to other work hit it in CI). The sockets must not land in the submission's folder, where the notebook
    runs, and their path must stay short whatever the home folder (a Unix socket's path is limited to about 100
    characters: a deep home folder's runtime directory killed every kernel of the exchange test)."""
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbformat import v4
    from traitlets.config.loader import PyFileConfigLoader

    deep_home = tmp_path / ("a-long-folder-name-" * 4) / "home" / "teacher"      # as a hub's homes can be
    deep_home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(deep_home))
    monkeypatch.delenv("JUPYTER_RUNTIME_DIR", raising=False)
    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    submission = tmp_path / "submission"
    submission.mkdir()
    monkeypatch.chdir(submission)
    nb = v4.new_notebook(cells=[v4.new_code_cell("import os; print(sorted(os.listdir('.')))")],
                         metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    seen: dict = {}

    class RecordingKernelManager(KernelManager):
        def write_connection_file(self, **kwargs):
            super().write_connection_file(**kwargs)
            seen.update(self.get_connection_info())

    NotebookClient(nb, config=config, kernel_manager_class=RecordingKernelManager, timeout=60,
                   startup_timeout=30).execute()
    assert seen["transport"] == "ipc", "grading kernels talk over TCP: set c.KernelManager.transport in nbgrader_config"
    assert not Path(seen["ip"]).is_relative_to(submission), \
        f"kernel sockets at {seen['ip']}, in the submission's folder"
    assert len(seen["ip"]) < 90, f"kernel sockets at {seen['ip']}: too long a path for a Unix socket"
    assert nb.cells[0].outputs[0]["text"].strip() == "[]", \
        "the kernel's sockets show in the folder the notebook runs in"


def test_suite_subprocesses_skip_the_optional_iri_checker_and_still_validate_notebooks():
    """tests/import_shortcuts: the nbgrader and papermill commands the suite starts do not build rfc3987_syntax's
    grammars (about 1.5 s of CPU each), and nbformat still validates a notebook (and rejects a broken one)."""
    import subprocess
    import sys

    code = ("import sys, nbformat\n"
            "nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('1')])\n"
            "nbformat.validate(nb)\n"
            "nb.cells[0]['cell_type'] = 'no such type'\n"
            "try:\n    nbformat.validate(nb)\nexcept nbformat.ValidationError:\n    print('rejected')\n"
            "print('rfc3987_syntax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["rejected", "False"], out


# Cell metadata that a notebook run or a JupyterLab session adds; nbstripout removes it too (tools/githooks).
RUN_METADATA = ("ExecuteTime", "execution", "collapsed", "scrolled")


def test_notebooks_are_committed_without_outputs():
    """solutions/ is the source of truth and is reviewed as text (tools/nbtext.py): no outputs, counts or run state."""
    fix = "clear outputs and save, or run `.venv/bin/nbstripout --keep-id FILE` (`make hooks` checks every commit)"
    for nb in solution_notebooks() + sorted((ROOT / "days").glob("day[0-9][0-9]/*.ipynb")):
        for i, cell in enumerate(_cells(nb)):
            where = f"{nb.relative_to(ROOT)} cell {i} (id {cell.get('id')})"
            if cell["cell_type"] == "code":
                assert not cell.get("outputs"), f"{where} has outputs: {fix}"
                assert cell.get("execution_count") is None, f"{where} has an execution count: {fix}"
            run_state = [k for k in RUN_METADATA if k in cell.get("metadata", {})]
            assert not run_state, f"{where} has run metadata {run_state}: {fix}"


def test_grade_ids_are_unique_across_the_course():
    seen: dict[str, str] = {}
    for nb in solution_notebooks():
        for cell in _cells(nb):
            gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if gid:
                assert gid not in seen, f"grade_id {gid!r} in {nb.name} is also in {seen[gid]}"
                seen[gid] = nb.name


def test_every_notebook_has_a_parameters_cell_with_smoke():
    for nb in solution_notebooks():
        params = [c for c in _cells(nb) if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(params) == 1, f"{nb.name}: want exactly one cell tagged 'parameters', found {len(params)}"
        src = "".join(params[0]["source"])
        assert "SMOKE = False" in src and "DEVICE" in src, f"{nb.name}: parameters need SMOKE = False and DEVICE"
        assert "nbgrader" not in params[0]["metadata"], f"{nb.name}: the parameters cell must not be graded"


def test_papermill_reads_every_parameter(caplog):
    # papermill parses each `NAME = value  # comment` line to list a notebook's parameters (`papermill
    # --help-notebook`, inspect_notebook); a comment with quotes, '=' or '<=' makes it skip the line with a warning.
    import logging

    import papermill as pm

    for nb in solution_notebooks():
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="papermill"):
            found = pm.inspect_notebook(str(nb))
        unparsed = [r.getMessage() for r in caplog.records if "Unable to parse" in r.getMessage()]
        assert not unparsed, f"{nb.name}: {unparsed}"
        assert "SMOKE" in found and "DEVICE" in found, f"{nb.name}: papermill sees only {sorted(found)}"


def test_learner_notebooks_leak_no_solution_or_hidden_test():
    for nb in sorted((ROOT / "days").glob("day*/*.ipynb")):
        text = nb.read_text(encoding="utf-8")
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
            assert marker not in text, f"{nb.relative_to(ROOT)} leaks {marker!r}"


def test_days_has_no_day_without_a_solution():
    extra = sorted({p.name for p in (ROOT / "days").glob("day*") if p.is_dir()} - set(course_days()))
    assert not extra, f"days/ has {extra} but solutions/ does not: delete them (solutions/ is the only source)"


def assert_days_match_generation(day: str, fresh_dir: Path) -> None:
    """days/<day> is byte-identical to the release nbgrader just generated into ``fresh_dir``."""
    committed_dir = ROOT / "days" / day
    fresh = {p.relative_to(fresh_dir): p.read_bytes() for p in fresh_dir.rglob("*") if p.is_file()}
    committed = {p.relative_to(committed_dir): p.read_bytes() for p in committed_dir.rglob("*") if p.is_file()
                 and "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts}
    assert sorted(map(str, committed)) == sorted(map(str, fresh)), \
        f"days/{day} has other files than a fresh generation: run `make days DAY={day[3:]}`"
    stale = [str(k) for k in fresh if fresh[k] != committed[k]]
    assert not stale, f"days/{day} differs from a fresh generation in {stale}: run `make days DAY={day[3:]}`, never " \
                      "edit days/ by hand"


def failed_cells(executed: Path) -> list[str]:
    """Cells of an executed notebook that raised, as '<file> cell <index> (<grade_id>): <error>'."""
    out = []
    for i, cell in enumerate(_cells(executed)):
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
                out.append(f"{executed.name} cell {i}{f' ({gid})' if gid else ''}: {o.get('ename')}: "
                           f"{str(o.get('evalue'))[:300]}\n{''.join(cell['source'])[:400]}")
    return out


@pytest.mark.notebooks
@pytest.mark.parametrize("day", course_days())
def test_round_trip_blank_scores_zero_and_solution_scores_full(day: str, tmp_path: Path):
    """One nbgrader run of smoke-size executions, one per submission, checks five things at once:
    - days/<day> is exactly the release nbgrader generates from solutions/<day>;
    - the solution runs top to bottom without an error in any cell (what a papermill run checked: nbgrader executes
      at smoke size, as `SMOKE = True` does);
    - graded as an instructor grades (tests/grading.py: grading_env), with libraries that write to standard error
      (tests/noisy_libraries.py), the blank learner copy scores 0, and the solution and the first correct
      alternative of every exercise (tests/grader_alternatives/) keep full marks whatever the profiler, the
      compiler, DataLoader workers, process groups and subprocesses print;
    - with GRADER_MUTANTS=N (`make test` sets 1), the first N plausible wrong answers of every exercise
      (tests/grader_mutants/) lose points, graded as tests/test_grader_mutants.py grades them, without the noise.
    One nbgrader run instead of one per kind of submission saves an assignment generation and an nbgrader start-up
    per day."""
    course = make_course_copy(tmp_path / "course", days=[day])
    nbgrader(course, "generate_assignment", day, "--force", "--log-level=WARN")
    assert_days_match_generation(day, course / "days" / day)
    submit(course, "blank", day, sorted((course / "days" / day).glob("*.ipynb")))
    submit(course, "solution", day, sorted((course / "solutions" / day).glob("*.ipynb")))
    first_alternatives = (rounds_of(load_alternatives(day)) or [[]])[0]
    if first_alternatives:
        submit_alternatives(course, day, "alternatives", first_alternatives)
    students = ["blank", "solution"] + (["alternatives"] if first_alternatives else [])
    mutants = mutants_to_grade(load_mutants(day)) if graded_in_the_round_trip() and day in mutant_days() else []
    cells = day_cells(day)
    reaches = reach(cells)
    rounds = plan_rounds(mutants, reaches)
    submit_mutants(day, course, round_students(rounds))
    start = time.perf_counter()
    nbgrader(course, "autograde", day, "--create", "--force", "--log-level=WARN", timeout=1800, noisy_libraries=True)
    record_timing(f"autograde x{len(students) + len(rounds)}", day, time.perf_counter() - start)
    errors = [e for nb in sorted((course / "autograded" / "solution" / day).glob("*.ipynb")) for e in failed_cells(nb)]
    assert not errors, f"{day}: the solution does not run top to bottom at smoke size:\n" + "\n".join(errors)
    result = scores(course, day, students)
    blank, best = result["blank"], result["solution"]
    assert best[1] > 0, f"{day}: no points to score"
    assert blank[0] == 0, f"{day}: the unmodified learner copy scored {blank[0]}/{blank[1]}; a test passes on a stub"
    if best[0] != best[1]:
        lost = {g: s for g, s in cell_scores(course, day, ["solution"])["solution"].items() if s[0] < s[1]}
        pytest.fail(f"{day}: the solution scored {best[0]}/{best[1]} under noisy libraries; cells that lost points: "
                    f"{lost}. A test cell that writes to standard error scores 0: wrap library calls in "
                    "utils.stderr_capture.capture_stderr()")
    if first_alternatives:
        lost = lost_points(cell_scores(course, day, ["alternatives"])["alternatives"])
        assert not lost, (f"{day}: correct answers written another way lose points: {lost}. The first alternative of "
                          f"each exercise: {[label(day, a) for a in first_alternatives]}; `make test-grader DAY="
                          f"{day[3:]}` names the one that fails")
    if rounds:
        missed = missed_mutants(day, course, rounds, cell_scores(course, day, list(round_students(rounds))), cells,
                                reaches, noisy_libraries=True)
        assert not missed, MISSED + "\n".join(missed)

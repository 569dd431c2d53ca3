"""The grader regression list: every plausible wrong answer kept in tests/grader_mutants/dayNN.py must lose points.

A mutant (grader_mutants.Mutant) is a small change to one exercise's solution. For each day, the mutated notebooks
are graded by `nbgrader autograde` exactly as a class is graded, one submission ("student") per round and all the
day's rounds in one nbgrader process:
- round k holds the k-th mutant of every exercise of the day: nbgrader scores each test cell on its own, so mistakes
  in different exercises can share a submission;
- except where a test cell uses names that an earlier exercise's solution defines (Day 32's pipeline calls
  write_report): a mistake upstream could fail that test for the wrong reason, so those mutants get other rounds;
- after grading, every test cell that no mutant of the round reaches must still score full marks. One that does not
  means a mutant reaches further than the notebook's names show (it changed a shared object, or crashed the kernel):
  every verdict it could have faked is graded again with its mutant alone, in a second autograde.
A mutant is caught when its `caught_by` test cell scores less than its points. Each submission costs one smoke-size
run of the notebook, so `make test` (and `make test DAY=NN`) grades the first mutant of every exercise
(GRADER_MUTANTS=1: round 1 of most days), and `make test-grader` (with DAY=NN for one day) grades them all.

Fast checks (no notebook runs) keep the list from rotting: each mutant names a real solution cell and test cell of
its day, and its `find` text occurs exactly once in that cell, so editing a solution fails here, by name, at once.
"""
from __future__ import annotations

import ast
import importlib
import json
import os
import re
import resource
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT, course_days, record_timing
from grader_mutants import Mutant
from grading import cell_scores, make_course_copy, mutate_notebook, nbgrader

MUTANTS_DIR = ROOT / "tests" / "grader_mutants"


def mutant_days() -> list[str]:
    return sorted(p.stem for p in MUTANTS_DIR.glob("day[0-9][0-9].py"))


def load_mutants(day: str) -> list[Mutant]:
    mutants = importlib.import_module(f"grader_mutants.{day}").MUTANTS
    assert mutants and all(isinstance(m, Mutant) for m in mutants), f"{day}.py: MUTANTS must be a list of Mutant"
    return list(mutants)


def label(day: str, m: Mutant) -> str:
    return f"{day} mutant {m.why!r} in {m.cell}"


@dataclass(frozen=True)
class Cell:
    notebook: str      # file name
    position: int      # order of execution across the day's notebooks
    grade_id: str      # "" for a cell without nbgrader metadata
    role: str          # "solution", "tests" or ""
    points: float
    source: str
    code: bool


def day_cells(day: str) -> list[Cell]:
    cells = []
    for nb_path in sorted((ROOT / "solutions" / day).glob("*.ipynb")):
        for c in json.loads(nb_path.read_text(encoding="utf-8"))["cells"]:
            meta = c.get("metadata", {}).get("nbgrader", {})
            role = "solution" if meta.get("solution") else "tests" if meta.get("grade") else ""
            cells.append(Cell(nb_path.name, len(cells), meta.get("grade_id", "") if role else "", role,
                              float(meta.get("points", 0) or 0), "".join(c["source"]), c["cell_type"] == "code"))
    return cells


_NEW_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp,
               ast.DictComp, ast.GeneratorExp)


def _binds(stmt: ast.AST) -> set[str]:
    """Module-level names a statement (re)binds; imports are left out (they carry no exercise's answer)."""
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) or isinstance(node, _NEW_SCOPES):
            return
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, ast.Store):
            base = node.value
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name):
                out.add(base.id)   # `result["x"] = ...` changes result
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(stmt)
    return out


def _reads(stmt: ast.AST) -> set[str]:
    """Names a statement reads from the notebook's namespace: not parameters, a function's locals, loop or
    comprehension variables, which the statement binds itself."""
    loads, own = set(), set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loads.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            own |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
            if not isinstance(node, ast.Lambda):
                own |= {n.id for b in node.body for n in ast.walk(b) if isinstance(n, ast.Name)
                        and isinstance(n.ctx, ast.Store)}
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            own |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            own.add(node.name)
    return loads - own


def _statements(source: str) -> list[tuple[set[str], set[str]]]:
    """(reads, binds) of each top-level statement of a cell. Magics are dropped; a cell that does not parse counts
    as one statement that reads and binds every identifier in it (the safe side)."""
    text = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    try:
        return [(_reads(s), _binds(s)) for s in ast.parse(text).body]
    except SyntaxError:
        words = set(re.findall(r"[A-Za-z_]\w*", text))
        return [(words, words)]


def reach(cells: list[Cell]) -> dict[str, set[str]]:
    """For each solution cell, the test cells that can see what it defines: its own test cells (up to the next
    exercise), and every later test cell that reads one of its names or a name bound from one (statement by
    statement: a name rebound from untouched values is clean again)."""
    out: dict[str, set[str]] = {}
    for i, sol in enumerate(cells):
        if sol.role != "solution":
            continue
        seen = set()
        for later in cells[i + 1:]:
            if later.notebook != sol.notebook or later.role == "solution":
                break
            if later.role == "tests":
                seen.add(later.grade_id)
        tainted = set().union(*(binds for _, binds in _statements(sol.source)))
        for later in cells[i + 1:]:
            if later.notebook != sol.notebook or not later.code:
                continue
            for reads, binds in _statements(later.source):
                if reads & tainted:
                    tainted |= binds
                    if later.role == "tests":
                        seen.add(later.grade_id)
                else:
                    tainted -= binds
        out[sol.grade_id] = seen
    return out


def plan_rounds(mutants: list[Mutant], reaches: dict[str, set[str]]) -> list[list[Mutant]]:
    """Greedy, in list order: each mutant joins the first round where no other mutant is in the same cell, reaches
    its `caught_by` cell, or has its `caught_by` reached by it. Independent exercises: round k = k-th mutants."""
    def affects(m: Mutant) -> set[str]:
        return reaches[m.cell] | {m.caught_by}

    rounds: list[list[Mutant]] = []
    for m in mutants:
        for r in rounds:
            if all(o.cell != m.cell and m.caught_by not in affects(o) and o.caught_by not in affects(m) for o in r):
                r.append(m)
                break
        else:
            rounds.append([m])
    return rounds


def graded_in_the_round_trip() -> bool:
    """GRADER_MUTANTS=N (a number; `make test` sets 1): the round trip (tests/test_grading.py) grades the first N
    mutants of each exercise in its own nbgrader run, beside the blank, the solution and the first alternatives."""
    return os.environ.get("GRADER_MUTANTS", "").strip().isdigit()


def mutants_to_grade(mutants: list[Mutant]) -> list[Mutant]:
    """GRADER_MUTANTS=N keeps the first N mutants of each exercise: `make test` sets 1, so every exercise keeps one
    graded wrong answer for about one submission per day. 'rest' keeps the others. Unset or 'all'
    (`make test-grader`): every mutant."""
    value = os.environ.get("GRADER_MUTANTS", "").strip()
    if not value or value == "all":
        return mutants
    if value != "rest" and (not value.isdigit() or int(value) < 1):
        raise ValueError(f"GRADER_MUTANTS={value!r}: a number of mutants per exercise (1 or more), 'rest' or 'all'")
    rank: dict[str, int] = {}
    out = []
    for m in mutants:
        rank[m.cell] = rank.get(m.cell, 0) + 1
        if (rank[m.cell] > 1) if value == "rest" else (rank[m.cell] <= int(value)):
            out.append(m)
    return out


def _children_cpu_s() -> float:
    # CPU seconds of finished child processes (nbgrader and its kernels): on a shared machine, the cost of the
    # grading itself, where wall time also counts everyone else's work.
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def submit_mutants(day: str, course: Path, submissions: dict[str, list[Mutant]]) -> None:
    """Place the day's solution notebooks with each student's mutants applied as that student's submission."""
    cells_of = {}
    for c in day_cells(day):
        cells_of.setdefault(c.notebook, set()).add(c.grade_id)
    for student, mutants in submissions.items():
        for nb in sorted((course / "solutions" / day).glob("*.ipynb")):
            changes = [(m.cell, m.find, m.replace, label(day, m)) for m in mutants if m.cell in cells_of[nb.name]]
            mutate_notebook(nb, course / "submitted" / student / day / nb.name, changes)


def grade(day: str, course: Path, submissions: dict[str, list[Mutant]]) -> dict[str, dict[str, tuple[float, float]]]:
    """Submit the day's solution notebooks with each student's mutants applied; autograde them all at once."""
    submit_mutants(day, course, submissions)
    nbgrader(course, "autograde", day, "--create", "--force", "--log-level=WARN", timeout=1800)
    return cell_scores(course, day, list(submissions))


def round_students(rounds: list[list[Mutant]]) -> dict[str, list[Mutant]]:
    return {f"mutant_round{k + 1}": r for k, r in enumerate(rounds)}


def missed_mutants(day: str, course: Path, rounds: list[list[Mutant]], got: dict[str, dict[str, tuple[float, float]]],
                   cells: list[Cell], reaches: dict[str, set[str]], *, noisy_libraries: bool = False) -> list[str]:
    """The mutants of ``rounds`` (graded as :func:`round_students`, with scores ``got``) whose `caught_by` cell
    kept full marks. A mutant whose verdict a round-mate may have faked (:func:`doubtful`) is graded again alone, in
    a second autograde of ``course``."""
    round_scores = [got[f"mutant_round{k + 1}"] for k in range(len(rounds))]
    verdicts = {m: s[m.caught_by] for r, s in zip(rounds, round_scores) for m in r}
    again = doubtful(rounds, round_scores, cells, reaches)
    if again:   # graded again, each alone, in a second nbgrader run
        shutil.rmtree(course / "submitted")
        submit_mutants(day, course, {f"mutant_alone{i + 1}": [m] for i, m in enumerate(again)})
        nbgrader(course, "autograde", day, "--create", "--force", "--log-level=WARN", timeout=1800,
                 noisy_libraries=noisy_libraries)
        alone = cell_scores(course, day, [f"mutant_alone{i + 1}" for i in range(len(again))])
        verdicts.update({m: alone[f"mutant_alone{i + 1}"][m.caught_by] for i, m in enumerate(again)})
    return [f"{label(day, m)}: {m.caught_by} scored {s:g}/{mx:g} with {m.find!r} -> {m.replace!r}"
            for m, (s, mx) in verdicts.items() if s >= mx]


MISSED = "hidden tests pass a plausible wrong answer (add a test that fails on it):\n"


def doubtful(rounds: list[list[Mutant]], scores: list[dict[str, tuple[float, float]]], cells: list[Cell],
             reaches: dict[str, set[str]]) -> list[Mutant]:
    """Mutants whose verdict a round-mate may have faked, judged from the test cells that no mutant of a round
    should reach but that lost points ("leaks"). A leak shows that a mutant of that round reaches further than the
    notebook's names say: it may have failed any later test cell of its round (a crash, a hang), and any later
    mutant of the same exercises as the leaked cell, in every round."""
    position = {c.grade_id: c.position for c in cells if c.grade_id}
    exercise, current = {}, ""
    for c in cells:
        current = c.grade_id if c.role == "solution" else current
        if c.role == "tests":
            exercise[c.grade_id] = current
    tests = set(exercise)
    learned: dict[str, set[str]] = {}     # solution cell -> exercises its mutants were seen to reach
    out = []
    for r, got in zip(rounds, scores):
        reached = set().union(*(reaches[m.cell] | {m.caught_by} for m in r))
        leaks = [t for t in tests - reached if got[t][0] < got[t][1]]
        for o in r:
            learned.setdefault(o.cell, set()).update(exercise[t] for t in leaks if position[t] > position[o.cell])
        if leaks:
            out += [m for m in r if any(o is not m and position[o.cell] < position[m.caught_by] for o in r)]
    for r in rounds:
        out += [m for m in r if m not in out and any(o is not m and position[o.cell] < position[m.caught_by] and
                                                     exercise[m.caught_by] in learned[o.cell] for o in r)]
    return out


def _toy_day() -> list[Cell]:
    # Exercise a defines f; b's solution calls f (b depends on a); c is independent, but a plain cell binds x from f
    # and then rebinds it from nothing of a's, so c's test, which reads x, does not depend on a.
    spec = [("a", "solution", "import math\ndef f(v):\n    return v + 1"), ("a_tests", "tests", "assert f(1) == 2"),
            ("", "", "x = f(0)\nx = 3"),
            ("b", "solution", "def g(v):\n    return 2 * f(v)"), ("b_tests", "tests", "assert g(1) == 4"),
            ("c", "solution", "def h(v):\n    return [v for v in range(v)]"),
            ("c_tests", "tests", "for v in range(2):\n    assert h(x) == [0, 1, 2]")]
    return [Cell("toy.ipynb", i, gid, role, 1.0 if role == "tests" else 0.0, src, True)
            for i, (gid, role, src) in enumerate(spec)]


def _toy_mutant(cell: str, k: int) -> Mutant:
    return Mutant(cell, f"find{k}", f"replace{k}", f"mistake {k} in {cell}", f"{cell}_tests")


def test_reach_follows_names_not_rebound_ones():
    assert reach(_toy_day()) == {"a": {"a_tests", "b_tests"}, "b": {"b_tests"}, "c": {"c_tests"}}


def test_rounds_batch_independent_exercises_and_separate_dependent_ones():
    a1, a2, b1, c1, c2 = (_toy_mutant(c, k) for c, k in [("a", 1), ("a", 2), ("b", 1), ("c", 1), ("c", 2)])
    rounds = plan_rounds([a1, a2, b1, c1, c2], reach(_toy_day()))
    assert rounds == [[a1, c1], [a2, c2], [b1]], "b's test calls a's f: a's mutants must not share b's rounds"


def test_a_leak_sends_the_verdicts_it_may_have_faked_to_be_graded_alone():
    cells = _toy_day()
    a1, a2, b1, c1 = (_toy_mutant(c, k) for c, k in [("a", 1), ("a", 2), ("b", 1), ("c", 1)])
    full = {"a_tests": (1.0, 1.0), "b_tests": (1.0, 1.0), "c_tests": (1.0, 1.0)}
    lost = {t: {**full, t: (0.0, 1.0)} for t in full}
    both = {**full, "a_tests": (0.0, 1.0), "c_tests": (0.0, 1.0)}
    assert doubtful([[a1, c1], [a2]], [both, lost["a_tests"]], cells, reach(cells)) == []
    # a2 alone also failed c's test, which a's names do not reach: a's mutants reach c, so c1's loss next to a1 may
    # be a1's doing.
    assert doubtful([[a1, c1], [a2]], [both, both], cells, reach(cells)) == [c1]
    # A cell that no mutant of the round reaches lost points (here: a crash, or a broken solution): every verdict
    # read after another mutant of that round ran is in doubt.
    assert doubtful([[b1, c1]], [{**both, "b_tests": (0.0, 1.0)}], cells, reach(cells)) == [c1]


def test_grader_mutants_picks_the_first_of_each_exercise_or_the_rest(monkeypatch):
    a1, a2, b1, a3 = (_toy_mutant(c, k) for c, k in [("a", 1), ("a", 2), ("b", 1), ("a", 3)])
    for value, want in [("1", [a1, b1]), ("2", [a1, a2, b1]), ("rest", [a2, a3]), ("all", [a1, a2, b1, a3])]:
        monkeypatch.setenv("GRADER_MUTANTS", value)
        assert mutants_to_grade([a1, a2, b1, a3]) == want, value
    monkeypatch.setenv("GRADER_MUTANTS", "0")
    with pytest.raises(ValueError, match="GRADER_MUTANTS"):
        mutants_to_grade([a1])


@pytest.mark.parametrize("day", mutant_days())
def test_mutants_name_real_cells_and_text(day: str):
    """Fast: the list is well formed and still matches the solutions (make test-fast runs this)."""
    assert day in course_days(), f"tests/grader_mutants/{day}.py: there is no solutions/{day}"
    cells = {c.grade_id: c for c in day_cells(day) if c.grade_id}
    problems, seen = [], set()
    for m in load_mutants(day):
        where = label(day, m)
        sol, test = cells.get(m.cell), cells.get(m.caught_by)
        if sol is None or sol.role != "solution":
            problems.append(f"{where}: {m.cell!r} is not a solution cell of {day}")
        elif (found := sol.source.count(m.find)) != 1:
            problems.append(f"{where}: the text to change occurs {found} times in the cell, not once (the solution was "
                            f"edited: update the entry): {m.find!r}")
        if test is None or test.role != "tests":
            problems.append(f"{where}: caught_by {m.caught_by!r} is not a test cell of {day}")
        elif sol is not None and test.position < sol.position:
            problems.append(f"{where}: {m.caught_by} runs before {m.cell}, so it cannot catch the mistake")
        if m.find == m.replace or not m.why.strip():
            problems.append(f"{where}: the change must differ from the solution and say why it is wrong")
        if (m.cell, m.find, m.replace) in seen:
            problems.append(f"{where}: listed twice")
        seen.add((m.cell, m.find, m.replace))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("day", course_days())
def test_every_graded_exercise_keeps_a_mutant(day: str):
    """Every solution cell of the course has at least one plausible wrong answer in the regression list."""
    listed = {m.cell for m in load_mutants(day)} if day in mutant_days() else set()
    missing = [c.grade_id for c in day_cells(day) if c.role == "solution" and c.grade_id not in listed]
    assert not missing, f"{day}: no mutant in tests/grader_mutants/{day}.py for {missing}"


@pytest.mark.notebooks
@pytest.mark.slow
@pytest.mark.parametrize("day", mutant_days())
def test_hidden_tests_catch_every_mutant(day: str, tmp_path: Path):
    if graded_in_the_round_trip():
        pytest.skip(f"GRADER_MUTANTS={os.environ['GRADER_MUTANTS']}: the round trip (tests/test_grading.py) grades them")
    mutants = load_mutants(day)
    cells = day_cells(day)
    reaches = reach(cells)
    mutants = mutants_to_grade(mutants)
    if not mutants:
        pytest.skip(f"{day}: no mutant left to grade with GRADER_MUTANTS={os.environ.get('GRADER_MUTANTS')}")
    rounds = plan_rounds(mutants, reaches)

    course = make_course_copy(tmp_path / "course", days=[day])
    nbgrader(course, "generate_assignment", day, "--force", "--log-level=WARN")
    start, cpu_start = time.perf_counter(), _children_cpu_s()
    got = grade(day, course, round_students(rounds))
    missed = missed_mutants(day, course, rounds, got, cells, reaches)
    seconds, cpu = time.perf_counter() - start, _children_cpu_s() - cpu_start
    record_timing("autograde mutants", f"{day}: {len(mutants)} mutants, {len(rounds)} rounds, {cpu:.0f} s CPU",
                  seconds)
    assert not missed, MISSED + "\n".join(missed)

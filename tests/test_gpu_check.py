"""The GPU check kit (tools/gpu_check.py): its CPU dry run end to end (slow), and the pieces that decide what a
maintainer gets from one short device call: the running order and budgets, the wheel list and its offline install,
Part A's order, concurrency and process-group kills, partial payloads, part selection, the bundle's size limit and
its safe unpacking."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import ROOT
from utils.profiling import load_recorded_file, load_recorded_results, write_recorded

KIT = ROOT / "tools" / "gpu_check.py"


def _load_kit():
    spec = importlib.util.spec_from_file_location("gpu_check_cli", KIT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


kit = _load_kit()


# ------------------------------------------------------------------------------------------ order and budgets
def test_one_call_benchmarks_first_then_part_a_then_cheap_then_resnet50_recorders():
    from gpu_check.recorders import CHEAP, RECORDERS, RESNET50

    parts = list(kit.all_parts())
    assert parts[:4] == ["gpu_reference", "loop_overhead", "input_path", "notebooks"]
    assert parts[4:4 + len(CHEAP)] == list(CHEAP) and parts[4 + len(CHEAP):-1] == list(RESNET50)
    assert parts[-1] == "gpu_reference_extra" and list(kit.OPTIONAL_BUDGET_S) == ["gpu_reference_extra"]
    required = kit.all_parts(optional=False)
    assert sum(required.values()) <= kit.TOTAL_BUDGET_S == 480, "one device call of at most 480 s"
    assert sum(RECORDERS[d].budget_s for d in CHEAP) < sum(RECORDERS[d].budget_s for d in RESNET50)


def test_list_prints_one_call_of_at_most_480_s(capsys):
    assert kit.main(["--list"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[1].startswith("gpu_reference") and "[optional]" in lines[-2]
    total = sum(kit.all_parts(optional=False).values())
    assert f"the required parts add up to {total:.0f} s, within the kit's --time-budget of 480 s" in out


def test_the_docs_state_every_budget_and_the_total():
    doc = " ".join(kit.__doc__.split())
    for name, budget in kit.all_parts().items():
        assert f"{name} {budget:.0f}" in doc, f"the kit's docstring does not state {name}'s budget {budget:.0f} s"
    total = sum(kit.all_parts(optional=False).values())
    assert f"Required parts: {total:.0f} s in all" in doc
    readme = " ".join((ROOT / "results" / "README.md").read_text().split())
    assert f"add up to {total:.0f} s" in readme and "480 s" in readme


def test_benchmarks_run_their_key_rows_only():
    ref = kit.benchmark_args("gpu_reference", tiny=False)
    assert ref[ref.index("--modes") + 1] == "channels_last_bf16,bf16,tf32" and "--cudnn-benchmark" in ref
    assert ref[ref.index("--batches") + 1] == "256"
    extra = kit.benchmark_args("gpu_reference_extra", tiny=False)
    assert extra[extra.index("--modes") + 1] == "fp32,compile_bf16" and "--append" in extra
    loop = kit.benchmark_args("loop_overhead", tiny=False)
    assert loop[:6] == ["--model", "resnet50", "--image-size", "224", "--amp", "bf16"]
    assert kit.benchmark_args("loop_overhead", tiny=True) == ["--smoke"]
    assert "compile_bf16" not in kit.benchmark_args("gpu_reference_extra", tiny=True)
    assert kit.part_limit(60, dry_run=False) == 75 and kit.part_limit(10, dry_run=True) >= 150


def test_select_parts_runs_all_or_only_the_named_or_failed_ones():
    every = kit.select_parts(None, {})
    assert every == list(kit.all_parts())
    assert kit.select_parts("loop_overhead,day09", {}) == ["loop_overhead", "day09"]   # running order kept
    previous = {"day09": {"status": "timeout"}, "day11": {"status": "pass"}, "notebooks": {"status": "fail"},
                "day30": {"status": "skipped"}, "day24": {"status": "not run"}}
    previous.update({n: {"status": "pass"} for n in kit.all_parts() if n not in previous})
    assert kit.select_parts("failed", previous) == ["notebooks", "day09", "day24"]
    # A call cut short leaves the part it was running, and those after it, with no status: they did not pass.
    del previous["day22"], previous["day14"]
    assert kit.select_parts("failed", previous) == [n for n in kit.all_parts()
                                                    if n in ("notebooks", "day09", "day24", "day22", "day14")]
    with pytest.raises(SystemExit, match="unknown part 'day99'"):
        kit.select_parts("day99", {})


def test_only_failed_reruns_only_the_failed_notebooks(monkeypatch):
    import argparse

    args = argparse.Namespace(notebooks=None, dry_run=False, only="failed")
    prev = [{"notebook": "solutions/day05/day05_data_and_splits.ipynb", "status": "fail"},
            {"notebook": "solutions/day06/day06_baseline_training_loop.ipynb", "status": "pass"}]
    assert [p.parent.name for p in kit.notebook_selection(args, prev)] == ["day05"]
    args.only = "notebooks"
    assert len(kit.notebook_selection(args, prev)) == len(list((ROOT / "solutions").glob("day*/*.ipynb")))
    args.notebooks, args.dry_run = "all", True
    assert len(kit.notebook_selection(args, prev)) > 30
    args.notebooks = None
    assert [p.parent.name for p in kit.notebook_selection(args, prev)] == [kit.DRY_RUN_NOTEBOOK]


def test_every_process_runs_without_telemetry_and_the_dry_run_caps_threads():
    from gpu_check.notebooks import notebook_env

    for env in (notebook_env(ROOT, 4), kit.part_env(dry_run=True), kit.part_env(dry_run=False)):
        assert env["MLFLOW_DISABLE_TELEMETRY"] == "true" and env["DO_NOT_TRACK"] == "true"
        assert env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)
    assert kit.part_env(dry_run=True)["OMP_NUM_THREADS"] == "1", "recorders and benchmarks too, not only notebooks"


# ------------------------------------------------------------------------------------------ wheels
def test_wheel_list_is_the_cp312_closure_in_two_sections():
    from gpu_check.wheels import IMAGE_PACKAGES, canonical, sections

    pins, top = kit.wheel_list()
    names = {canonical(p.split("==")[0]) for p in pins}
    assert set(top) == {"papermill", "ipykernel", "ipywidgets", "mlflow-skinny"}
    assert set(top) <= names and len(names) == len(pins), "one pinned version of each package"
    assert {"nbclient", "jupyter-client", "pyzmq", "tornado"} <= names    # papermill's kernel stack
    assert {"aiohttp", "yarl", "multidict", "frozenlist", "aiosignal", "propcache"} <= names, \
        "papermill requires aiohttp on Python 3.12"
    assert "torch" not in names and "numpy" not in names                  # the GPU machine has these
    parts = sections()
    assert sorted(parts["not on image"] + parts["on image"]) == sorted(pins)
    assert all(canonical(p.split("==")[0]) in IMAGE_PACKAGES for p in parts["on image"])
    assert not any(canonical(p.split("==")[0]) in IMAGE_PACKAGES for p in parts["not on image"])


def test_wheel_list_rejects_unpinned_lines(tmp_path):
    path = tmp_path / "w.txt"
    path.write_text("# install: papermill\npapermill\n")
    with pytest.raises(ValueError, match="pinned"):
        kit.wheel_list(path)


def test_install_targets_a_folder_without_deps_or_compiling_and_keeps_the_images_packages(tmp_path, monkeypatch):
    from gpu_check import wheels

    pins, _ = wheels.wheel_list()
    for pin in pins:
        name, version = pin.split("==")
        (tmp_path / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"")
    monkeypatch.setattr(wheels.importlib.util, "find_spec", lambda name: None)     # papermill & co. missing
    monkeypatch.setattr(wheels, "installed", lambda name: wheels.canonical(name) == "aiohttp")   # the image's
    calls = []
    monkeypatch.setattr(wheels.subprocess, "run", lambda cmd, **kw: calls.append(cmd) or subprocess.CompletedProcess(
        cmd, 0))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    site = tmp_path / "site"
    assert wheels.install(tmp_path, site) == site
    (cmd,) = calls
    assert {"--no-deps", "--no-compile", "--no-index"} <= set(cmd) and cmd[cmd.index("--target") + 1] == str(site)
    files = {Path(c).name.split("-")[0] for c in cmd if c.endswith(".whl")}
    assert "papermill" in files and "aiohttp" not in files, "aiohttp is on the image: its own build stays"
    assert "attrs" in files, "a package the second section lists but the image lacks is installed from the wheels"
    parts = wheels.sections()
    assert len(files) == len(parts["not on image"]) + len(parts["on image"]) - 1
    assert os.environ["PYTHONPATH"].split(os.pathsep) == [str(site), "/elsewhere"] and sys.path[0] == str(site)


# ------------------------------------------------------------------------------------------ bundle
def _bundle_dir(tmp_path: Path) -> Path:
    bundle = tmp_path / "bundle"
    prov = {"hardware": "cuda:0 NVIDIA H200, torch 2.11.0", "software": "torch 2.11.0", "source": "kit",
            "date": "2026-12-01T00:00:00+00:00"}   # the shape utils.profiling.provenance returns (tested there)
    write_recorded(bundle / "results" / "day08" / "gpu.json", {"rows": [{"batch": 64}]}, prov)
    (bundle / "benchmarks" / "results").mkdir(parents=True)
    return bundle


def test_bundle_over_the_size_limit_fails_naming_the_largest_file(tmp_path):
    bundle = _bundle_dir(tmp_path)
    (bundle / "results" / "day22").mkdir()
    (bundle / "results" / "day22" / "trace.json.gz").write_bytes(bytes(range(256)) * 400)
    (bundle / "results" / "day22" / ".gpu.json.tmp").write_text("{half a fi")      # a write in progress
    assert kit.write_bundle(bundle, tmp_path / "ok.tar.gz") > 0
    with tarfile.open(tmp_path / "ok.tar.gz") as tar:
        assert not any(Path(n).name.startswith(".") for n in tar.getnames()), "writes in progress are left out"
    with pytest.raises(ValueError, match=r"over the .* limit; largest files: results/day22/trace.json.gz"):
        kit.write_bundle(bundle, tmp_path / "ok.tar.gz", limit_bytes=1000)
    assert (tmp_path / "ok.tar.gz").stat().st_size > 1000, "a refused bundle leaves the previous one in place"


def test_unpack_writes_only_results_with_provenance(tmp_path):
    bundle = _bundle_dir(tmp_path)
    kit.write_bundle(bundle, tmp_path / "b.tar.gz")
    repo = tmp_path / "repo"
    written = kit.unpack_bundle(tmp_path / "b.tar.gz", repo)
    assert written == [repo / "results" / "day08" / "gpu.json"]
    assert load_recorded_results("day08", root=repo / "results")[0]["rows"] == [{"batch": 64}]

    (bundle / "results" / "day08" / "gpu.json").write_text(json.dumps({"rows": []}))   # no provenance
    kit.write_bundle(bundle, tmp_path / "bad.tar.gz")
    with pytest.raises(ValueError, match="provenance"):
        kit.unpack_bundle(tmp_path / "bad.tar.gz", tmp_path / "repo2")
    assert not (tmp_path / "repo2").exists(), "nothing is written when one file is refused"

    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        tar.add(tmp_path / "b.tar.gz", arcname="results/../../outside.txt")
    with pytest.raises(ValueError, match="refusing"):
        kit.unpack_bundle(evil, repo)


def test_unpack_refuses_a_dry_run_recording(tmp_path):
    # A dry run writes benchmarks/results/loop_overhead_cpu.json at toy sizes: the name of a committed CPU result.
    bundle = _bundle_dir(tmp_path)
    write_recorded(bundle / "benchmarks" / "results" / "loop_overhead_cpu.json", {"rows": []},
                   {"hardware": "cpu (2 threads)", "software": "torch 2.14.1", "date": "2026-12-05T00:00:00+00:00",
                    "source": "python benchmarks/loop_overhead.py --device cpu --out x --smoke"})
    kit.write_bundle(bundle, tmp_path / "dry.tar.gz")
    with pytest.raises(ValueError, match="dry-run"):
        kit.unpack_bundle(tmp_path / "dry.tar.gz", tmp_path / "repo")
    assert not (tmp_path / "repo").exists(), "nothing is written when a toy recording is refused"
    assert len(kit.unpack_bundle(tmp_path / "dry.tar.gz", tmp_path / "repo", allow_toy=True)) == 2


def test_a_worker_that_dies_before_its_first_recorder_fails_the_rest_at_once(tmp_path, monkeypatch):
    # A CUDA initialisation failure or an import error kills every fresh worker the same way: starting another one
    # until the deadline would spend the recorders' whole budget and report "not run" instead of the error.
    (tmp_path / "logs").mkdir()
    real_popen, started = subprocess.Popen, []

    def dying(cmd, *args, **kwargs):
        started.append(cmd)
        return real_popen([sys.executable, "-c", "import sys; print('CUDA init failed'); sys.exit(3)"],
                          *args, **kwargs)

    monkeypatch.setattr(kit.subprocess, "Popen", dying)
    t0 = time.monotonic()
    results = kit.run_recorders(["day11", "day09"], tmp_path / "bundle", "cuda", False, time.monotonic() + 60,
                                tmp_path, dict(os.environ))
    assert len(started) == 1 and time.monotonic() - t0 < 30, f"{len(started)} workers started"
    assert {r["status"] for r in results.values()} == {"fail"} and set(results) == {"day11", "day09"}
    assert "code 3" in results["day11"]["error"] and "CUDA init failed" in results["day11"]["error"]


# ------------------------------------------------------------------------------------------ Part A
def test_part_a_reports_the_failing_cell_and_a_markdown_table(tmp_path):
    from gpu_check.notebooks import first_error, markdown_table

    nb = {"cells": [{"cell_type": "code", "outputs": []},
                    {"cell_type": "code", "outputs": [{"output_type": "error", "ename": "OutOfMemoryError",
                                                       "evalue": "CUDA out of memory"}]}]}
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps(nb))
    assert first_error(path) == "cell 1: OutOfMemoryError: CUDA out of memory"
    table = markdown_table([{"notebook": "a", "status": "pass", "seconds": 1.0, "error": None},
                            {"notebook": "b", "status": "fail", "seconds": 2.0, "error": "cell 1: x | y"}], "Part A")
    lines = table.splitlines()
    assert "1 of 2 notebooks passed." in lines and lines[6].startswith("| b | fail |") and "x \\| y" in lines[6]


def test_notebooks_start_exclusive_first_then_longest_first():
    from gpu_check.notebooks import carried_seconds, running_order

    nbs = [Path(f"solutions/day{d:02d}/x.ipynb") for d in (1, 9, 18, 20, 30)]
    seconds = {"solutions/day18/x.ipynb": 80.0, "solutions/day20/x.ipynb": 60.0, "solutions/day01/x.ipynb": 10.0,
               "solutions/day30/x.ipynb": 20.0}
    order = [p.parent.name for p in running_order(nbs, seconds)]
    assert order == ["day09", "day18", "day20", "day30", "day01"]
    carried = carried_seconds()
    assert len(carried) >= 30, "the longest-first order travels with the kit (tools/gpu_check/notebook_seconds.json)"
    assert all(k.startswith("solutions/day") and (ROOT / k).exists() for k in carried)


FAKE_PAPERMILL = textwrap.dedent('''
    """A stand-in for `python -m papermill IN OUT ...`: logs its run, starts a 'kernel' in a session of its own
    (as jupyter_client does) that starts a worker, and sleeps for the seconds in the notebook's name."""
    import os, subprocess, sys, time
    src, log = sys.argv[1], os.environ["FAKE_LOG"]
    with open(log, "a") as f:
        f.write(f"start {os.path.basename(os.path.dirname(src))} {time.time()}\\n")
    if "hang" in src:
        kernel = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                                   "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
                                   "open(sys.argv[1], 'w').write(str(w.pid)); time.sleep(60)",
                                   os.environ["FAKE_PIDS"]], start_new_session=True)
        while not os.path.exists(os.environ["FAKE_PIDS"]):
            time.sleep(0.05)
        with open(os.environ["FAKE_PIDS"] + ".kernel", "w") as f:
            f.write(str(kernel.pid))
        time.sleep(60)
    time.sleep(float(os.path.basename(src).split("_")[0]))
    with open(log, "a") as f:
        f.write(f"end {os.path.basename(os.path.dirname(src))} {time.time()}\\n")
''')


@contextmanager
def fake_papermill(tmp_path: Path, monkeypatch):
    (tmp_path / "fake" / "papermill").mkdir(parents=True)
    (tmp_path / "fake" / "papermill" / "__main__.py").write_text(FAKE_PAPERMILL)
    (tmp_path / "fake" / "papermill" / "__init__.py").write_text("")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "fake"), FAKE_LOG=str(tmp_path / "log"),
               FAKE_PIDS=str(tmp_path / "pids"))
    yield env


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_a_notebook_over_its_limit_is_killed_with_its_kernel_and_workers(tmp_path, monkeypatch):
    from gpu_check.notebooks import run_notebooks

    repo = tmp_path / "repo"
    (repo / "solutions" / "day05").mkdir(parents=True)
    (repo / "solutions" / "day05" / "0_hang.ipynb").write_text("{}")
    with fake_papermill(tmp_path, monkeypatch) as env:
        start = time.monotonic()
        (row,) = run_notebooks([Path("solutions/day05/0_hang.ipynb")], repo, tmp_path / "work", "cpu", 1, 30, env,
                               log=lambda *a: None, limit_s=3, seconds={})
    assert row["status"] == "timeout" and time.monotonic() - start < 15
    worker, kernel = int((tmp_path / "pids").read_text()), int((tmp_path / "pids.kernel").read_text())
    time.sleep(0.5)
    assert not _alive(kernel), "the kernel (a session of its own) was killed too"
    assert not _alive(worker), "and the processes the kernel started"


@pytest.mark.slow
def test_day09_runs_alone_and_the_others_share_the_slots(tmp_path, monkeypatch):
    from gpu_check.notebooks import run_notebooks

    repo = tmp_path / "repo"
    names = {"day09": "1.5_a.ipynb", "day05": "1_a.ipynb", "day06": "1_a.ipynb", "day07": "1_a.ipynb"}
    for day, name in names.items():
        (repo / "solutions" / day).mkdir(parents=True)
        (repo / "solutions" / day / name).write_text("{}")
    with fake_papermill(tmp_path, monkeypatch) as env:
        rows = run_notebooks([Path("solutions") / d / n for d, n in names.items()], repo, tmp_path / "work", "cpu",
                             2, 60, env, log=lambda *a: None, seconds={})
    assert all(r["status"] == "pass" for r in rows), rows
    spans = {}
    for line in (tmp_path / "log").read_text().splitlines():
        kind, day, t = line.split()
        spans.setdefault(day, {})[kind] = float(t)
    d9 = spans.pop("day09")
    assert all(s["start"] >= d9["end"] - 0.05 for s in spans.values()), "nothing ran beside day09"
    overlaps = sum(1 for a in spans.values() for b in spans.values() if a is not b and a["start"] < b["end"]
                   and b["start"] < a["end"])
    assert overlaps >= 2, "the others ran two at a time"


# ------------------------------------------------------------------------------------------ recorders
def test_gpu_slug_names_the_gpu_model(monkeypatch):
    import torch

    from gpu_check.recorders import gpu_slug

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    assert gpu_slug(torch.device("cuda", 0)) == "nvidia_h200"
    assert gpu_slug(torch.device("cpu")) == "cpu"


def test_a_recorder_whose_budget_does_not_fit_is_not_started(tmp_path):
    status = tmp_path / "status.jsonl"
    status.write_text("")
    kit.worker_recorders(["day27"], tmp_path / "bundle", status, "cpu", tiny=False, deadline=time.time() + 1)
    (event,) = [json.loads(line) for line in status.read_text().splitlines()]
    assert (event["day"], event["status"]) == ("day27", "not run") and "did not fit" in event["error"]
    assert not (tmp_path / "bundle").exists()


def test_partial_payloads_are_written_as_a_recorder_goes_and_skips_leave_nothing(tmp_path, monkeypatch):
    from gpu_check import recorders as R

    def halfway(ctx):
        ctx.save({"summary": ["first row"], "rows": [{"x": 1}]})
        raise RuntimeError("stopped halfway")

    def nothing_here(ctx):
        raise R.Skip("no CUDA provider")

    monkeypatch.setitem(R.RECORDERS, "day98", R.Recorder("day98", 5, "fake", halfway))
    monkeypatch.setitem(R.RECORDERS, "day99", R.Recorder("day99", 5, "fake", nothing_here))
    status = tmp_path / "status.jsonl"
    status.write_text("")
    kit.worker_recorders(["day98", "day99"], tmp_path / "bundle", status, "cpu", tiny=True)
    events = [json.loads(line) for line in status.read_text().splitlines()]
    assert [(e["event"], e["day"]) for e in events] == [("start", "day98"), ("saved", "day98"), ("done", "day98"),
                                                        ("start", "day99"), ("done", "day99")]
    assert events[2]["status"] == "fail" and events[4]["status"] == "skipped"
    (kept,) = load_recorded_results("day98", root=tmp_path / "bundle" / "results")
    assert kept["partial"] is True and kept["rows"] == [{"x": 1}] and kept["summary"] == ["first row"]
    assert not (tmp_path / "bundle" / "results" / "day99").exists() or not list(
        (tmp_path / "bundle" / "results" / "day99").glob("*.json"))


@pytest.mark.parametrize("day", ["day14", "day25", "day32"])
def test_a_recorder_cut_short_before_its_first_run_reports_no_rows(day, tmp_path, monkeypatch):
    import torch

    from gpu_check import full_scale_recorders as F
    from gpu_check.recorders import NOTHING_MEASURED, RECORDERS, Context

    @contextmanager
    def no_data(ctx, size, train_per_class):
        yield None, "no data"

    monkeypatch.setattr(F, "imagenette_data", no_data)
    ctx = Context(torch.device("cpu"), False, tmp_path, "cpu", budget_s=0.0)
    payload = RECORDERS[day].fn(ctx)
    assert payload["rows"] == [] and NOTHING_MEASURED in payload["summary"]
    assert "not run (time budget spent)" in payload["summary"][-1] or any(
        "not run" in line for line in payload["summary"])
    json.dumps(payload)


def test_cudnn_plan_reuse_is_tracked_across_recorders_with_pytorchs_default_tf32(monkeypatch):
    import torch

    from gpu_check import full_scale_recorders as F

    cpu = torch.device("cpu")
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)      # PyTorch's default
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)

    def label(technique, **knobs):
        return F.conv_plans_label("resnet50", 224, 64, technique, cpu, **knobs)

    # Day 25 alone: 'fast' (TF32 on) has the key of bf16+channels_last (TF32 unset, so allowed), which ran first.
    monkeypatch.setattr(F, "_CONV_PLANS", {})
    assert label("bf16") == "-" and label("bf16", channels_last=True) == "-"
    assert label("bf16", cudnn_benchmark=True) == "reused heuristic plans"
    assert label("fast") == "reused heuristic plans"
    # The whole kit: Day 14's 'fast' autotunes first, so Day 25's flag-off channels_last run reuses its plans.
    monkeypatch.setattr(F, "_CONV_PLANS", {})
    assert label("fast") == "-"
    assert label("bf16", channels_last=True) == "reused autotuned plans"
    assert label("bf16") == "-"                                        # NCHW: other convolutions
    assert label("accumulation") == "-" and label("baseline") == "-"   # other micro-batch; fp32: other dtype
    assert F.conv_plans_label("resnet50", 224, 64, "bf16", cpu, channels_last=True, tf32=False) == "-"


def test_input_lines_say_which_runs_the_loader_limited():
    from gpu_check.full_scale_recorders import _input_lines, _relative

    rows = [{"run": "a", "images_per_s": 100.0, "data_wait_share": 0.0, "loader_images_per_s": 900.0,
             "input_bound": False, "peak_memory_gib": None},
            {"run": "b", "images_per_s": 300.0, "data_wait_share": 0.3, "loader_images_per_s": 320.0,
             "input_bound": True, "peak_memory_gib": None}]
    _relative(rows)
    assert rows[1]["speedup_vs_baseline"] == 3.0
    (line,) = _input_lines(rows)
    assert line.startswith("input-bound") and "b (30% waiting" in line and "a (" not in line
    assert _input_lines(rows[:1]) == ["no run was input-bound: each input path alone delivered at least 9.0x the "
                                      "images/s trained"]
    assert _input_lines([]) == [] and _relative([]) is None


def test_windowed_timing_runs_the_calls_back_to_back():
    import torch

    from gpu_check.full_scale_recorders import windowed_s

    calls = []
    per_call = windowed_s(lambda: calls.append(time.perf_counter()), torch.device("cpu"), calls=100, rounds=3,
                          warmup=5)
    assert len(calls) == 5 + 3 * 100 and 0 < per_call < 1e-3


@pytest.mark.slow
def test_day11_reads_the_training_peak_before_the_extra_forward(tmp_path, monkeypatch):
    import torch

    from gpu_check import recorders as R

    order = []
    real_saved = R.saved_activation_bytes
    monkeypatch.setattr(R, "_peak", lambda device: order.append("peak") or 0)
    monkeypatch.setattr(R, "saved_activation_bytes", lambda *a, **k: order.append("forward") or real_saved(*a, **k))
    R.record_day11(R.Context(torch.device("cpu"), True, tmp_path, "cpu", budget_s=15))
    assert order == ["peak", "forward"] * 3


# ------------------------------------------------------------------------------------------ dry run
@pytest.mark.slow
def test_dry_run_writes_a_bundle_every_loader_accepts(tmp_path):
    before = {p: p.read_bytes() for p in (ROOT / "solutions").glob("day03/*.ipynb")}
    bundle = tmp_path / "bundle.tar.gz"
    proc = subprocess.run([sys.executable, str(KIT), "--dry-run", "--work", str(tmp_path / "work"), "--bundle",
                           str(bundle)], cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "All required parts passed." in proc.stdout
    repo = tmp_path / "repo"
    with pytest.raises(ValueError, match="dry-run"):   # toy sizes, and names of committed CPU results
        kit.unpack_bundle(bundle, repo)
    assert not repo.exists(), "a refused dry-run bundle writes nothing"
    written = {str(p.relative_to(repo)) for p in kit.unpack_bundle(bundle, repo, allow_toy=True)}
    from gpu_check.recorders import RECORDERS

    expected = {f"results/{day}/cpu.json" for day in RECORDERS} | {
        "results/gpu_check/part_a.json", "results/gpu_check/part_a.md", "results/gpu_check/kit.json",
        "results/day22/cpu_trace.json.gz", "benchmarks/results/gpu_reference_cpu.json",
        "benchmarks/results/loop_overhead_cpu.json", "benchmarks/results/input_path_cpu.json"}
    assert expected <= written, expected - written
    for day in RECORDERS:
        (rec,) = load_recorded_results(day, root=repo / "results")
        assert rec["hardware"].startswith("cpu") and rec["source"].endswith(f"--only {day} --dry-run")
        assert rec["summary"] and rec["tiny"] is True and rec["partial"] is False
    from utils.profiling import recorded_report

    for day in ("day24", "day25", "day30", "day32"):     # what the days' fallbacks print: the real recorders' rows
        report = recorded_report(day, repo / "results")
        assert report.startswith("Recorded (not measured in this run) on cpu") and len(report.splitlines()) > 4
    (day14,) = load_recorded_results("day14", root=repo / "results")
    assert {r["input_path"] for r in day14["rows"]} == {"cached", "dataloader"}
    assert all(r["loader_images_per_s"] > 0 and isinstance(r["input_bound"], bool) for r in day14["rows"])
    (day32,) = load_recorded_results("day32", root=repo / "results")
    assert day32["accuracy"] is None and "no accuracy" in day32["accuracy_note"]
    assert not any("accuracy" in row for row in day32["rows"])
    ref = load_recorded_file(repo / "benchmarks" / "results" / "gpu_reference_cpu.json")
    assert [r["mode"] for r in ref["rows"]] == ["channels_last_bf16", "bf16", "tf32", "fp32"], "extra rows appended"
    part_a = load_recorded_file(repo / "results" / "gpu_check" / "part_a.json")
    assert [(r["notebook"], r["status"]) for r in part_a["rows"]] == [
        ("solutions/day03/day03_devices_and_timing.ipynb", "pass")]
    kit_rows = {r["part"]: r["status"] for r in load_recorded_file(repo / "results/gpu_check/kit.json")["rows"]}
    assert set(kit_rows.values()) == {"pass"} and list(kit_rows) == list(kit.all_parts())
    assert before == {p: p.read_bytes() for p in before}, "the dry run wrote into the repository's notebooks"

    # A fresh machine resumes from the bundle: nothing failed, so nothing runs, and every recording is kept.
    again = tmp_path / "again.tar.gz"
    proc = subprocess.run([sys.executable, str(KIT), "--dry-run", "--resume", str(bundle), "--only", "failed",
                           "--work", str(tmp_path / "work2"), "--bundle", str(again)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with tarfile.open(again) as tar:
        assert expected <= set(tar.getnames())


# ------------------------------------------------------------------------------------------ the days' fallbacks
_PROV = {"hardware": "cuda:0 NVIDIA H200, torch 2.11.0", "software": "torch 2.11.0", "date": "2026-12-01T00:00:00+00:00",
         "source": "python tools/gpu_check.py --only dayNN"}
# A fake recording of each day, shaped like its recorder's payload; 4321.0 marks the recorded numbers.
_FAKE = {
    "day24": {"rows": [{"step": "resnet50 224 px batch 64, SGD", "mode": "default", "first_call_s": 4321.0,
                        "eager_step_ms": 90.0, "compiled_step_ms": 70.0, "speedup": 1.29, "break_even_steps": 4}]},
    "day25": {"rows": [{"run": "bf16+channels_last", "images_per_s": 4321.0, "data_wait_share": 0.01,
                        "peak_memory_gib": 9.0, "technique": "bf16", "knobs": "channels_last=True",
                        "input_path": "cached", "loader_images_per_s": 20000.0, "input_bound": False}]},
    "day30": {"rows": [{"runtime": "onnxruntime CUDAExecutionProvider", "batch": 64, "device": "cuda",
                        "eager_ms": 4321.0, "onnxruntime_ms": 20.0, "speedup": 1.1}]},
    "day32": {"rows": [{"run": "bf16 autocast", "images_per_s": 4321.0, "data_wait_share": 0.2,
                        "peak_memory_gib": 30.0, "micro_batch": 128, "batch": 256}],
              "accuracy": None, "accuracy_note": "no accuracy is recorded: generated JPEGs"},
}


def _notebook_source(day: str) -> str:
    (path,) = (ROOT / "solutions" / day).glob("*.ipynb")
    return "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")


@pytest.mark.parametrize("day", sorted(_FAKE))
def test_each_days_fallback_shows_its_own_recording(day, tmp_path, capsys):
    from utils.full_scale_section import full_scale_section
    from utils.profiling import recorded_report

    write_recorded(tmp_path / day / "nvidia_h200.json", {"day": day, "what": "fake", "summary": ["fake line"],
                                                         **_FAKE[day]}, {**_PROV, "source": f"--only {day}"})
    source = _notebook_source(day)
    if day in ("day24", "day25"):      # their full-size sections: recorded_report(day) when they cannot measure
        assert f'day="{day}"' in source and "full_scale_section(" in source
        full_scale_section(["bf16"], day=day, smoke=True, results_root=str(tmp_path))
        shown = capsys.readouterr().out
    elif day == "day30":               # the latency cell shows every recorded row (the TensorRT cell: see below)
        assert 'recorded_report("day30")' in source
        shown = recorded_report(day, tmp_path)
    else:                              # the capstone's run cell, when it did not train the full-size configuration
        assert 'recorded_report("day32")' in source
        shown = recorded_report(day, tmp_path)
        (header,) = [line for line in shown.splitlines() if "images_per_s" in line]
        assert "accuracy" not in header, "the capstone's recording shows no accuracy column"
    assert "Recorded (not measured in this run) on cuda:0 NVIDIA H200" in shown and "4321" in shown, shown


def test_day30_tensorrt_cell_off_gpu_shows_only_the_tensorrt_provider_rows(tmp_path, capsys):
    import copy

    from utils.profiling import load_recorded_results

    (path,) = (ROOT / "solutions" / "day30").glob("*.ipynb")
    (cell,) = [c for c in json.loads(path.read_text())["cells"] if c.get("id") == "day30-code-022"]
    fallback = textwrap.dedent("".join(cell["source"]).split("\nelse:\n", 1)[1])
    cuda_row = copy.deepcopy(_FAKE["day30"]["rows"][0])
    trt_row = {**cuda_row, "runtime": "onnxruntime TensorrtExecutionProvider (fp32 weights)", "eager_ms": 8765.0}

    def show(rows):
        write_recorded(tmp_path / "day30" / "nvidia_h200.json", {"day": "day30", "summary": [], "rows": rows}, _PROV)
        exec(fallback, {"load_recorded_results": lambda day: load_recorded_results(day, tmp_path),
                        "results_dir": lambda day: tmp_path / day})
        return capsys.readouterr().out

    shown = show([cuda_row, trt_row])
    assert "8765" in shown and "4321" not in shown and "not Torch-TensorRT" in shown, shown
    assert "No recorded TensorRT results" in show([cuda_row])

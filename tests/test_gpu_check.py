"""The GPU check kit (tools/gpu_check.py): its CPU dry run end to end (slow), and the pieces that decide what a
maintainer gets on the GPU machine: the wheel list, part selection, the bundle's size limit and its safe unpacking."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tarfile
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


def test_wheel_list_is_pinned_and_installs_what_the_notebooks_import():
    pins, top = kit.wheel_list()
    names = {p.split("==")[0] for p in pins}
    assert set(top) == {"papermill", "ipykernel", "ipywidgets", "mlflow-skinny"}
    assert set(top) <= names and len(names) == len(pins), "one pinned version of each package"
    assert {"nbclient", "jupyter-client", "pyzmq", "tornado"} <= names    # papermill's kernel stack
    assert "torch" not in names and "numpy" not in names                  # the GPU machine has these


def test_wheel_list_rejects_unpinned_lines(tmp_path):
    path = tmp_path / "w.txt"
    path.write_text("# install: papermill\npapermill\n")
    with pytest.raises(ValueError, match="pinned"):
        kit.wheel_list(path)


def test_select_parts_runs_all_or_only_the_named_or_failed_ones():
    every = kit.select_parts(None, {})
    assert every[0] == "notebooks" and every[-2:] == ["gpu_reference", "loop_overhead"]
    assert {"day02", "day03", "day08", "day09", "day11", "day13", "day22", "day24", "day27"} <= set(every)
    assert kit.select_parts("loop_overhead,day09", {}) == ["day09", "loop_overhead"]   # running order kept
    previous = {"day09": {"status": "timeout"}, "day11": {"status": "pass"}, "notebooks": {"status": "fail"}}
    assert kit.select_parts("failed", previous) == ["notebooks", "day09"]
    with pytest.raises(SystemExit, match="unknown part 'day99'"):
        kit.select_parts("day99", {})


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
    assert kit.write_bundle(bundle, tmp_path / "ok.tar.gz") > 0
    with pytest.raises(ValueError, match=r"over the .* limit; largest files: results/day22/trace.json.gz"):
        kit.write_bundle(bundle, tmp_path / "big.tar.gz", limit_bytes=1000)


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


@pytest.mark.slow
def test_dry_run_writes_a_bundle_every_loader_accepts(tmp_path):
    before = {p: p.read_bytes() for p in (ROOT / "solutions").glob("day03/*.ipynb")}
    bundle = tmp_path / "bundle.tar.gz"
    proc = subprocess.run([sys.executable, str(KIT), "--dry-run", "--work", str(tmp_path / "work"), "--bundle",
                           str(bundle)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "All parts passed." in proc.stdout
    repo = tmp_path / "repo"
    written = {str(p.relative_to(repo)) for p in kit.unpack_bundle(bundle, repo)}
    from gpu_check.recorders import RECORDERS

    expected = {f"results/{day}/cpu.json" for day in RECORDERS} | {
        "results/gpu_check/part_a.json", "results/gpu_check/part_a.md", "results/gpu_check/kit.json",
        "results/day22/cpu_trace.json.gz", "benchmarks/results/gpu_reference_cpu.json",
        "benchmarks/results/loop_overhead_cpu.json"}
    assert expected <= written, expected - written
    for day in RECORDERS:
        (rec,) = load_recorded_results(day, root=repo / "results")
        assert rec["hardware"].startswith("cpu") and rec["source"].endswith(f"--only {day} --dry-run")
        assert rec["summary"] and rec["tiny"] is True
    part_a = load_recorded_file(repo / "results" / "gpu_check" / "part_a.json")
    assert [(r["notebook"], r["status"]) for r in part_a["rows"]] == [
        ("solutions/day03/day03_devices_and_timing.ipynb", "pass")]
    kit_rows = {r["part"]: r["status"] for r in load_recorded_file(repo / "results/gpu_check/kit.json")["rows"]}
    assert set(kit_rows.values()) == {"pass"} and len(kit_rows) == len(RECORDERS) + 3
    assert before == {p: p.read_bytes() for p in before}, "the dry run wrote into the repository's notebooks"

    # A fresh machine resumes from the bundle: nothing failed, so nothing runs, and every recording is kept.
    again = tmp_path / "again.tar.gz"
    proc = subprocess.run([sys.executable, str(KIT), "--dry-run", "--resume", str(bundle), "--only", "failed",
                           "--work", str(tmp_path / "work2"), "--bundle", str(again)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with tarfile.open(again) as tar:
        assert expected <= set(tar.getnames())


def test_gpu_slug_names_the_gpu_model(monkeypatch):
    import torch

    from gpu_check.recorders import gpu_slug

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    assert gpu_slug(torch.device("cuda", 0)) == "nvidia_h200"
    assert gpu_slug(torch.device("cpu")) == "cpu"


def test_loop_overhead_runs_resnet50_bf16_only_where_its_cli_offers_it(monkeypatch):
    class Help:
        def __init__(self, text):
            self.stdout = text

    monkeypatch.setattr(kit.subprocess, "run", lambda *a, **k: Help("--device --smoke --repeats --out"))
    args, note = kit.loop_overhead_args("cuda", tiny=False)
    assert args == [] and "no --model/--image-size/--amp" in note
    monkeypatch.setattr(kit.subprocess, "run", lambda *a, **k: Help("--model --image-size --amp --out"))
    assert kit.loop_overhead_args("cuda", tiny=False) == (
        ["--model", "resnet50", "--image-size", "224", "--amp", "bf16"], None)
    assert kit.loop_overhead_args("cpu", tiny=True) == (["--smoke"], None)

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
    from utils.profiling import recorded_report

    for day in ("day24", "day25", "day30", "day32"):     # what the days' fallbacks print: the real recorders' rows
        report = recorded_report(day, repo / "results")
        assert report.startswith("Recorded (not measured in this run) on cpu") and len(report.splitlines()) > 4
    (day32,) = load_recorded_results("day32", root=repo / "results")
    assert day32["accuracy"] is None and "no accuracy" in day32["accuracy_note"]
    assert not any("accuracy" in row for row in day32["rows"])
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


def test_parts_run_most_valuable_first_and_the_docs_state_every_budget():
    parts = kit.all_parts()
    assert list(parts)[:3] == ["notebooks", "day14", "day24"]
    assert {"day25", "day30", "day32"} <= set(parts)
    doc = " ".join(kit.__doc__.split())
    assert f"{sum(parts.values()):.0f} s in all" in doc
    for name, budget in parts.items():
        if name != "notebooks":
            assert f"{name} {budget:.0f}" in doc, f"the kit's docstring does not state {name}'s budget {budget:.0f} s"
    readme = " ".join((ROOT / "results" / "README.md").read_text().split())
    assert f"add up to {sum(parts.values()):.0f} s" in readme
    assert sum(parts.values()) <= 2 * kit.TOTAL_BUDGET_S, "the docs promise two device calls"


def test_a_recorder_whose_budget_does_not_fit_is_not_started(tmp_path):
    import time

    status = tmp_path / "status.jsonl"
    status.write_text("")
    kit.worker_recorders(["day27"], tmp_path / "bundle", status, "cpu", tiny=False, deadline=time.time() + 1)
    (event,) = [json.loads(line) for line in status.read_text().splitlines()]
    assert (event["day"], event["status"]) == ("day27", "not run") and "did not fit" in event["error"]
    assert not (tmp_path / "bundle").exists()


_PROV = {"hardware": "cuda:0 NVIDIA H200, torch 2.11.0", "software": "torch 2.11.0", "date": "2026-12-01T00:00:00+00:00",
         "source": "python tools/gpu_check.py --only dayNN"}
# A fake recording of each day, shaped like its recorder's payload; 4321.0 marks the recorded numbers.
_FAKE = {
    "day24": {"rows": [{"step": "resnet50 224 px batch 64, SGD", "mode": "default", "first_call_s": 4321.0,
                        "eager_step_ms": 90.0, "compiled_step_ms": 70.0, "speedup": 1.29, "break_even_steps": 4}]},
    "day25": {"rows": [{"run": "bf16+channels_last", "images_per_s": 4321.0, "data_wait_share": 0.01,
                        "peak_memory_gib": 9.0, "technique": "bf16", "knobs": "channels_last=True"}]},
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
    elif day == "day30":               # the TensorRT cell's fallback prints every recorded row
        assert 'load_recorded_results("day30")' in source and 'rec.get("rows", [])' in source
        shown = recorded_report(day, tmp_path)
    else:                              # the capstone's run cell, when it did not train the full-size configuration
        assert 'recorded_report("day32")' in source
        shown = recorded_report(day, tmp_path)
        (header,) = [line for line in shown.splitlines() if "images_per_s" in line]
        assert "accuracy" not in header, "the capstone's recording shows no accuracy column"
    assert "Recorded (not measured in this run) on cuda:0 NVIDIA H200" in shown and "4321" in shown, shown

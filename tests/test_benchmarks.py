"""Each benchmark script runs in smoke mode and prints its figure (no timing assertions: figures are recorded)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT

BENCH = ROOT / "benchmarks"


def run_script(name: str, *args: str, timeout: int = 600) -> str:
    result = subprocess.run([sys.executable, str(BENCH / name), *args], cwd=ROOT, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result.stdout


def test_loop_overhead_smoke(tmp_path):
    out = run_script("loop_overhead.py", "--smoke", "--out", str(tmp_path))
    assert "ratio course/bare" in out
    data = json.loads((tmp_path / "loop_overhead_cpu.json").read_text())
    res = data["results"][0]
    assert res["ratio_course_over_bare"] > 0 and data["provenance"]["torch"]
    assert res["host_syncs_per_epoch"]["bare"] == 0
    assert res["sync_target_met"], res["host_syncs_per_epoch"]


def test_dataloader_scaling_smoke(tmp_path):
    out = run_script("dataloader_scaling.py", "--smoke", "--out", str(tmp_path))
    assert "of the ceiling" in out
    rows = json.loads((tmp_path / "dataloader_scaling.json").read_text())["rows"]
    assert {r["num_workers"] for r in rows} == {0, 2}
    assert all(r["images_per_s"] > 0 and r["ceiling_images_per_s"] > 0 for r in rows)


@pytest.mark.notebooks
def test_gpu_reference_smoke_runs_every_mode(tmp_path):
    out = run_script("gpu_reference.py", "--smoke", "--out", str(tmp_path))
    rows = json.loads(next(tmp_path.glob("gpu_reference_*.json")).read_text())["rows"]
    assert [r["mode"] for r in rows] == ["fp32", "tf32", "bf16", "fp16", "channels_last_bf16", "compile_bf16"]
    measured = [r for r in rows if "skipped" not in r]
    assert all(r["images_per_s"] > 0 and r["flops_per_step"] > 0 for r in measured)
    assert "img/s" in out


def test_suite_time_summary(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"kind": "papermill", "name": f"nb{i}", "seconds": float(i)} for i in range(12)]))
    out = run_script("suite_time.py", str(path))
    assert "total 66.0 s over 12" in out and "slowest 10" in out
    assert out.index("nb11") < out.index("nb2")


def test_flop_count_of_resnet50_matches_the_known_figure():
    sys.path.insert(0, str(BENCH))
    import torch
    from gpu_reference import train_step_flops
    from utils.models import resnet50

    model = resnet50(1000)
    flops = train_step_flops(model, torch.randn(1, 3, 224, 224), torch.tensor([0]))
    # ~4.1 GMACs forward = ~8.2 GFLOPs; backward ~2x forward: ~24.6 GFLOPs per image per training step
    assert 23e9 < flops < 26e9

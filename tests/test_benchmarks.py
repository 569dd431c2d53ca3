"""Each benchmark script runs in smoke mode and writes the figures and counts it claims (no timing assertions: the
figures are recorded in benchmarks/results). Script runs are subprocesses, hence `slow`."""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))


def run_script(name: str, *args: str, timeout: int = 600) -> str:
    result = subprocess.run([sys.executable, str(BENCH / name), *args], cwd=ROOT, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result.stdout


@pytest.mark.slow
def test_loop_overhead_smoke_records_ratio_and_host_syncs(tmp_path):
    out = run_script("loop_overhead.py", "--smoke", "--out", str(tmp_path))
    assert "ratio course/bare" in out
    data = json.loads((tmp_path / "loop_overhead_cpu.json").read_text())
    assert data["versions"]["torch"] and data["benchmark"] == "loop_overhead"
    res = data["results"][0]
    times, med = res["step_times_s"], res["median_step_s"]
    for kind in ("course", "bare", "bare_control"):
        assert len(times[kind]) == res["repeats"] and med[kind] == pytest.approx(statistics.median(times[kind]))
    assert res["ratio_course_over_bare"] == pytest.approx(med["course"] / med["bare"])
    assert res["noise_floor_bare_control_over_bare"] == pytest.approx(med["bare_control"] / med["bare"])
    syncs, intervals = res["host_syncs_per_epoch"], res["log_intervals_per_epoch"]
    assert intervals == res["steps"] // res["log_every"]
    assert syncs["bare"] == 0, "the bare loop reads nothing from the device"
    # the timed course loop runs without a progress bar: it reads the device only at the end of the epoch (loss and
    # accuracy); 0 would mean the counter missed the course loop's reads
    assert 1 <= syncs["course"] <= intervals + 2, syncs
    assert res["sync_target_met"] is (syncs["course"] <= intervals + 2)


def test_course_loop_syncs_once_per_log_interval_plus_two_at_the_end():
    """The benchmark's sync counter on the course loop with its progress bar on, counting reads from every utils
    module (a per-step read in any helper the loop calls would show up here)."""
    import torch
    from loop_overhead import count_host_syncs
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    import utils
    from utils.training import train_one_epoch

    torch.manual_seed(0)
    steps, log_every, batch = 7, 3, 4
    loader = DataLoader(TensorDataset(torch.randn(steps * batch, 5), torch.randint(0, 3, (steps * batch,))),
                        batch_size=batch)
    model = nn.Linear(5, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    utils_files = tuple(str(p) for p in Path(utils.__file__).parent.glob("*.py"))
    with count_host_syncs(utils_files) as counted:
        train_one_epoch(model, loader, optimizer, "cpu", loss_fn=nn.CrossEntropyLoss(), log_every=log_every,
                        progress=True)
    assert counted["n"] == steps // log_every + 2
    with count_host_syncs(utils_files) as counted:
        train_one_epoch(model, loader, optimizer, "cpu", loss_fn=nn.CrossEntropyLoss(), log_every=log_every,
                        progress=False)
    assert counted["n"] == 2, "without a progress bar only the end-of-epoch loss and accuracy are read"


@pytest.mark.slow
def test_dataloader_scaling_smoke(tmp_path):
    out = run_script("dataloader_scaling.py", "--smoke", "--out", str(tmp_path))
    assert "of the ceiling" in out
    data = json.loads((tmp_path / "dataloader_scaling.json").read_text())
    rows, per_core = data["rows"], data["bare_decode_images_per_s_per_core"]
    assert {r["num_workers"] for r in rows} == {0, 2}
    for r in rows:
        cores = 1 if r["num_workers"] == 0 else min(r["num_workers"], data["physical_cores"])
        assert r["ceiling_images_per_s"] == pytest.approx(per_core * cores)
        assert r["images_per_s"] > 0 and r["fraction_of_ceiling"] == pytest.approx(r["images_per_s"] / r[
            "ceiling_images_per_s"])


def test_dataloader_benchmark_decodes_like_day10(tmp_path):
    """The benchmark's dataset is Day 10's: utils.image_files PNGs decoded by Pillow, scaled to [0, 1]."""
    import torch
    from dataloader_scaling import png_dataset

    from utils.image_files import decode_png

    ds = png_dataset(tmp_path, count=3, size=24)
    image, label = ds[1]
    assert len(ds) == 3 and image.shape == (3, 24, 24) and image.dtype == torch.float32
    assert torch.allclose(image, decode_png(ds.samples[1][0]).float() / 255) and label == ds.samples[1][1]


@pytest.mark.slow
def test_gpu_reference_smoke_runs_every_mode(tmp_path):
    out = run_script("gpu_reference.py", "--smoke", "--out", str(tmp_path))
    rows = json.loads(next(tmp_path.glob("gpu_reference_*.json")).read_text())["rows"]
    assert [r["mode"] for r in rows] == ["fp32", "tf32", "bf16", "fp16", "channels_last_bf16", "compile_bf16"]
    measured = [r for r in rows if "skipped" not in r]
    assert all(r["images_per_s"] > 0 and r["flops_per_step"] > 0 for r in measured)
    assert "img/s" in out


@pytest.mark.slow
def test_gpu_reference_append_keeps_each_rows_own_provenance(tmp_path):
    run_script("gpu_reference.py", "--smoke", "--modes", "fp32", "--steps", "2", "--out", str(tmp_path))
    run_script("gpu_reference.py", "--smoke", "--modes", "bf16", "--steps", "3", "--append", "--out", str(tmp_path))
    data = json.loads(next(tmp_path.glob("gpu_reference_*.json")).read_text())
    rows = {r["mode"]: r for r in data["rows"]}
    assert rows["fp32"]["steps"] == 2 and "--modes fp32" in rows["fp32"]["source"]
    assert rows["bf16"]["steps"] == 3 and "--append" in rows["bf16"]["source"]


def test_suite_time_summary(tmp_path, capsys):
    from suite_time import main

    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"kind": "papermill", "name": f"nb{i}", "seconds": float(i)} for i in range(12)]))
    assert main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "total 66.0 s over 12" in out and "slowest 10" in out
    assert out.index("nb11") < out.index("nb2")
    assert main([str(tmp_path / "missing.json")]) == 1


@pytest.mark.parametrize("name, bf16", [("NVIDIA H100 80GB HBM3", 989.4), ("NVIDIA H100 PCIe", 756.0),
                                         ("NVIDIA H100 NVL", 835.5), ("NVIDIA H200", 989.4), ("NVIDIA H200 NVL", 835.5),
                                         ("NVIDIA A100-SXM4-80GB", 312.0), ("NVIDIA GeForce RTX 4090", None),
                                         ("NVIDIA L4", 121.0), ("NVIDIA L40S", 362.05), ("NVIDIA L40", None),
                                         ("Tesla T4", None)])
def test_peak_tflops_tells_the_h100_parts_apart(monkeypatch, name, bf16):
    import torch
    from gpu_reference import peak_tflops

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    assert peak_tflops(torch.device("cuda"), "bf16") == bf16
    assert peak_tflops(torch.device("cpu"), "bf16") is None


@pytest.mark.slow
def test_flop_count_of_resnet50_matches_the_known_figure():
    import torch
    from gpu_reference import train_step_flops
    from utils.models import resnet50

    model = resnet50(1000)
    flops = train_step_flops(model, torch.randn(1, 3, 224, 224), torch.tensor([0]))
    # ~4.1 GMACs forward = ~8.2 GFLOPs; backward ~2x forward: ~24.6 GFLOPs per image per training step
    assert 23e9 < flops < 26e9


@pytest.mark.slow
def test_input_path_smoke_records_the_host_cost_ratio(tmp_path):
    out = run_script("input_path.py", "--smoke", "--out", str(tmp_path))
    assert "ratio old/new host CPU per image" in out
    data = json.loads((tmp_path / "input_path_cpu.json").read_text())
    old, gather, dispatch, total = data["rows"]
    assert old["path"].startswith("old:") and total["path"] == "new: total host cost"
    assert total["cpu_ms_per_image"] == pytest.approx(gather["cpu_ms_per_image"] + dispatch["cpu_ms_per_image"])
    assert data["ratio_old_over_new"] == pytest.approx(old["cpu_ms_per_image"] / total["cpu_ms_per_image"])
    for r in data["rows"]:
        assert r["images_per_s_per_core"] == pytest.approx(1e3 / r["cpu_ms_per_image"])
    assert data["meets_target"] is (data["ratio_old_over_new"] >= data["target_ratio"])
    assert data["ops_per_batch"] > 0 and data["cache_px"] == 256

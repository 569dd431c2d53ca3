"""Day 25's GPU-only cells, run on the CPU with the GPU simulated at their seams: the device-capability query, the
full-size runs (fake `FullScaleResult`s from `full_scale_section`). Each test executes the notebook cell's source."""
from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest
import torch

import utils.full_scale_section as FSS
import utils.precision as precision
from utils.fast_path import PLANS_REUSED
from utils.full_scale import FullScaleResult
from utils.input_path import input_bound

NOTEBOOK = Path(__file__).resolve().parents[1] / "solutions" / "day25" / "day25_fast_path_knobs.ipynb"


def cell_source(cell_id: str) -> str:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    return next("".join(c["source"]) for c in cells if c["id"] == cell_id)


class FakeRun:
    smoke = False

    def hardware(self) -> str:
        return "simulated GPU"


@pytest.mark.parametrize("plans_reused", [False, True])
def test_gpu_note_reads_the_benchmark_ratio_under_the_key_section_3_wrote(plans_reused, capsys):
    # Cell day25-code-008 stores the ratio under "cudnn.benchmark (plans reused)" when the GPU admitted no second
    # process (exclusive-process compute mode); the note must read it there, not raise KeyError.
    source = cell_source("day25-code-gpu-note").split('print(f"- fused AdamW')[0]   # the part that reads ratios
    key = "cudnn.benchmark (plans reused)" if plans_reused else "cudnn.benchmark"
    namespace = dict(torch=torch, device=torch.device("cuda"), run=FakeRun(), PLANS_REUSED=PLANS_REUSED,
                     plans_reused=plans_reused, benchmark_key=key, ratios={key: 1.23, "channels_last": 1.1})
    with mock.patch("torch.cuda.get_device_capability", return_value=(9, 0)), \
            mock.patch.object(precision, "has_native_bf16", return_value=True), \
            mock.patch.object(precision, "resolve_amp", return_value="bf16"):
        exec(source, namespace)
    out = capsys.readouterr().out
    assert "cudnn.benchmark x1.23" in out
    assert (PLANS_REUSED in out) == plans_reused


def fake_result(technique: str, images_per_s: float, wait: float, loader_images_per_s: float) -> FullScaleResult:
    return FullScaleResult(
        technique=technique, settings={}, model="resnet50", dataset="imagenette", image_size=224, batch_size=64,
        micro_batch_size=64, optimizer_steps=100, images=6400, epochs=0.7, timed_images=6000, timed_s=10.0,
        images_per_s=images_per_s, data_wait_share=wait, peak_memory_bytes=2**33, train_loss=2.0, accuracy=0.3,
        eval_images=3925, setup_s=1.0, eval_s=1.0, hardware="simulated GPU", loader_images_per_s=loader_images_per_s,
        input_bound=input_bound(loader_images_per_s, images_per_s, wait))


def run_full_scale_cell(results: list[FullScaleResult]) -> str:
    import io
    from contextlib import redirect_stdout

    namespace = dict(AMP_TECHNIQUE="bf16", FULL_SCALE_RUNS=7, FULL_SCALE_STEPS=100, FULL_SCALE_BATCH=64,
                     device=torch.device("cuda"), run=FakeRun())
    out = io.StringIO()
    with mock.patch.object(FSS, "full_scale_section", lambda *a, **k: results), redirect_stdout(out):
        exec(cell_source("day25-code-full-scale"), namespace)
    return out.getvalue()


@pytest.mark.parametrize("wait, loader", [(0.06, 5000.0),    # waited 6 %: more than input_bound allows
                                          (0.01, 1100.0)])   # waited 1 %, but the path alone was only 1.1x
def test_full_scale_closing_line_follows_input_bound(wait, loader):
    # The old closing line had its own rule (wait share > 10 %) and said "the ratios measure the training step"
    # right under a row marked "no verdict: the input path limited a run of this pair".
    results = [fake_result("bf16", 1000.0, 0.01, 5000.0)] + [
        fake_result(f"bf16+knob{i}", 1000.0, 0.01, 5000.0) for i in range(5)] + [fake_result("fast", 1000.0, wait,
                                                                                               loader)]
    assert results[-1].input_bound
    out = run_full_scale_cell(results)
    assert "no verdict: the input path limited" in out
    assert results[-1].input_limit() in out
    assert "measure the training step" not in out
    assert "DataLoader" not in out and "gather thread" in out


def test_full_scale_closing_line_without_input_bound_runs():
    results = [fake_result(name, 1000.0, 0.02, 5000.0) for name in ["bf16"] + [f"k{i}" for i in range(5)] + ["fast"]]
    out = run_full_scale_cell(results)
    assert "no verdict" not in out
    assert "No run was input-bound" in out and "measure the training step" in out and "5.0x" in out

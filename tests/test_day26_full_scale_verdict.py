"""Day 26's full-size cell, run on the CPU with `full_scale_section` faked: its input-path advice follows
`utils.input_path.input_bound` (the rule the section itself applies) and names the cached input path it measured."""
from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from unittest import mock

import pytest

import utils.full_scale_section as FSS
from utils.full_scale import FullScaleResult
from utils.input_path import input_bound

NOTEBOOK = Path(__file__).resolve().parents[1] / "solutions" / "day26" / "day26_production_loop.ipynb"


def fake_result(technique: str, images_per_s: float, wait: float, loader_images_per_s: float) -> FullScaleResult:
    return FullScaleResult(
        technique=technique, settings={}, model="resnet50", dataset="imagenette", image_size=224, batch_size=64,
        micro_batch_size=64, optimizer_steps=100, images=6400, epochs=0.7, timed_images=6000, timed_s=10.0,
        images_per_s=images_per_s, data_wait_share=wait, peak_memory_bytes=2**33, train_loss=2.0, accuracy=0.3,
        eval_images=3925, setup_s=1.0, eval_s=1.0, hardware="simulated GPU", loader_images_per_s=loader_images_per_s,
        input_bound=input_bound(loader_images_per_s, images_per_s, wait))


def run_cell(results: list[FullScaleResult]) -> str:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    source = next("".join(c["source"]) for c in cells if c["id"] == "day26-code-full-scale")
    namespace = dict(FULL_SCALE_MINUTES=2.0, DEVICE="cuda", run=mock.Mock(smoke=False))
    out = io.StringIO()
    with mock.patch.object(FSS, "full_scale_section", lambda *a, **k: results), redirect_stdout(out):
        exec(source, namespace)
    return out.getvalue()


@pytest.mark.parametrize("wait, loader", [(0.20, 9000.0),    # waited 20 %: input-bound, under the old 50 % rule
                                          (0.01, 2200.0)])   # waited 1 %, but the path alone was only 1.1x
def test_input_bound_run_gets_the_cached_paths_remedy(wait, loader):
    plain, fast = fake_result("baseline", 800.0, 0.01, 9000.0), fake_result("fast", 2000.0, wait, loader)
    assert fast.input_bound
    out = run_cell([plain, fast])
    assert fast.input_limit() in out
    assert "decoded once" in out and "would not help" in out     # not "more DataLoader workers would help"


def test_no_advice_when_no_run_was_input_bound():
    out = run_cell([fake_result("baseline", 800.0, 0.01, 9000.0), fake_result("fast", 2000.0, 0.02, 9000.0)])
    assert "Verdict on this GPU" in out and "decoded once" not in out and "Input-bound" not in out

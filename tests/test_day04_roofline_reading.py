"""Day 04's roofline cell (`day04-code-roofline`): how it reads the small copy against the 256 MiB one on a GPU.

The GPU-only branch is simulated on the CPU: the cell's own code runs on the meta device (so `device.type != "cpu"`
takes the GPU path and torch reports no L2 size, as on MPS) with its timing function replaced by scripted seconds
per call; the L2 cases (a T4's 4 MiB, an H200's 50 MiB) are checked on the cell's reading function with fake numbers.
"""
import ast
import json
import types
from pathlib import Path

import matplotlib
import pytest
import torch
from torch import nn
from torchvision.models.resnet import Bottleneck

matplotlib.use("Agg")

NOTEBOOK = Path(__file__).resolve().parents[1] / "solutions/day04/day04_resnet50_anatomy.ipynb"
COPY_BYTES = 2 * 32 * 256 * 14 * 14 * 4          # the activation copy at TIMED_BATCH = 32: read + write, bytes


def cell_tree(cell_id: str) -> ast.Module:
    cells = {c.get("id"): c for c in json.loads(NOTEBOOK.read_text())["cells"]}
    return ast.parse("".join(cells[cell_id]["source"]))


def functions(cell_id: str, names: set[str], namespace: dict) -> dict:
    tree = cell_tree(cell_id)
    tree.body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    exec(compile(tree, cell_id, "exec"), namespace)
    return namespace


def reading():
    return functions("day04-code-roofline", {"small_copy_reading", "issue_bound_call"}, {})["small_copy_reading"]


def test_copy_larger_than_l2_measured_device_memory():
    # A T4: 4 MiB of L2, 12.8 MB moved in about 40 us, a call costs about 5 us to issue.
    why, issue_bound = reading()(1.0, COPY_BYTES, 4 * 2**20, 40e-6, 5e-6)
    assert not issue_bound
    assert "do not fit" in why and "device memory" in why and "issuing" not in why


def test_copy_in_l2_as_fast_as_an_empty_call_is_issue_bound():
    # An H200: 50 MiB of L2, 12.8 MB moved in about 3 us, an empty call 2.5 us.
    why, issue_bound = reading()(1.0, COPY_BYTES, 50 * 2**20, 3e-6, 2.5e-6)
    assert issue_bound and "issuing a call" in why


def test_copy_in_l2_slower_than_an_empty_call_is_not_issue_bound():
    why, issue_bound = reading()(1.1, COPY_BYTES, 60 * 2**20, 20e-6, 2.5e-6)
    assert not issue_bound and "although it fits" in why


def test_faster_copy_in_l2_is_the_cache():
    why, issue_bound = reading()(3.0, COPY_BYTES, 60 * 2**20, 10e-6, 2.5e-6)
    assert not issue_bound and "fits this GPU's 60 MiB L2" in why


def test_a_copy_clearly_longer_than_an_empty_call_was_timed_by_the_gpu():
    # An A100: the copy runs from L2 in ~6 us, issuing a copy_ costs ~3.5 us: the GPU set the time (max(issue, GPU)),
    # so the L2 reading stands, flagged as a lower bound.
    why, issue_bound = reading()(1.6, COPY_BYTES, 40 * 2**20, 6e-6, 3.5e-6)
    assert not issue_bound and "fits this GPU's 40 MiB L2" in why and "at least this" in why


def test_a_faster_copy_as_short_as_an_empty_call_is_issue_bound_not_the_cache():
    # An H100: the 12.8 MB copy needs ~2 us of GPU time but ~3.5 us to issue, so it "beats" HBM by issuing alone.
    why, issue_bound = reading()(1.5, COPY_BYTES, 50 * 2**20, 3.5e-6, 3e-6)
    assert issue_bound and "issuing a call" in why and "L2" not in why


def run_roofline_cell(seconds: dict[str, float], capsys) -> str:
    """Run the cell on the meta device with `per_call_s` replaced by scripted seconds per call, in the cell's order
    of measurements; return what it printed."""
    namespace = functions("day04-code-traffic", {"layer_traffic"},
                          {"nn": nn, "torch": torch, "TorchvisionBottleneck": Bottleneck,
                           "defaultdict": __import__("collections").defaultdict})
    order = iter(["matmul", "small copy", "big copy", "empty copy", "3x3 convolution", "3x3 convolution on 256 values",
                  "batch norm", "batch norm on 256 values"])
    tree = cell_tree("day04-code-roofline")
    tree.body = [n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name == "per_call_s")]
    import matplotlib.pyplot as plt
    namespace.update(
        per_call_s=lambda fn: seconds[next(order)], device=torch.device("meta"), plt=plt,
        run=types.SimpleNamespace(pick=lambda **kw: kw["gpu"], hardware=lambda: "simulated GPU"),
        ROOFLINE_MATMUL_N=4096, TIMED_BATCH=32, OUTPUT_DIR=str(Path(__import__("tempfile").mkdtemp())),
        by_kind_1={"batch norm": (2, 8), "convolution": (1000, 10)}, time_fn=None)
    plt.show = lambda *a, **k: None
    exec(compile(tree, "day04-code-roofline", "exec"), namespace)
    plt.close("all")
    return capsys.readouterr().out


def test_issue_bound_verdict_uses_device_memory_and_says_launch_bound(capsys):
    # The small copy about as long as an empty one, and BatchNorm about as long as its own call on 256 values (a
    # module call costs ~12x a bare copy_ to issue): the verdict must not blame memory for BatchNorm's time.
    out = run_roofline_cell({"matmul": 2e-3, "small copy": 3e-6, "big copy": 100e-6, "empty copy": 2.5e-6,
                             "3x3 convolution": 1e-3, "3x3 convolution on 256 values": 20e-6,
                             "batch norm": 14e-6, "batch norm on 256 values": 12e-6}, capsys)
    verdict = next(line for line in out.splitlines() if line.startswith("Verdict:"))
    assert "bound by launching calls" in verdict and "issuing a call" in out
    big_copy_rate = 2 * 64 * 2**20 * 4 / 100e-6
    values = 32 * 256 * 14 * 14
    bn_intensity = 2 * values / ((2 * values + 4 * 256) * 4)     # the cell's count: weight, bias and running stats
    bn_ceiling = bn_intensity * big_copy_rate / 1e9
    assert f"{bn_ceiling:,.1f} GFLOP/s" in verdict
    assert "batch norm" in out and "(launch-bound here)" in out


def test_memory_verdict_when_the_copy_moved_bytes(capsys):
    out = run_roofline_cell({"matmul": 2e-3, "small copy": 40e-6, "big copy": 100e-6, "empty copy": 2.5e-6,
                             "3x3 convolution": 1e-3, "3x3 convolution on 256 values": 20e-6,
                             "batch norm": 45e-6, "batch norm on 256 values": 12e-6}, capsys)
    verdict = next(line for line in out.splitlines() if line.startswith("Verdict:"))
    assert "it waits for memory" in verdict and "launching" not in verdict
    assert "torch reports no cache size" in out and "issuing a call" not in out

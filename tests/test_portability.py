"""Days 27-28 on the platforms the README supports, simulated on the CPU: MPS (no float64) and DataLoader workers
started with spawn (macOS, Windows) or forkserver (Linux from Python 3.14), which import every class they unpickle."""
from __future__ import annotations

import json
import sys

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.data import DataLoader, TensorDataset

from conftest import ROOT

MPS_FLOAT64 = ("Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. "
               "Please use float32 instead.")


class NoFloat64(TorchDispatchMode):
    """Every tensor operation whose result is float64 raises the TypeError MPS raises: run code whose tensors all
    live on the device under it, and it fails where it would fail on a Mac."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if any(isinstance(t, torch.Tensor) and t.dtype == torch.float64 for t in tree_leaves(out)):
            raise TypeError(f"{MPS_FLOAT64} ({func})")
        return out


def cells(day: str) -> dict[str, str]:
    """Code cells of a day's solution notebook by cell id (and by grade_id for graded cells)."""
    nb = json.loads(next((ROOT / "solutions" / day).glob("*.ipynb")).read_text(encoding="utf-8"))
    out = {}
    for c in nb["cells"]:
        if c["cell_type"] == "code":
            source = "".join(c["source"])
            out[c["id"]] = source
            gid = c["metadata"].get("nbgrader", {}).get("grade_id")
            if gid:
                out[gid] = source
    return out


def module_source(cell: str) -> str:
    """A `%%writefile` cell's file contents (the magic line dropped)."""
    first, _, rest = cell.partition("\n")
    assert first.startswith("%%writefile"), first
    return rest


def test_the_simulation_catches_float64():
    with pytest.raises(TypeError, match="MPS"), NoFloat64():
        torch.ones(3).double()
    with NoFloat64():
        torch.ones(3).float().sum()


@pytest.mark.slow
def test_day27_stability_limit_cell_runs_without_float64_tensors(monkeypatch):
    """Day 27's learning-rate demo computes the Hessian's largest eigenvalue in float64: on the host, never on MPS."""
    import matplotlib

    matplotlib.use("Agg")
    code = cells("day27")
    ns: dict = {}
    exec(code["day27-params-001"], ns)
    ns.update(SMOKE=True, DEVICE="cpu")
    exec(code["day27-code-002"], ns)
    monkeypatch.setattr("matplotlib.pyplot.show", lambda *a, **k: None)
    with NoFloat64():
        exec(code["day27-code-011"], ns)
    assert ns["lr_limit"] > 0 and len(ns["lr_results"]) == 2


def test_day28_evaluate_solution_keeps_no_float64_on_the_device():
    import torch.nn.functional as F

    ns = {"torch": torch, "F": F}
    exec(cells("day28")["day28_evaluate"], ns)
    torch.manual_seed(0)
    model = torch.nn.Linear(5, 3)
    x, y = torch.randn(23, 5), torch.randint(0, 3, (23,))
    batches = [(x[i:i + 8], y[i:i + 8]) for i in range(0, 23, 8)]
    with NoFloat64():
        cm, loss = ns["evaluate"](model, batches, 3)
    with torch.no_grad():
        logits = model(x)
    assert cm.tolist() == torch.zeros(3, 3, dtype=torch.int64).index_put_(
        (y, logits.argmax(1)), torch.ones(23, dtype=torch.int64), accumulate=True).tolist()
    assert abs(loss - F.cross_entropy(logits, y).item()) < 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_day27_dataloader_section_works_with_workers_that_import(start_method, tmp_path, monkeypatch):
    """Day 27's dataset classes live in module files (written by %%writefile cells), so workers started with spawn
    or forkserver can import them; defined in the notebook's __main__, they could not."""
    if start_method not in torch.multiprocessing.get_all_start_methods():
        pytest.skip(f"{start_method} is not available here")
    code = cells("day27")
    (tmp_path / "flaky_data.py").write_text(module_source(code["day27-code-036b"]))
    (tmp_path / "skip_bad_samples.py").write_text(module_source(code["day27_skip_bad_samples"]))
    monkeypatch.syspath_prepend(str(tmp_path))          # spawn and forkserver workers receive the parent's sys.path
    for name in ("flaky_data", "skip_bad_samples"):
        sys.modules.pop(name, None)
    from flaky_data import FlakyDigits
    from skip_bad_samples import SkipBadSamples, collate_skipping_bad

    base = TensorDataset(torch.arange(12.0)[:, None], torch.arange(12) % 3)
    loader = DataLoader(SkipBadSamples(FlakyDigits(base, bad=(3, 10))), batch_size=4, num_workers=2,
                        multiprocessing_context=start_method, collate_fn=collate_skipping_bad, timeout=300)
    failed, kept = [], []
    for images, labels, bad in loader:
        failed += bad
        kept += images[:, 0].long().tolist()
    assert failed == [3, 10]
    assert kept == [i for i in range(12) if i not in (3, 10)]

"""utils.training and utils.plotting: the loop learns real data, accumulates exactly, syncs rarely, fails clearly."""
from __future__ import annotations

import math
import sys

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

from utils import step as STEP
from utils import training as TR
from utils.data import load_dataset
from utils.models import small_cnn
from utils.plotting import bar_chart, plot_history
from utils.seeding import seed_everything


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", image_size=8)


def test_fit_learns_digits(digits):
    seed_everything(0)
    train, val, _ = digits.loaders(64)
    model = small_cnn(10, width=16)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    history = TR.fit(model, train, val, opt, "cpu", epochs=3, progress=False, verbose=False)
    assert len(history) == 3
    assert history["train_loss"][-1] < history["train_loss"][0]
    assert history.last["val_accuracy"] > 0.85
    assert history.best("val_accuracy")["val_accuracy"] >= history.last["val_accuracy"]


def test_fit_is_deterministic_with_a_seed(digits):
    results = []
    for _ in range(2):
        seed_everything(1)
        train, val, _ = digits.loaders(128, seed=1)
        model = small_cnn(10, width=8)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        results.append(TR.fit(model, train, val, opt, "cpu", 1, progress=False, verbose=False).last)
    assert results[0]["train_loss"] == results[1]["train_loss"]
    assert results[0]["val_accuracy"] == results[1]["val_accuracy"]


def _linear_data(n=24):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 5, generator=g), torch.randint(0, 3, (n,), generator=g)


def _twin_linear_models():
    """Two identical linear models, each with its own SGD optimizer: a reference and one to compare."""
    torch.manual_seed(0)
    first = nn.Linear(5, 3)
    second = nn.Linear(5, 3)
    second.load_state_dict(first.state_dict())
    return [(m, torch.optim.SGD(m.parameters(), lr=0.1)) for m in (first, second)]


def test_accumulation_matches_one_big_batch():
    x, y = _linear_data(24)
    (big, opt_big), (small, opt_small) = _twin_linear_models()
    TR.train_one_epoch(big, DataLoader(TensorDataset(x, y), batch_size=24), opt_big, "cpu", progress=False)
    stats = TR.train_one_epoch(small, DataLoader(TensorDataset(x, y), batch_size=6), opt_small, "cpu",
                               accumulation_steps=4, progress=False)
    assert stats.steps == 1
    for a, b in zip(big.parameters(), small.parameters()):
        assert torch.allclose(a, b, atol=1e-6)


def test_a_short_last_group_is_normalised_by_its_own_size():
    x, y = _linear_data(30)  # 5 micro-batches of 6 with k=4: groups of 4 and 1
    (ref, opt_ref), (acc, opt_acc) = _twin_linear_models()
    loss_fn = nn.CrossEntropyLoss()
    for xs, ys in [(x[:24], y[:24]), (x[24:], y[24:])]:
        opt_ref.zero_grad()
        loss_fn(ref(xs), ys).backward()
        opt_ref.step()
    stats = TR.train_one_epoch(acc, DataLoader(TensorDataset(x, y), batch_size=6), opt_acc, "cpu",
                               accumulation_steps=4, progress=False)
    assert stats.steps == 2
    for a, b in zip(ref.parameters(), acc.parameters()):
        assert torch.allclose(a, b, atol=1e-6)


def test_accuracy_is_per_sample_with_an_uneven_last_batch():
    x = torch.zeros(5, 2)
    y = torch.tensor([0, 0, 0, 0, 1])

    class Constant(nn.Module):  # always predicts class 0
        def forward(self, inp):
            return torch.stack([torch.ones(len(inp)), torch.zeros(len(inp))], 1)

    stats = TR.evaluate(Constant(), DataLoader(TensorDataset(x, y), batch_size=4), "cpu")
    assert stats.accuracy == pytest.approx(0.8)  # batch-averaged would say (1.0 + 0.0) / 2 = 0.5
    assert stats.samples == 5 and stats.steps == 2


def test_evaluate_uses_eval_mode_and_no_graph():
    seen = {}

    class Probe(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, inp):
            seen["training"] = self.training
            seen["grad"] = torch.is_grad_enabled()
            return self.lin(inp)

    TR.evaluate(Probe(), [(torch.zeros(3, 2), torch.zeros(3, dtype=torch.long))], "cpu")
    assert seen == {"training": False, "grad": False}


def test_evaluate_restores_every_submodule_mode_also_when_the_model_raises():
    model = nn.Sequential(nn.Linear(2, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)).train()
    model[1].eval()                                          # a frozen BatchNorm inside a training model
    batch = [(torch.zeros(3, 2), torch.zeros(3, dtype=torch.long))]
    TR.evaluate(model, batch, "cpu")
    assert [m.training for m in model] == [True, False, True]
    with pytest.raises(RuntimeError):
        TR.evaluate(model, [(torch.zeros(3, 5), torch.zeros(3, dtype=torch.long))], "cpu")   # wrong width
    assert [m.training for m in model] == [True, False, True]
    model.eval()
    TR.evaluate(model, batch, "cpu")
    assert not any(m.training for m in model.modules())


@pytest.mark.parametrize("progress, reads", [(True, 4 + 2), (False, 2)])
def test_logging_reads_the_device_once_per_interval(monkeypatch, progress, reads):
    x, y = _linear_data(40)
    model = nn.Linear(5, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    calls = {"item": 0}
    real_item = torch.Tensor.item
    loop_files = (TR.__file__, STEP.__file__)

    def counting_item(self):
        if sys._getframe(1).f_code.co_filename in loop_files:  # the loop's reads, not the DataLoader's seeding
            calls["item"] += 1
        return real_item(self)

    monkeypatch.setattr(torch.Tensor, "item", counting_item)
    TR.train_one_epoch(model, DataLoader(TensorDataset(x, y), batch_size=2), opt, "cpu", log_every=5,
                       progress=progress)
    # 20 steps: with a progress bar a read every 5 -> 4 reads; always loss and accuracy at the end of the epoch
    assert calls["item"] == reads


class _Stream(IterableDataset):
    """A dataset of unknown length: ``len()`` of its DataLoader raises TypeError."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __iter__(self):
        return iter(zip(self.x, self.y))


def _hand_accumulated(model, opt, scheduler, groups, max_norm):
    """The reference, written out: each group's micro-batch losses divided by that group's own size, then clip,
    step and schedule. Returns the gradient norm of the last group."""
    loss_fn = nn.CrossEntropyLoss()
    norm = None
    for group in groups:
        opt.zero_grad()
        for xs, ys in group:
            (loss_fn(model(xs), ys) / len(group)).backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        opt.step()
        scheduler.step()
    return norm


@pytest.mark.parametrize("kind", ["iterable_dataset", "generator", "generator_shorter_than_max_steps"])
@pytest.mark.parametrize("use_scaler", [False, True])
def test_unknown_length_last_group_is_clipped_scheduled_and_normalised(kind, use_scaler):
    x, y = _linear_data(36)   # 6 micro-batches of 6 with k=4: groups of 4 and 2, the loader's length unknown
    (ref, opt_ref), (acc, opt_acc) = _twin_linear_models()
    decay = lambda step: 1.0 / (1 + step)  # noqa: E731  (changes the lr at every step, so a missed step shows)
    sched_ref = torch.optim.lr_scheduler.LambdaLR(opt_ref, decay)
    sched_acc = torch.optim.lr_scheduler.LambdaLR(opt_acc, decay)
    micro = [(x[i:i + 6], y[i:i + 6]) for i in range(0, 36, 6)]
    want_norm = _hand_accumulated(ref, opt_ref, sched_ref, [micro[:4], micro[4:]], max_norm=0.05)
    if kind == "iterable_dataset":
        loader, max_steps = DataLoader(_Stream(x, y), batch_size=6), None
        with pytest.raises(TypeError):
            len(loader)
    else:
        loader, max_steps = (b for b in micro), (100 if kind == "generator_shorter_than_max_steps" else None)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0) if use_scaler else None
    stats = TR.train_one_epoch(acc, loader, opt_acc, "cpu", accumulation_steps=4, max_grad_norm=0.05,
                               scheduler=sched_acc, scaler=scaler, max_steps=max_steps, progress=False)
    assert stats.steps == 2 and stats.samples == 36
    assert sched_acc.last_epoch == sched_ref.last_epoch == 2, "the last, shorter group must step the scheduler"
    assert stats.grad_norm == pytest.approx(float(want_norm), rel=1e-5), \
        "the last group's gradient must be its mean (divided by 2, not 4), measured before clipping"
    for a, b in zip(ref.parameters(), acc.parameters()):
        assert torch.allclose(a, b, atol=1e-6), "the last group must be clipped like every other"


def test_clipping_reports_the_norm_and_amp_runs_on_cpu():
    x, y = _linear_data(16)
    model = nn.Linear(5, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    stats = TR.train_one_epoch(model, DataLoader(TensorDataset(x, y), batch_size=8), opt, "cpu",
                               max_grad_norm=1e-3, amp="bf16", progress=False)
    assert stats.grad_norm is not None and stats.grad_norm > 1e-3
    assert math.isfinite(stats.loss)


def test_resolve_amp():
    assert TR.resolve_amp(False, "cpu") is None
    assert TR.resolve_amp(True, "cpu") == torch.bfloat16
    assert TR.resolve_amp("fp16", "cuda") == torch.float16
    with pytest.raises(ValueError, match="bf16"):
        TR.resolve_amp("fp16", "cpu")
    with pytest.raises(ValueError):
        TR.resolve_amp("int8", "cpu")
    assert TR.make_grad_scaler(torch.bfloat16, "cpu") is None


def test_bad_arguments_fail_clearly():
    model = nn.Linear(5, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="accumulation_steps"):
        TR.train_one_epoch(model, [], opt, "cpu", accumulation_steps=0)
    with pytest.raises(ValueError, match="no batches"):
        TR.train_one_epoch(model, [], opt, "cpu", progress=False)
    with pytest.raises(ValueError, match="epochs"):
        TR.fit(model, [], None, opt, "cpu", epochs=0)


def test_divergence_raises_with_advice():
    x, y = _linear_data(8)
    x[0, 0] = float("nan")
    model = nn.Linear(5, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(FloatingPointError, match="learning rate"):
        TR.fit(model, DataLoader(TensorDataset(x, y), batch_size=4), None, opt, "cpu", 1, progress=False,
               verbose=False)


def test_plots_draw_curves_and_bars():
    history = TR.History([{"epoch": 1, "train_loss": 1.0, "val_loss": 1.2, "train_accuracy": 0.5,
                           "val_accuracy": 0.4},
                          {"epoch": 2, "train_loss": 0.5, "val_loss": 0.7, "train_accuracy": 0.8,
                           "val_accuracy": 0.7}])
    fig = plot_history(history)
    assert len(fig.axes) == 2 and len(fig.axes[0].lines) == 2
    with pytest.raises(ValueError):
        plot_history(TR.History())
    with pytest.raises(KeyError):
        plot_history(history, metrics=["f1"])
    fig = bar_chart(["a", "b"], [1.0, 2.0], ylabel="x", hardware="cpu")
    assert "cpu" in fig.axes[0].get_title()


def test_fp16_scaler_reads_once_per_step_unless_the_optimizer_is_fused():
    # GradScaler.step reads found_inf on the host before a plain optimizer's step; a fused one takes it on the device
    # (torch/amp/grad_scaler.py, _step_supports_amp_scaling), which is what the module docstring says.
    from utils.sync_ops import count_sync_ops
    torch.manual_seed(0)
    data = [(torch.randn(8, 8), torch.randint(0, 4, (8,))) for _ in range(5)]
    reads = {}
    for fused in (False, True):
        model = nn.Linear(8, 4)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, fused=fused)
        scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
        with count_sync_ops(scalar_reads=True) as counted:
            TR.train_one_epoch(model, data, opt, "cpu", scaler=scaler, progress=False)
        reads[fused] = counted["n"]
    assert reads[False] - reads[True] == 5, f"scaler reads: {reads} (one per step without fused, none with)"


def test_collect_predictions_keeps_a_frozen_batchnorm_frozen():
    from utils.metrics import collect_predictions
    model = nn.Sequential(nn.Linear(2, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)).train()
    model[1].eval()
    collect_predictions(model, [(torch.zeros(3, 2), torch.zeros(3, dtype=torch.long))], "cpu")
    assert [m.training for m in model] == [True, False, True]

"""utils.full_scale and utils.techniques: the GPU days' full-size run, driven on a CPU at toy size through the same
code (an Imagenette-shaped folder written here, no network), and its technique settings checked on simulated GPUs."""
from __future__ import annotations

import pytest
import torch
import torchvision.models  # noqa: F401  (its first import takes seconds: paid at collection, not in a test)

import utils.full_scale as FS
from utils import data as D
from utils.datasets import write_imagenette_like
from utils.device import DeviceUnavailableError
from utils.fast_path import fast_path_flags
from utils.memory import saved_activation_bytes
from utils.models import resnet18
from utils.techniques import TECHNIQUES, checkpoint_stages, resolve_settings

TOY = dict(model="small_cnn", image_size=32, batch_size=8, num_workers=0, allow_cpu=True, progress=False)


@pytest.fixture(scope="module")
def nette(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_imagenette_like(root, num_classes=3, train_per_class=12, val_per_class=3)
    return root


@pytest.fixture(scope="module")
def toy_data(nette):
    return FS.full_scale_data("imagenette", 32, root=nette)


@pytest.fixture
def step_spy(monkeypatch):
    """Record the keyword arguments and input batch of every train_step call made by full_scale_run."""
    calls = []
    real = FS.train_step

    def spy(model, x, y, opt, **kw):
        calls.append({**kw, "x": x, "model": model})
        return real(model, x, y, opt, **kw)

    monkeypatch.setattr(FS, "train_step", spy)
    return calls


def _simulated_gpu(monkeypatch, capability, name):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    return torch.device("cuda", 0)


# ----------------------------------------------------------------------------------------------- settings
def test_auto_precision_is_bf16_on_ampere_and_fp16_on_a_t4(monkeypatch):
    a100 = _simulated_gpu(monkeypatch, (8, 0), "NVIDIA A100-SXM4-40GB")
    assert resolve_settings("fast", a100).amp == "bf16"
    t4 = _simulated_gpu(monkeypatch, (7, 5), "Tesla T4")
    s = resolve_settings("fast", t4)
    assert s.amp == "fp16" and s.pin_memory and s.channels_last
    with pytest.raises(ValueError, match="emulated.*technique='fp16'"):
        resolve_settings("bf16", t4)


def test_settings_overrides_and_their_errors():
    cpu = torch.device("cpu")
    s = resolve_settings("checkpointing", cpu, checkpoint_stages=("layer2", "layer3"), pin_memory=True)
    assert s.checkpoint_stages == ("layer2", "layer3")
    assert not s.pin_memory                                    # no CUDA copy to pin for
    assert resolve_settings("fast", cpu).amp == "bf16"         # the CPU autocasts to bf16
    with pytest.raises(ValueError, match="Unknown technique 'amp'.*baseline"):
        resolve_settings("amp", cpu)
    with pytest.raises(ValueError, match="Unknown setting.*amp_dtype.*knobs are"):
        resolve_settings("baseline", cpu, amp_dtype="bf16")
    with pytest.raises(ValueError, match="fp16 autocast on the CPU"):
        resolve_settings("fp16", cpu)
    with pytest.raises(ValueError, match="ResNet stages"):
        resolve_settings("baseline", cpu, checkpoint_stages=("conv4_x",))


@pytest.mark.slow
def test_checkpointed_stage_saves_less_and_computes_the_same_gradients():
    torch.manual_seed(0)
    plain = resnet18(10, small_input=True).train()
    wrapped = resnet18(10, small_input=True).train()
    wrapped.load_state_dict(plain.state_dict())
    checkpoint_stages(wrapped, ("layer3",))
    x, y = torch.randn(2, 3, 32, 32), torch.tensor([1, 2])
    assert saved_activation_bytes(wrapped, x) < 0.9 * saved_activation_bytes(plain, x)
    for net in (plain, wrapped):
        torch.nn.functional.cross_entropy(net(x), y).backward()
    g_plain = plain.layer3[0].conv1.weight.grad
    g_wrapped = wrapped.layer3.inner[0].conv1.weight.grad
    torch.testing.assert_close(g_wrapped, g_plain)
    with pytest.raises(ValueError, match="no stage 'layer3'"):
        checkpoint_stages(torch.nn.Sequential(torch.nn.Linear(2, 2)), ("layer3",))


def test_lr_factor_warms_up_then_decays_to_zero():
    f = [FS.lr_factor(k, 4, 20) for k in range(21)]
    assert f[:4] == [0.25, 0.5, 0.75, 1.0] and f[4] == 1.0
    assert all(a >= b for a, b in zip(f[4:], f[5:])) and f[20] == pytest.approx(0.0)


# ----------------------------------------------------------------------------------------------- the run
def test_refuses_a_cpu_without_allow_cpu_and_says_how_to_guard():
    with pytest.raises(DeviceUnavailableError, match=r"CUDA GPU.*if run.on_gpu.*allow_cpu=True"):
        FS.full_scale_run("bf16", device="cpu")


def test_toy_run_reports_speed_memory_and_accuracy(toy_data, step_spy):
    r = FS.full_scale_run("baseline", steps=5, data=toy_data, **TOY)
    d = r.as_dict()
    assert d["optimizer_steps"] == 5 and d["images"] == 40 and len(step_spy) == 5
    assert d["timed_images"] == 16                  # the first 3 steps (compilation, autotuning) are not timed
    assert d["images_per_s"] > 0 and 0 <= d["data_wait_share"] <= 1
    assert d["peak_memory_bytes"] is None           # no CUDA allocator on the CPU
    assert 0 <= d["accuracy"] <= 1 and d["eval_images"] == 9
    assert d["epochs"] == pytest.approx(40 / 36)
    assert "images/s" in r.summary() and "baseline" in r.summary()


def test_accumulation_splits_the_batch_and_steps_once_per_group(toy_data, step_spy):
    r = FS.full_scale_run("accumulation", steps=2, data=toy_data, **TOY)
    assert r.micro_batch_size == 2 and r.images == 16
    assert [c["x"].shape[0] for c in step_spy] == [2] * 8
    assert [c["zero_grad"] for c in step_spy] == [True, False, False, False] * 2
    assert [c["step"] for c in step_spy] == [False, False, False, True] * 2
    assert {c["loss_divisor"] for c in step_spy} == {4}
    with pytest.raises(ValueError, match="not divisible by accumulation_steps 4"):
        FS.full_scale_run("accumulation", steps=1, data=toy_data, **{**TOY, "batch_size": 6})


def test_fast_path_on_a_cpu_applies_its_knobs_and_restores_the_global_flags(toy_data, step_spy):
    before = fast_path_flags()
    torch.backends.cudnn.benchmark = False
    r = FS.full_scale_run("fast", steps=2, data=toy_data, **TOY)
    assert fast_path_flags() == {**before, "cudnn.benchmark": False}
    assert r.settings["amp"] == "bf16" and r.settings["optimizer_impl"] == "fused"
    assert all(c["amp_dtype"] == torch.bfloat16 for c in step_spy)
    assert all(c["x"].is_contiguous(memory_format=torch.channels_last) for c in step_spy)
    torch.backends.cudnn.benchmark = before["cudnn.benchmark"]


def test_compile_technique_trains_the_compiled_module(toy_data, step_spy, monkeypatch):
    compiled = []

    def fake_compile(model, mode=None, **kw):
        compiled.append(mode)
        return model

    monkeypatch.setattr(torch, "compile", fake_compile)
    FS.full_scale_run("compile", steps=1, data=toy_data, eval_batches=0, **TOY)
    assert compiled == ["default"]


def test_minutes_mode_plans_the_steps_after_the_warm_up(toy_data):
    r = FS.full_scale_run("baseline", minutes=1e-6, warmup_steps=4, data=toy_data, eval_batches=0, **TOY)
    assert r.optimizer_steps == 4 and r.accuracy is None     # the budget was spent during the warm-up
    with pytest.raises(ValueError, match="steps .* or minutes > 0"):
        FS.full_scale_run("baseline", minutes=None, data=toy_data, **TOY)
    with pytest.raises(ValueError, match="warmup_steps must be >= 1"):   # before, a ZeroDivisionError at step 4
        FS.full_scale_run("baseline", minutes=1.0, warmup_steps=0, data=toy_data, eval_batches=0, **TOY)


def test_checkpointing_needs_a_resnet(toy_data):
    with pytest.raises(ValueError, match="SmallCNN has no stage 'layer3'"):
        FS.full_scale_run("checkpointing", steps=1, data=toy_data, **TOY)


# ----------------------------------------------------------------------------------------------- data
def test_full_scale_data_reads_the_320px_download_for_224px_training(tmp_path):
    write_imagenette_like(tmp_path, size="160px", num_classes=2, train_per_class=5, val_per_class=1)
    with pytest.raises(D.DatasetUnavailableError, match="imagenette2-320"):
        FS.full_scale_data("imagenette", 224, root=tmp_path)
    write_imagenette_like(tmp_path, size="320px", num_classes=2, train_per_class=5, val_per_class=1)
    data = FS.full_scale_data("imagenette", 192, root=tmp_path)
    assert data.sizes() == {"train": 10, "val": 0, "test": 2}       # every training image trains
    assert data.test[0][0].shape == (3, 192, 192)
    torch.manual_seed(0)
    assert not torch.equal(data.train[0][0], data.train[0][0])     # augmented: a new crop every time
    with pytest.raises(ValueError, match="'imagenette' or 'cifar10'"):
        FS.full_scale_data("digits", 32)


def test_describe_says_what_a_gpu_would_run():
    text = FS.describe_full_scale("checkpointing", 3)
    assert "about 3 min" in text and TECHNIQUES["checkpointing"][1] in text and "224 px" in text
    with pytest.raises(ValueError, match="Unknown technique"):
        FS.describe_full_scale("turbo")


@pytest.mark.slow
def test_minutes_mode_replans_when_the_steps_slow_down(toy_data, monkeypatch):
    # The first timed steps can run ahead on batches the workers prefetched; planned once from them, a "1 minute"
    # run took several. Simulated: 1 s per step for the first 8 steps, then 3 s (a fake clock, no real waiting).
    clock = {"now": 0.0, "calls": 0}

    class FakeTime:
        @staticmethod
        def perf_counter() -> float:
            return clock["now"]

    real = FS.train_step

    def slow_later(*args, **kw):
        clock["calls"] += 1
        clock["now"] += 1.0 if clock["calls"] <= 8 else 3.0
        return real(*args, **kw)

    monkeypatch.setattr(FS, "time", FakeTime)
    monkeypatch.setattr(FS, "train_step", slow_later)
    r = FS.full_scale_run("baseline", minutes=1.0, warmup_steps=4, data=toy_data, eval_batches=0, **TOY)
    assert 60 - 3 <= r.timed_s <= 60 + 3 * 4, f"asked for 60 s of timed training, got {r.timed_s:.0f} s"

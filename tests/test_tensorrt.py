"""utils.tensorrt without TensorRT: a fake torch_tensorrt module records what the course asks it to compile, and the
like-with-like comparison runs on CPU variants (fp32 and bf16 eager)."""
from __future__ import annotations

import sys
import types

import pytest
import torch
from torch import nn

import utils.tensorrt as trt_utils
from utils.tensorrt import compare_variants, compile_tensorrt, tensorrt_status


def fake_torch_tensorrt() -> types.ModuleType:
    mod = types.ModuleType("torch_tensorrt")
    mod.__version__ = "2.14.0"
    mod.compiled = []

    class Input:
        def __init__(self, **kwargs):
            self.kwargs = kwargs
    mod.Input = Input

    def compile(module, **kwargs):
        mod.compiled.append((module, kwargs))
        return module
    mod.compile = compile
    return mod


def test_status_says_why_it_cannot_run(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_tensorrt", None)          # import raises ModuleNotFoundError
    s = tensorrt_status("cuda")
    assert not s["usable"] and "not installed" in s["reason"]
    monkeypatch.setitem(sys.modules, "torch_tensorrt", fake_torch_tensorrt())
    s = tensorrt_status("cpu")
    assert not s["usable"] and "NVIDIA GPU" in s["reason"] and s["version"] == "2.14.0"
    assert tensorrt_status("cuda:0") == {"usable": True, "version": "2.14.0", "reason": "ready"}


def test_status_reports_a_broken_install(monkeypatch):
    def broken(name):
        raise OSError("libnvinfer.so.11: cannot open shared object file")
    monkeypatch.setattr(trt_utils.importlib, "import_module", broken)
    s = tensorrt_status("cuda")
    assert not s["usable"] and "libnvinfer" in s["reason"]


def test_compile_asks_for_a_dynamic_batch_in_the_models_own_dtype(monkeypatch):
    fake = fake_torch_tensorrt()
    monkeypatch.setitem(sys.modules, "torch_tensorrt", fake)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.LazyLinear(2))
    model(torch.randn(1, 3, 8, 8))
    out = compile_tensorrt(model, sample_shape=(3, 8, 8), dtype=torch.float16, min_batch=1, opt_batch=64,
                           max_batch=256, device="cpu")
    (compiled, kwargs), = fake.compiled
    assert kwargs["ir"] == "dynamo" and kwargs["use_explicit_typing"] is True
    assert kwargs["disable_tf32"] is True, "an fp32 engine is true fp32 unless TF32 is asked for"
    spec, = kwargs["inputs"]
    assert spec.kwargs == {"min_shape": (1, 3, 8, 8), "opt_shape": (64, 3, 8, 8), "max_shape": (256, 3, 8, 8),
                           "dtype": torch.float16}
    assert out is compiled and compiled is not model and not compiled.training
    assert next(compiled.parameters()).dtype == torch.float16
    assert next(model.parameters()).dtype == torch.float32, "the caller's model is left as it was"
    with pytest.raises(ValueError):
        compile_tensorrt(model, sample_shape=(3, 8, 8), dtype=torch.float32, min_batch=8, opt_batch=4,
                         max_batch=16, device="cpu")
    compile_tensorrt(model, sample_shape=(3, 8, 8), dtype=torch.float32, min_batch=1, opt_batch=4, max_batch=16,
                     device="cpu", tf32=True)
    assert fake.compiled[-1][1]["disable_tf32"] is False, "tf32=True leaves TensorRT's TF32 tactics allowed"


def test_compare_variants_measures_each_variant_against_one_reference():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(48, 32), nn.ReLU(), nn.Linear(32, 5)).eval()
    images = torch.randn(40, 3, 4, 4)
    with torch.inference_mode():
        reference = model(images)
    labels = reference.argmax(1)
    model_bf16 = nn.Sequential(nn.Flatten(), nn.Linear(48, 32), nn.ReLU(), nn.Linear(32, 5)).eval()
    model_bf16.load_state_dict(model.state_dict())
    model_bf16 = model_bf16.to(torch.bfloat16)
    rows = compare_variants({"eager fp32": (model, torch.float32), "eager bf16": (model_bf16, torch.bfloat16)},
                            images, labels, reference, device="cpu", batch=16, repeats=2, max_batch=16)
    fp32, bf16 = rows
    assert [r["variant"] for r in rows] == ["eager fp32", "eager bf16"]
    assert fp32["max_abs_diff"] == 0.0 and fp32["accuracy"] == 1.0 and fp32["dtype"] == "float32"
    assert 0.0 < bf16["max_abs_diff"] < 0.5 and bf16["dtype"] == "bfloat16"
    assert bf16["argmax_agreement"] == bf16["accuracy"] > 0.8      # labels are the reference's classes
    assert fp32["batch"] == 16 and fp32["images_per_s"] == pytest.approx(16 / (fp32["median_ms"] / 1e3))
    with pytest.raises(ValueError):
        compare_variants({}, images, labels[:3], reference, device="cpu", batch=4)
    with pytest.raises(ValueError):
        compare_variants({}, images, labels, reference, device="cpu", batch=41)


def test_compare_variants_sets_tf32_per_variant_and_restores_it():
    """The old method timed "eager fp32" with whatever TF32 switches were set (cuDNN's default: TF32 convolutions):
    each variant now runs and is timed with the TF32 state it names, and the switches are restored after it."""
    from utils.tf32 import tf32_flags, tf32_in_use

    seen: dict[str, set] = {}

    def recorder(name):
        def fn(x):
            seen.setdefault(name, set()).add(tuple(sorted(tf32_in_use().items())))
            return x.flatten(1)[:, :3]
        return fn

    images = torch.randn(8, 3, 2, 2)
    reference = images.flatten(1)[:, :3]
    labels = reference.argmax(1)
    before = tf32_flags()
    rows = compare_variants({"fp32, TF32 off": (recorder("off"), torch.float32, False),
                             "TF32": (recorder("on"), torch.float32, True),
                             "as set": (recorder("as set"), torch.float32)},
                            images, labels, reference, device="cpu", batch=4, repeats=2)
    assert seen["off"] == {(("conv", False), ("matmul", False))}, seen["off"]
    assert seen["on"] == {(("conv", True), ("matmul", True))}, seen["on"]
    assert seen["as set"] == {tuple(sorted(tf32_in_use().items()))}
    assert tf32_flags() == before, "every TF32 switch is restored"
    assert [r["tf32"] for r in rows] == [False, True, None]
    with pytest.raises(ValueError):
        compare_variants({"bad": (recorder("x"),)}, images, labels, reference, device="cpu", batch=4)

"""Tests for utils.fast_path (no GPU needed: the CUDA branches are exercised through plan_fast_path)."""
import pytest
import torch

from utils.fast_path import (apply_fast_path, fast_path_flags, optimizer_kwargs, plan_fast_path,
                             restore_fast_path_flags)


def values(plan):
    return {k: d.value for k, d in plan.items()}


def test_cpu_plan_turns_on_no_gpu_knob():
    v = values(plan_fast_path("cpu"))
    assert v["cudnn_benchmark"] is False and v["tf32"] is False and v["pin_memory"] is False
    assert v["channels_last"] is False and v["optimizer_impl"] == "fused" and v["set_to_none"] is True
    assert values(plan_fast_path("mps"))["optimizer_impl"] == "foreach"


def test_ampere_fixed_shapes_gets_everything():
    v = values(plan_fast_path("cuda", (8, 0)))
    assert v == {"cudnn_benchmark": True, "tf32": True, "channels_last": True, "optimizer_impl": "fused",
                 "pin_memory": True, "set_to_none": True}


def test_volta_has_tensor_cores_but_no_tf32():
    v = values(plan_fast_path("cuda", (7, 0)))
    assert v["tf32"] is False and v["channels_last"] is True and v["cudnn_benchmark"] is True


def test_pascal_and_unknown_capability():
    assert values(plan_fast_path("cuda", (6, 1)))["channels_last"] is False
    v = values(plan_fast_path("cuda", None))
    assert v["tf32"] is False and v["channels_last"] is False and v["optimizer_impl"] == "fused"


def test_variable_shapes_and_non_conv_models_skip_benchmark():
    assert values(plan_fast_path("cuda", (9, 0), variable_input_shapes=True))["cudnn_benchmark"] is False
    v = values(plan_fast_path("cuda", (9, 0), conv_model=False))
    assert v["cudnn_benchmark"] is False and v["channels_last"] is False and v["tf32"] is True


def test_every_decision_has_a_reason_and_bad_device_raises():
    for d in plan_fast_path("mps").values():
        assert isinstance(d.why, str) and len(d.why) > 10
    with pytest.raises(ValueError):
        plan_fast_path("tpu")


def test_apply_on_cpu_changes_no_global_flag():
    before = fast_path_flags()
    report = apply_fast_path("cpu")
    assert fast_path_flags() == before
    assert not any(r["applied"] for r in report.values())
    assert report["tf32"]["value"] is False


def test_snapshot_restore_round_trip():
    before = fast_path_flags()
    try:
        torch.backends.cudnn.benchmark = not before["cudnn.benchmark"]
        torch.set_float32_matmul_precision("high")
        assert fast_path_flags() != before
    finally:
        restore_fast_path_flags(before)
    assert fast_path_flags() == before


def test_optimizer_kwargs_build_a_working_optimizer_on_cpu():
    assert optimizer_kwargs("cuda") == {"fused": True} and optimizer_kwargs("mps") == {"foreach": True}
    kw = optimizer_kwargs("cpu")
    p = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.AdamW([p], lr=0.1, **kw)
    p.grad = torch.ones(3)
    opt.step()
    assert torch.all(p < 1)

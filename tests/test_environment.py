"""utils.environment and utils.seeding: device choice, smoke mode, the report, seeding."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from utils import environment as env
from utils.seeding import make_generator, seed_everything


def test_auto_picks_an_available_device():
    dev = env.pick_device("auto")
    if torch.cuda.is_available():
        assert dev.type == "cuda"
    elif torch.backends.mps.is_available():
        assert dev.type == "mps"
    else:
        assert dev == torch.device("cpu")


def test_cpu_is_always_available_and_case_insensitive():
    assert env.pick_device(" CPU ") == torch.device("cpu")
    assert env.pick_device(torch.device("cpu")) == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_says_what_to_do():
    with pytest.raises(env.DeviceUnavailableError, match="DEVICE='auto'"):
        env.pick_device("cuda")
    with pytest.raises(env.DeviceUnavailableError):
        env.pick_device("cuda:1")


def test_hidden_gpus_are_named_in_the_error(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(env.DeviceUnavailableError, match="hides every GPU"):
        env.pick_device("cuda")


def test_cuda_index_beyond_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert env.pick_device("cuda") == torch.device("cuda", 0)
    with pytest.raises(env.DeviceUnavailableError, match="only 1 GPU"):
        env.pick_device("cuda:1")


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="needs a machine without MPS")
def test_mps_without_mps():
    with pytest.raises(env.DeviceUnavailableError, match="Apple"):
        env.pick_device("mps")


def test_unknown_device_is_a_value_error():
    with pytest.raises(ValueError, match="auto"):
        env.pick_device("tpu0")
    with pytest.raises(ValueError):
        env.pick_device("xpu")


def test_cuda_visible_devices_empty_hides_gpus_in_a_fresh_process():
    code = "import torch; print(torch.cuda.device_count())"
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, CUDA_VISIBLE_DEVICES=""),
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "0"


def test_smoke_mode_sources(monkeypatch):
    for var in env.SMOKE_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    assert env.smoke_mode(False) is False
    assert env.smoke_mode(True) is True
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert env.smoke_mode(False) is True
    monkeypatch.delenv("NBGRADER_EXECUTION")
    monkeypatch.setenv("BOOTCAMP_SMOKE", "0")
    assert env.smoke_mode(False) is False
    monkeypatch.setenv("BOOTCAMP_SMOKE", "1")
    assert env.smoke_mode(False) is True


def test_course_run_picks_sizes_by_mode(monkeypatch):
    cpu = env.CourseRun(torch.device("cpu"), smoke=False, seed=0)
    assert cpu.pick(smoke=1, cpu=2, gpu=3) == 2
    assert env.CourseRun(torch.device("cpu"), smoke=True, seed=0).pick(smoke=1, cpu=2, gpu=3) == 1
    assert env.CourseRun(torch.device("cuda", 0), smoke=False, seed=0).pick(smoke=1, cpu=2, gpu=3) == 3
    assert env.CourseRun(torch.device("cuda", 0), smoke=True, seed=0).mode == "smoke"


def test_course_setup_prints_banner_and_seeds(capsys, monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("BOOTCAMP_SMOKE", raising=False)
    run = env.course_setup(smoke=True, device="cpu", seed=3)
    assert run.smoke and run.device == torch.device("cpu") and run.seed == 3
    a = torch.rand(3)
    env.course_setup(smoke=True, device="cpu", seed=3, quiet=True)
    assert torch.equal(a, torch.rand(3))
    assert "device=cpu" in capsys.readouterr().out


def test_environment_report_is_complete():
    r = env.environment_report()
    assert r.torch == torch.__version__
    assert r.python.count(".") == 2
    assert r.cpu_count_logical >= 1
    assert r.cuda_available == torch.cuda.is_available()
    assert len(r.gpus) == (torch.cuda.device_count() if r.cuda_available else 0)
    text = r.summary()
    for word in ("Python", "torch", "cuDNN", "CUDA_VISIBLE_DEVICES", "CPU"):
        assert word in text
    assert r.as_dict()["torch"] == torch.__version__


def test_gpu_info_capabilities():
    ampere = env.GPUInfo(0, "A100", 80 * 2**30, (8, 0), 108)
    volta = env.GPUInfo(0, "V100", 32 * 2**30, (7, 0), 80)
    assert ampere.supports_bf16 and ampere.supports_tf32
    assert not volta.supports_bf16 and not volta.supports_tf32


def test_hardware_label_names_the_device():
    assert env.hardware_label("cpu").startswith("cpu (")
    assert torch.__version__ in env.hardware_label("cpu")


def test_seed_everything_repeats_and_validates():
    seed_everything(7)
    a = (torch.rand(4), __import__("numpy").random.rand(2))
    seed_everything(7)
    b = (torch.rand(4), __import__("numpy").random.rand(2))
    assert torch.equal(a[0], b[0]) and (a[1] == b[1]).all()
    with pytest.raises(ValueError):
        seed_everything(-1)


def test_deterministic_mode_toggles_torch_flags():
    seed_everything(0, deterministic=True)
    try:
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    finally:
        seed_everything(0, deterministic=False)
    assert not torch.are_deterministic_algorithms_enabled()


def test_make_generator_is_independent_of_global_rng():
    g1, g2 = make_generator(5), make_generator(5)
    torch.rand(10)  # consuming the global RNG must not matter
    assert torch.equal(torch.randperm(10, generator=g1), torch.randperm(10, generator=g2))

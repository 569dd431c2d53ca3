"""The low layers: utils.device (which device), utils.environment (the report), utils.course (notebook start-up)
and utils.seeding. GPUs are simulated with monkeypatch, so every branch runs on a CPU-only machine."""
from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import utils.device
from utils.course import CourseRun, course_setup, smoke_mode
from utils.device import DeviceUnavailableError, pick_device, synchronize
from utils.environment import GPUInfo, environment_report, hardware_label
from utils.seeding import make_generator, seed_everything


@pytest.fixture
def fake_gpus(monkeypatch):
    """Make torch report ``n`` visible CUDA GPUs (the current one is 0); returns the setter."""
    def install(n: int, current: int = 0) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: current)
    return install


# --------------------------------------------------------------------------------------------------- device
def test_auto_prefers_cuda_then_mps_then_cpu(fake_gpus, monkeypatch):
    fake_gpus(2, current=1)
    assert pick_device("auto") == torch.device("cuda", 1)      # the current GPU, not always cuda:0
    fake_gpus(0)
    monkeypatch.setattr(utils.device, "mps_available", lambda: True)
    assert pick_device("AUTO ") == torch.device("mps")
    monkeypatch.setattr(utils.device, "mps_available", lambda: False)
    assert pick_device("auto") == torch.device("cpu")
    assert pick_device(torch.device("cpu")) == torch.device("cpu")


def test_cuda_without_a_visible_gpu_says_what_to_do(fake_gpus, monkeypatch):
    fake_gpus(0)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(DeviceUnavailableError, match="DEVICE='auto'") as info:
        pick_device("cuda")
    assert "hides every GPU" not in str(info.value)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(DeviceUnavailableError, match="hides every GPU"):
        pick_device("cuda:0")


def test_cuda_index_counts_only_visible_gpus(fake_gpus, monkeypatch):
    fake_gpus(2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert pick_device("cuda") == torch.device("cuda", 0)
    assert pick_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(DeviceUnavailableError, match=r"only 2 GPU.*cuda:0\.\.cuda:1"):
        pick_device("cuda:4")                                   # physical id 4 is visible as cuda:0
    assert pick_device(1) == torch.device("cuda", 1)           # an index means a GPU, as in torch.device(1)
    fake_gpus(0)
    with pytest.raises(DeviceUnavailableError):
        pick_device(0)                                          # not "no preference": GPU 0 is not there
    with pytest.raises(TypeError, match="GPU index"):
        pick_device(0.5)


def test_mps_and_unknown_devices(monkeypatch):
    monkeypatch.setattr(utils.device, "mps_available", lambda: False)
    with pytest.raises(DeviceUnavailableError, match="Apple"):
        pick_device("mps")
    with pytest.raises(ValueError, match="'auto'"):
        pick_device("tpu0")
    with pytest.raises(ValueError, match="not supported"):
        pick_device("xpu")


def test_synchronize_waits_only_on_accelerators(monkeypatch):
    waited = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda dev=None: waited.append(dev))
    synchronize("cpu")
    assert waited == []
    synchronize("cuda:1")
    assert waited == [torch.device("cuda", 1)]


@pytest.mark.slow
def test_empty_cuda_visible_devices_hides_gpus_from_a_fresh_process():
    code = ("from utils.device import pick_device, DeviceUnavailableError\n"
            "print(pick_device('auto').type)\n"
            "try:\n    pick_device('cuda')\nexcept DeviceUnavailableError as e:\n    print('hides every GPU' in str(e))\n")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, CUDA_VISIBLE_DEVICES=""),
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.split() in (["cpu", "True"], ["mps", "True"]), out.stderr[-2000:]


# --------------------------------------------------------------------------------------------------- report
def test_report_lists_every_visible_gpu_and_decodes_cudnn(fake_gpus, monkeypatch):
    fake_gpus(2)
    props = [SimpleNamespace(name="NVIDIA A100", total_memory=80 * 2**30, major=8, minor=0, multi_processor_count=108),
             SimpleNamespace(name="Tesla V100", total_memory=32 * 2**30, major=7, minor=0, multi_processor_count=80)]
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props[i])
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 90100)
    monkeypatch.setattr("utils.environment.driver_version", lambda: "570.1")
    report = environment_report()
    assert [g.name for g in report.gpus] == ["NVIDIA A100", "Tesla V100"]
    assert report.cudnn == "9.1.0" and report.driver == "570.1"
    text = report.summary()
    assert "GPU 0         NVIDIA A100, 80.0 GiB, sm_80, 108 SMs, bf16=True" in text
    assert "Tesla V100, 32.0 GiB, sm_70, 80 SMs, bf16=False" in text
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 8907)  # cuDNN 8 encodes major * 1000
    assert environment_report().cudnn == "8.9.7"


def test_report_without_gpus_says_none(fake_gpus):
    fake_gpus(0)
    report = environment_report()
    assert report.gpus == [] and report.cudnn is None and not report.cuda_available
    assert report.as_dict()["torch"] == torch.__version__
    assert "CUDA usable   False" in report.summary()


def test_gpu_capabilities_start_at_ampere():
    assert GPUInfo(0, "A10", 24 * 2**30, (8, 6), 72).supports_bf16
    assert not GPUInfo(0, "T4", 16 * 2**30, (7, 5), 40).supports_tf32


def test_hardware_label_names_the_device(monkeypatch):
    assert hardware_label("cpu").startswith(f"cpu ({torch.get_num_threads()} threads")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: f"GPU number {i}")
    assert hardware_label("cuda:3") == f"cuda:3 GPU number 3, torch {torch.__version__}"
    monkeypatch.setattr(torch.backends.mps, "get_name", lambda: "Apple M2 Pro")
    monkeypatch.setattr(torch.backends.mps, "get_core_count", lambda: 19)
    assert hardware_label("mps").startswith("mps Apple M2 Pro (19 GPU cores, ")


# --------------------------------------------------------------------------------------------------- course
def test_smoke_mode_sources(monkeypatch):
    for var in ("NBGRADER_EXECUTION", "BOOTCAMP_SMOKE"):
        monkeypatch.delenv(var, raising=False)
    assert smoke_mode(False) is False and smoke_mode(True) is True
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert smoke_mode(False) is True
    monkeypatch.delenv("NBGRADER_EXECUTION")
    for off in ("0", "false", "False", "off", ""):
        monkeypatch.setenv("BOOTCAMP_SMOKE", off)
        assert smoke_mode(False) is False, off
    monkeypatch.setenv("BOOTCAMP_SMOKE", "1")
    assert smoke_mode(False) is True


def test_course_run_picks_sizes_by_mode():
    sizes = dict(smoke=1, cpu=2, gpu=3)
    assert CourseRun(torch.device("cpu"), smoke=False, seed=0).pick(**sizes) == 2
    assert CourseRun(torch.device("mps"), smoke=False, seed=0).pick(**sizes) == 2     # laptops get CPU sizes
    assert CourseRun(torch.device("cuda", 0), smoke=False, seed=0).pick(**sizes) == 3
    assert CourseRun(torch.device("cuda", 0), smoke=True, seed=0).pick(**sizes) == 1  # smoke wins over the GPU


def test_course_setup_prints_one_banner_and_seeds(capsys, monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setenv("BOOTCAMP_SMOKE", "1")
    run = course_setup(smoke=False, device="cpu", seed=3)
    a = torch.rand(3)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and "device=cpu mode=smoke seed=3" in lines[0] and torch.__version__ in lines[0]
    assert run.smoke and run.seed == 3
    course_setup(device="cpu", seed=3, quiet=True)
    assert torch.equal(a, torch.rand(3)) and capsys.readouterr().out == ""
    course_setup(device="cpu", seed=4, quiet=True)
    assert not torch.equal(a, torch.rand(3))


def test_course_setup_refuses_a_missing_gpu(fake_gpus):
    fake_gpus(0)
    with pytest.raises(DeviceUnavailableError):
        course_setup(device="cuda", quiet=True)


# --------------------------------------------------------------------------------------------------- seeding
def test_seed_everything_repeats_and_validates():
    seed_everything(7)
    a = (torch.rand(4), np.random.rand(2))
    seed_everything(7)
    b = (torch.rand(4), np.random.rand(2))
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


def test_cudnn_version_is_text_also_without_a_gpu(monkeypatch):
    # Day 01's claim check prints it on a CPU machine with a CUDA wheel: "9.24.0", never the raw integer 92400.
    from utils.environment import cudnn_version

    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 92400)
    assert cudnn_version() == "9.24.0"
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 8500)
    assert cudnn_version() == "8.5.0"
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: False)
    assert cudnn_version() is None


def _fake_topology(root, cpus: dict[int, tuple[int, int]]):
    """A sysfs CPU tree: logical CPU -> (package, core)."""
    for cpu, (package, core) in cpus.items():
        topology = root / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(f"{package}\n")
        (topology / "core_id").write_text(f"{core}\n")
    return root


def test_physical_cores_count_each_core_once_on_a_hyper_threaded_node(tmp_path):
    from utils.environment import physical_cores_of

    # two sockets of two cores, two hardware threads each, numbered as Linux numbers them: the second thread of every
    # core comes after all the first ones (cpu4 is core 0's sibling of cpu0); core ids repeat across sockets
    topology = {0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, 1), 4: (0, 0), 5: (0, 1), 6: (1, 0), 7: (1, 1)}
    sysfs = _fake_topology(tmp_path, topology)
    assert physical_cores_of(range(8), sysfs=sysfs) == 4, "8 logical CPUs on 4 cores"
    assert physical_cores_of([0, 4], sysfs=sysfs) == 1, "two threads of one core: one core"
    assert physical_cores_of([0, 2], sysfs=sysfs) == 2, "core 0 of each socket: two cores, not one"
    assert physical_cores_of([0, 1, 4, 5], sysfs=sysfs) == 2, "a taskset of one socket's threads"
    assert physical_cores_of([0, 9], sysfs=sysfs) is None, "a CPU without topology: unknown, not a guess"
    assert physical_cores_of([], sysfs=sysfs) is None


def test_usable_cpus_is_this_process_affinity():
    import os

    from utils.environment import usable_cpus

    cpus = usable_cpus()
    assert cpus and len(cpus) <= (os.cpu_count() or 1)
    if hasattr(os, "sched_getaffinity"):
        assert set(cpus) == os.sched_getaffinity(0)

"""tools/torch_build.py: which PyTorch build `make setup` installs for a driver, and the pip commands for it.

PyTorch's index is unreachable from CI, so the commands are checked as argv lists, not run; the machine is
simulated (nvidia-smi's output, the platform).
"""
from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import re
import subprocess
import sys

import pytest
from packaging.requirements import Requirement

from conftest import ROOT

spec = importlib.util.spec_from_file_location("torch_build", ROOT / "tools" / "torch_build.py")
tb = importlib.util.module_from_spec(spec)
sys.modules["torch_build"] = tb
spec.loader.exec_module(tb)

LOCK_LINES = tb.LOCK.read_text().splitlines()
CU130 = (13, 0)

SMI_550 = """\
Tue Mar  4 10:00:00 2025
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
|   0  NVIDIA A10G                    On  |   00000000:00:1E.0 Off |                    0 |
"""


def gpu(driver: str, cuda: tuple | None, *caps: tuple, arch: str = "x86_64") -> tb.Machine:
    return tb.Machine("Linux", arch, driver, cuda, tuple(caps), note="")


def never_called() -> bool:
    raise AssertionError("the index was probed although the decision did not need it")


# ---------------------------------------------------------------- reading the machine
def test_smi_header_gives_driver_and_cuda_version():
    assert tb.parse_smi_header(SMI_550) == ("550.54.15", (12, 4))
    assert tb.parse_smi_header("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.") \
        == (None, None)


def test_compute_caps_one_per_gpu_skipping_noise():
    assert tb.parse_compute_caps("8.6\n8.6\n") == ((8, 6), (8, 6))
    assert tb.parse_compute_caps("[N/A]\n12.0\n") == ((12, 0),)


@pytest.mark.parametrize("driver, cuda", [("470.256.02", None), ("525.60.13", (12, 0)), ("575.57.08", (12, 0)),
                                          ("580.65.06", (13, 0)), ("595.71.05", (13, 0))])
def test_driver_version_alone_gives_the_cuda_major_it_supports(driver, cuda):
    assert tb.cuda_from_driver(driver) == cuda


def fake_smi(header: str, caps: str = "", rc: int = 0):
    def run(cmd, **kwargs):
        out = caps if any("compute_cap" in c for c in cmd) else header
        return subprocess.CompletedProcess(cmd, rc, out, "")
    return run


def test_detect_machine_reads_nvidia_smi(monkeypatch):
    monkeypatch.setattr(tb.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    m = tb.detect_machine(fake_smi(SMI_550, "8.6\n"))
    assert (m.driver, m.driver_cuda, m.compute_caps, m.has_nvidia_gpu) == ("550.54.15", (12, 4), ((8, 6),), True)
    # a header without "CUDA Version" (very old nvidia-smi): the driver number decides
    m = tb.detect_machine(fake_smi("| Driver Version: 575.57.08 |", "7.5\n"))
    assert m.driver_cuda == (12, 0)


def test_nvidia_smi_that_fails_means_no_usable_gpu(monkeypatch):
    monkeypatch.setattr(tb.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    m = tb.detect_machine(fake_smi("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
                                   rc=9))
    assert not m.has_nvidia_gpu and "couldn't communicate" in m.note
    monkeypatch.setattr(tb.shutil, "which", lambda name: None)
    monkeypatch.setattr(tb.os.path, "exists", lambda path: False)
    assert not tb.detect_machine(fake_smi(SMI_550)).has_nvidia_gpu


# ---------------------------------------------------------------- driver -> build
@pytest.mark.parametrize("machine, build", [
    (gpu("580.65.06", (13, 0), (8, 0)), "default"),            # A100 on a CUDA 13 driver: the lock
    (gpu("590.44.01", (13, 1), (12, 0)), "default"),           # RTX 50xx: sm_120 is in the CUDA 13 builds
    (gpu("550.54.15", (12, 4), (8, 6)), "cu126"),              # the issue: a 550 driver cannot run CUDA 13
    (gpu("525.60.13", (12, 0), (7, 5)), "cu126"),              # oldest CUDA 12 driver (minor version compat.)
    (gpu("580.65.06", (13, 0), (6, 1)), "cu126"),              # Pascal: no kernels in CUDA 13 builds
    (gpu("580.65.06", (13, 0), (7, 0), (8, 0)), "cu126"),      # V100 next to an A100: both must work
    (gpu("570.86.10", (12, 8), (12, 0)), "cpu"),               # Blackwell on a CUDA 12 driver: no build fits
    (gpu("470.256.02", (11, 4), (8, 6)), "cpu"),               # CUDA 11 driver: too old for torch 2.14
    (gpu("550.54.15", (12, 4), (3, 7)), "cpu"),                # K80: no build has kernels for it
    (gpu("580.65.06", (13, 0), (9, 0), arch="aarch64"), "default"),   # GH200
    (gpu("540.4.0", (12, 6), (8, 7), arch="aarch64"), "cu126"),       # Jetson-class 8.7 runs the sm_80 kernels
])
def test_driver_to_build(machine, build):
    choice = tb.detect_build(machine, CU130, ci=False, reachable=never_called)
    assert choice.build == build, choice.reason


def test_reasons_name_the_driver_and_what_to_do():
    old = tb.detect_build(gpu("550.54.15", (12, 4), (8, 6)), CU130, ci=False, reachable=never_called)
    assert "550.54.15" in old.reason and "580" in old.reason and "12.6" in old.reason
    pascal = tb.detect_build(gpu("580.65.06", (13, 0), (6, 1)), CU130, ci=False, reachable=never_called)
    assert "6.1" in pascal.reason
    too_old = tb.detect_build(gpu("470.256.02", (11, 4), (8, 6)), CU130, ci=False, reachable=never_called)
    assert "525" in too_old.reason and "TORCH=auto" in too_old.reason
    blackwell = tb.detect_build(gpu("570.86.10", (12, 8), (12, 0)), CU130, ci=False, reachable=never_called)
    assert "12.0" in blackwell.reason and "580+" in blackwell.reason


def test_no_gpu_gets_the_cpu_build_when_pytorchs_index_answers():
    cpu_box = tb.Machine("Linux", "x86_64")
    assert tb.detect_build(cpu_box, CU130, ci=False, reachable=lambda: True).build == "cpu"
    offline = tb.detect_build(cpu_box, CU130, ci=False, reachable=lambda: False)
    assert offline.build == "default" and "unreachable" in offline.reason


def test_ci_installs_exactly_the_lock_without_probing():
    for machine in (tb.Machine("Linux", "x86_64"), gpu("550.54.15", (12, 4), (8, 6))):
        assert tb.detect_build(machine, CU130, ci=True, reachable=never_called).build == "default"


def test_macos_and_windows():
    assert tb.detect_build(tb.Machine("Darwin", "aarch64"), CU130, ci=False, reachable=never_called).build == "default"
    with pytest.raises(tb.SetupError, match="Intel Macs"):
        tb.detect_build(tb.Machine("Darwin", "x86_64"), CU130, ci=False, reachable=never_called)
    with pytest.raises(tb.SetupError, match="WSL2"):
        tb.detect_build(tb.Machine("Windows", "x86_64"), CU130, ci=False, reachable=never_called)
    with pytest.raises(tb.SetupError, match="Linux"):
        tb.choose("cpu", tb.Machine("Darwin", "aarch64"), tensorrt=False, installed=None, default_cuda=CU130)


# ---------------------------------------------------------------- TORCH= and what is installed
def test_unset_torch_replaces_an_installed_build_the_driver_cannot_run():
    choice = tb.choose("", gpu("550.54.15", (12, 4), (8, 6)), tensorrt=False, installed="default",
                       default_cuda=CU130, reachable=never_called)
    assert choice.build == "cu126"


def test_unset_torch_keeps_a_working_build_and_never_goes_online_for_it():
    kept = tb.choose("", tb.Machine("Linux", "x86_64"), tensorrt=False, installed="default", default_cuda=CU130,
                     reachable=never_called)
    assert kept.build == "default"
    kept = tb.choose("", gpu("580.65.06", (13, 0), (8, 0)), tensorrt=False, installed="cu126", default_cuda=CU130,
                     reachable=never_called)
    assert kept.build == "cu126" and "TORCH=auto" in kept.reason
    cpu_on_gpu = tb.choose("", gpu("580.65.06", (13, 0), (8, 0)), tensorrt=False, installed="cpu",
                           default_cuda=CU130, reachable=never_called)
    assert cpu_on_gpu.build == "cpu" and "does not use the NVIDIA GPU" in cpu_on_gpu.reason


def test_torch_auto_redetects_and_explicit_builds_win():
    machine = gpu("580.65.06", (13, 0), (8, 0))
    assert tb.choose("auto", machine, tensorrt=False, installed="cu126", default_cuda=CU130).build == "default"
    assert tb.choose("cu132", machine, tensorrt=False, installed=None, default_cuda=CU130).build == "cu132"
    assert tb.choose(" CPU ", machine, tensorrt=False, installed=None, default_cuda=CU130).build == "cpu"
    assert tb.choose("cu130", machine, tensorrt=False, installed=None, default_cuda=CU130).build == "default"


@pytest.mark.parametrize("request_, message", [("cu128", "no CUDA 12.8 build"), ("cuda", "not a build")])
def test_unknown_builds_are_refused_with_the_valid_ones(request_, message):
    with pytest.raises(tb.SetupError, match=message) as e:
        tb.choose(request_, tb.Machine("Linux", "x86_64"), tensorrt=False, installed=None, default_cuda=CU130)
    assert "cu126" in str(e.value)


def test_tensorrt_only_with_a_gpu_and_the_locks_cuda_13_build():
    with pytest.raises(tb.SetupError, match="needs an NVIDIA GPU"):
        tb.choose("", tb.Machine("Linux", "x86_64"), tensorrt=True, installed="default", default_cuda=CU130)
    with pytest.raises(tb.SetupError, match="cu126"):
        tb.choose("", gpu("550.54.15", (12, 4), (8, 6)), tensorrt=True, installed=None, default_cuda=CU130,
                  reachable=never_called)
    ok = tb.choose("", gpu("580.65.06", (13, 0), (8, 9)), tensorrt=True, installed=None, default_cuda=CU130)
    assert ok.build == "default" and ok.tensorrt and "TensorRT" in ok.line()


def test_unset_tensorrt_keeps_an_installed_tensorrt_while_the_build_fits():
    fits = gpu("580.65.06", (13, 0), (8, 0))
    kept = tb.choose("", fits, tensorrt=None, installed="default", default_cuda=CU130, tensorrt_installed=True)
    assert kept.tensorrt
    assert not tb.choose("", fits, tensorrt=None, installed="default", default_cuda=CU130).tensorrt
    assert not tb.choose("", fits, tensorrt=False, installed="default", default_cuda=CU130,
                         tensorrt_installed=True).tensorrt
    moved = tb.choose("cu126", fits, tensorrt=None, installed="default", default_cuda=CU130, tensorrt_installed=True)
    assert not moved.tensorrt and "TensorRT is removed" in moved.reason


# ---------------------------------------------------------------- the lock and the pip commands
def lock_names(lines: list) -> set:
    return {Requirement(line.split(";")[0]).name.lower().replace("_", "-")
            for line in lines if line.strip() and not line.startswith("#")}


def test_lock_without_torch_removes_exactly_the_torch_wheels_cuda_stack():
    removed = lock_names(LOCK_LINES) - lock_names(tb.lock_without_torch(LOCK_LINES))
    needed_by_installed_torch = tb.torch_stack_closure(metadata.requires)
    assert removed == needed_by_installed_torch & lock_names(LOCK_LINES)
    assert {"nvidia-ml-py", "torchmetrics", "numpy"} <= lock_names(tb.lock_without_torch(LOCK_LINES))


def test_lock_readers_agree_with_the_installed_wheel():
    # torch/version.py, read rather than imported (importing torch takes seconds)
    version_py = metadata.distribution("torch").locate_file("torch/version.py").read_text()
    wheel_cuda = re.search(r"^cuda: .*= '(\d+)\.(\d+)", version_py, re.M).groups()
    assert tb.lock_pin(LOCK_LINES, "torch") == metadata.version("torch").partition("+")[0]
    assert tb.lock_cuda(LOCK_LINES) == tuple(int(x) for x in wheel_cuda)
    assert tb.lock_cuda(["numpy==2.0.0"]) is None
    with pytest.raises(tb.SetupError, match="pins no jax"):
        tb.lock_pin(LOCK_LINES, "jax")


def test_installed_build_from_the_version_string():
    assert tb.installed_build("2.14.1+cu130") == "default", "PyTorch's own index spells the lock's build +cu130"
    assert [tb.installed_build(v) for v in ("2.14.1", "2.14.1+cu126", "2.14.1+cpu", None)] == \
        ["default", "cu126", "cpu", None]


def commands(build: str, *, installed=None, tensorrt=False) -> list:
    return tb.install_commands(tb.Choice(build, "test", tensorrt=tensorrt), python="py", lock_lines=LOCK_LINES,
                               no_torch_lock="no-torch.txt", installed=installed,
                               tensorrt_reqs=["torch-tensorrt==2.14.0"])


def test_default_build_installs_the_lock_and_nothing_else():
    assert commands("default") == [["py", "-m", "pip", "install", "--progress-bar", "off",
                                    "--disable-pip-version-check", "-r", str(tb.LOCK)]]
    assert commands("default", installed="default") == commands("default")


def test_other_builds_come_from_pytorchs_index_with_the_rest_of_the_lock():
    torch_v, vision_v = tb.lock_pin(LOCK_LINES, "torch"), tb.lock_pin(LOCK_LINES, "torchvision")
    for build in ("cu126", "cu132", "cpu"):
        for installed in (None, "default", build):
            (cmd,) = commands(build, installed=installed)      # one pip run; nothing removed before it
            assert cmd[:4] == ["py", "-m", "pip", "install"]
            assert cmd[cmd.index("-r") + 1] == "no-torch.txt"
            assert cmd[cmd.index("--extra-index-url") + 1] == f"https://download.pytorch.org/whl/{build}"
            pins = {Requirement(a).name: Requirement(a) for a in cmd if a.startswith("torch")}
            # the local tag makes pip replace an installed plain 2.14.1 (and only the tagged wheel matches)
            assert pins["torch"].specifier.contains(f"{torch_v}+{build}")
            assert not pins["torch"].specifier.contains(torch_v)
            assert pins["torchvision"].specifier.contains(f"{vision_v}+{build}")


def test_back_to_the_default_build_reinstalls_torch_from_pypi():
    # pip counts an installed 2.14.1+cu126 as satisfying torch==2.14.1: without this it would keep the cu126 build
    lock_install, reinstall = commands("default", installed="cu126")
    assert lock_install[-2:] == ["-r", str(tb.LOCK)]
    assert "--force-reinstall" in reinstall and "--no-deps" in reinstall and "--extra-index-url" not in reinstall
    assert Requirement(next(a for a in reinstall if a.startswith("torch=="))).specifier.contains("2.14.1+cu126")


def fake_requires(graph: dict):
    return lambda name: graph.get(name)


def test_stack_closure_follows_extras_and_markers():
    graph = {"torch": ['cuda-toolkit[cublas]==13.0.3; platform_system == "Linux"', "nvidia-nccl-cu13==2.30.7",
                       'triton==3.8.0; python_version < "3.0"', "sympy>=1.13"],
             "torchvision": ["torch==2.14.1", "numpy"],
             "cuda-toolkit": ['nvidia-cublas==13.1.1.3; extra == "cublas"',
                              'nvidia-cufft==12.0.0.61; extra == "cufft"']}
    needed = tb.torch_stack_closure(fake_requires(graph))
    assert needed == {"torch", "torchvision", "cuda-toolkit", "nvidia-cublas", "nvidia-nccl-cu13"}


def test_stale_packages_are_the_old_builds_leftovers():
    before = ["torch", "torchvision", "triton", "nvidia-cublas", "nvidia_nccl_cu13", "torch-tensorrt", "tensorrt-cu13"]
    needed_cu126 = {"torch", "torchvision", "triton", "nvidia-cublas-cu12", "nvidia-nccl-cu12"}
    assert tb.stale_packages(before, needed_cu126, tensorrt=False) == \
        ["nvidia-cublas", "nvidia-nccl-cu13", "tensorrt-cu13", "torch-tensorrt"]
    needed_default = {"torch", "torchvision", "triton", "nvidia-cublas", "nvidia-nccl-cu13"}
    assert tb.stale_packages(before, needed_default, tensorrt=True) == []


def test_tensorrt_is_installed_last_without_moving_torch():
    cmds = commands("default", tensorrt=True)
    last = cmds[-1]
    assert f"torch=={tb.lock_pin(LOCK_LINES, 'torch')}" in last and "torch-tensorrt==2.14.0" in last
    assert "https://pypi.nvidia.com" in last


def test_tensorrt_extra_matches_the_locked_torch():
    reqs = {Requirement(r).name: Requirement(r) for r in tb.tensorrt_requirements(tb.PYPROJECT.read_text())}
    torch_mm = tb.lock_pin(LOCK_LINES, "torch").split(".")[:2]
    (trt_version,) = [s.version for s in reqs["torch-tensorrt"].specifier]
    assert trt_version.split(".")[:2] == torch_mm, "torch-tensorrt X.Y is built for torch X.Y"
    assert any(name.startswith("tensorrt-cu13") for name in reqs), "the lock's torch is a CUDA 13 build"


# ---------------------------------------------------------------- Python version and the command line
def test_the_tool_parses_on_old_pythons_so_it_can_tell_them_to_upgrade():
    import ast
    ast.parse((ROOT / "tools" / "torch_build.py").read_text(), feature_version=(3, 8))


def test_python_check_follows_pyproject():
    minimum = tb.requires_python(tb.PYPROJECT.read_text())
    tb.check_python(sys.version_info, minimum)
    older = (minimum[0], minimum[1] - 1, 0)
    with pytest.raises(tb.SetupError, match=".".join(map(str, minimum))):
        tb.check_python(older, minimum)
    assert tb.requires_python('requires-python = ">=3.11"') == (3, 11, 0)


def test_choose_rewrites_its_file_only_when_the_answer_changes(tmp_path, monkeypatch, capsys):
    # make reinstalls when .venv/.torch-build is newer than the stamp: an unchanged answer must not touch it
    monkeypatch.setattr(tb, "detect_machine", lambda: gpu("550.54.15", (12, 4), (8, 6)))
    monkeypatch.delenv("CI", raising=False)
    out = tmp_path / "choice"
    argv = ["choose", "--venv", str(tmp_path / "venv"), "--write", str(out)]
    assert tb.main(argv) == 0
    assert out.read_text() == "build=cu126\ntensorrt=0\n"
    assert "PyTorch build: cu126" in capsys.readouterr().out
    before = out.stat().st_mtime_ns
    assert tb.main(argv) == 0 and out.stat().st_mtime_ns == before
    assert tb.main([*argv, "--torch", "cpu"]) == 0 and out.read_text() == "build=cpu\ntensorrt=0\n"
    assert tb.main([*argv, "--tensorrt", "1"]) == 2
    assert "TENSORRT=1 needs the lock's CUDA 13.0 build" in capsys.readouterr().err


def test_first_setup_disk_figure_is_the_cpu_one_on_a_mac_whose_default_build_has_no_cuda_libraries():
    assert tb.disk_gb("default", platform="linux") == tb.DISK_GB["default"] > tb.DISK_GB["cpu"]
    assert tb.disk_gb("cu126", platform="linux") == tb.DISK_GB["cu126"]
    assert tb.disk_gb("default", platform="darwin") == tb.DISK_GB["cpu"]
    # The lock's CUDA wheels are Linux-only, which is why a Mac's default build is CPU-sized.
    cuda_lines = [line for line in LOCK_LINES if line.startswith(("nvidia-", "cuda-"))
                  and not line.startswith("nvidia-ml-py")]  # NVML's Python bindings: pure Python, every platform
    assert cuda_lines and all('platform_system == "Linux"' in line for line in cuda_lines)

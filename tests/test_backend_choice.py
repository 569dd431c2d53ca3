"""utils.backend_choice: NCCL on multi-GPU nodes, and where nn.DataParallel needs its module, simulated on the CPU.

The DataParallel tests run torch's own ``DataParallel`` code with its device discovery replaced (one or two CUDA
devices), so they reproduce on a CPU the two crashes of a CPU model wrapped on a CUDA machine: with one GPU
``__init__`` moves the caller's module to ``cuda:0`` (so ``model(cpu_input)`` then fails), with two or more
``forward`` refuses a module that is not on ``device_ids[0]``.
"""
from __future__ import annotations

import importlib
from unittest import mock

import pytest
import torch
from torch import nn

from utils.backend_choice import collective_backend, data_parallel_device

data_parallel = importlib.import_module("torch.nn.parallel.data_parallel")


@pytest.mark.parametrize("gpus, nccl, expected", [(0, True, "gloo"), (1, True, "gloo"), (2, True, "nccl"),
                                                   (8, True, "nccl"), (4, False, "gloo")])
def test_nccl_only_with_two_or_more_gpus(gpus, nccl, expected):
    assert collective_backend(gpus, nccl_available=nccl) == expected


def test_defaults_read_this_machine():
    with mock.patch.object(torch.cuda, "device_count", return_value=2), \
            mock.patch.object(torch.distributed, "is_nccl_available", return_value=True):
        assert collective_backend() == "nccl"
    with mock.patch.object(torch.cuda, "device_count", return_value=1):
        assert collective_backend() == "gloo"


class _RecordsMoves(nn.Linear):
    """A Linear that records where it is asked to move instead of moving (no GPU needed)."""

    def __init__(self):
        super().__init__(4, 2)
        self.moved_to: list[torch.device] = []

    def to(self, *args, **kwargs):
        self.moved_to.append(torch.device(args[0]))
        return self


def _wrap(device_ids: list[int]) -> tuple[_RecordsMoves, nn.DataParallel]:
    """Wrap a recording module with torch's DataParallel while its device discovery reports CUDA ``device_ids``
    (nothing else is faked: the constructor and forward are torch's own)."""
    with mock.patch.multiple(data_parallel, _get_available_device_type=mock.DEFAULT,
                             _get_all_device_indices=mock.DEFAULT, _check_balance=mock.DEFAULT) as patched:
        patched["_get_available_device_type"].return_value = "cuda"
        patched["_get_all_device_indices"].return_value = device_ids
        model = _RecordsMoves()
        return model, nn.DataParallel(model)


def test_one_gpu_dataparallel_moves_the_callers_module_to_cuda0():
    model, dp = _wrap([0])
    assert model.moved_to == [torch.device("cuda", 0)], "the old cell's model(x) then runs a GPU model on a CPU input"
    assert data_parallel_device(dp) == torch.device("cuda", 0)


@pytest.mark.parametrize("device_ids", [[0, 1], [2, 3, 4]])
def test_several_gpus_forward_refuses_a_module_off_device_ids0(device_ids):
    model, dp = _wrap(device_ids)
    assert model.moved_to == [], "with several GPUs __init__ does not move the module"
    home = data_parallel_device(dp)
    assert home == torch.device("cuda", device_ids[0])
    with pytest.raises(RuntimeError, match=rf"on device {home} \(device_ids\[0\]\)"):
        dp(torch.randn(3, 4))     # the real forward's check: a CPU module is refused, naming data_parallel_device


def test_without_gpus_dataparallel_calls_the_module_on_the_cpu():
    model = nn.Linear(4, 2)
    with mock.patch.object(data_parallel, "_get_available_device_type", return_value=None):
        dp = nn.DataParallel(model)
    assert dp.device_ids == [] and data_parallel_device(dp) == torch.device("cpu")
    x = torch.randn(3, 4)
    assert torch.equal(dp(x), model(x))


def test_mps_machines_get_no_devices_either():
    with mock.patch.object(data_parallel, "_get_available_device_type", return_value="mps"):
        dp = nn.DataParallel(nn.Linear(4, 2))
    assert data_parallel_device(dp) == torch.device("cpu")

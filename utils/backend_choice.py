"""Which collective backend, and which device, a data-parallel run uses on this machine.

Two choices that a notebook must make the same way on a laptop, on one GPU and on a multi-GPU node:

* :func:`collective_backend`: ``"nccl"`` when there are two or more CUDA GPUs (one process per GPU, so collectives
  travel over NVLink or PCIe between GPUs, which is what a benchmark of them should measure), ``"gloo"`` otherwise.
  NCCL needs one GPU per rank: two ranks on one GPU fail as soon as their NCCL communicator is created (NCCL
  reports a duplicate GPU), inside ``init_process_group`` when a ``device_id`` is bound (as
  :func:`utils.distributed.init_from_env` does), else at the first collective. So on one GPU, as on a CPU or a Mac,
  the ranks run on the CPU with gloo.
* :func:`data_parallel_device`: where ``nn.DataParallel`` needs the module it wraps. Its ``forward`` refuses a module
  whose parameters or buffers are not on ``device_ids[0]``, and with exactly one GPU its ``__init__`` moves the module
  there itself (``torch/nn/parallel/data_parallel.py``), so a model wrapped on the CPU must be moved to this device,
  and compared with inputs on it. Without a CUDA device (CPU, MPS) ``DataParallel`` keeps no devices and calls the
  module as it is: the answer is then the CPU.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

__all__ = ["collective_backend", "data_parallel_device"]


def collective_backend(device_count: int | None = None, *, nccl_available: bool | None = None) -> str:
    """``"nccl"`` with two or more CUDA GPUs and a torch built with NCCL, else ``"gloo"``.

    Args:
        device_count: CUDA GPUs visible to this process (default ``torch.cuda.device_count()``, which respects
            ``CUDA_VISIBLE_DEVICES``).
        nccl_available: whether this torch has NCCL (default ``torch.distributed.is_nccl_available()``).
    """
    count = torch.cuda.device_count() if device_count is None else device_count
    has_nccl = (dist.is_available() and dist.is_nccl_available()) if nccl_available is None else nccl_available
    return "nccl" if count >= 2 and has_nccl else "gloo"


def data_parallel_device(dp: nn.DataParallel) -> torch.device:
    """The device ``dp`` needs its module on: ``device_ids[0]`` of its device type, or the CPU when it has none."""
    if not dp.device_ids:
        return torch.device("cpu")
    return torch.device(dp.src_device_obj)

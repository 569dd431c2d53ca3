"""Devices: which one to run on, and how to wait for it. The lowest layer of ``utils``: it imports nothing from it.

:func:`pick_device` turns a notebook's ``DEVICE`` parameter into a ``torch.device`` (``"auto"``: cuda -> mps -> cpu)
and says what to do when the asked-for device is not there; :func:`synchronize` waits for queued GPU work, which
every timing needs.
"""
from __future__ import annotations

import os

import torch


class DeviceUnavailableError(RuntimeError):
    """A device was asked for that this machine (or this CUDA_VISIBLE_DEVICES) does not provide."""


def mps_available() -> bool:
    """True when Apple's Metal backend (MPS) can run tensors in this process."""
    return bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())


def pick_device(preference: str | int | torch.device = "auto") -> torch.device:
    """Choose the device to run on.

    ``"auto"`` takes the first that works of cuda -> mps -> cpu. CUDA respects ``CUDA_VISIBLE_DEVICES``: devices
    hidden by it do not exist for this process, and ``cuda:0`` is the first *visible* one. An integer ``N`` means
    ``cuda:N`` (``torch.device(N)`` itself names device N of the build's accelerator: ``mps:N`` on a Mac). Asking
    explicitly for a device that is not there raises :class:`DeviceUnavailableError` with what to do instead; a name
    that is not a device raises ``ValueError``.
    """
    if isinstance(preference, torch.device):
        preference = str(preference)
    elif isinstance(preference, int) and not isinstance(preference, bool):
        preference = f"cuda:{preference}"          # a GPU index; 0 must not read as "no preference"
    elif preference is not None and not isinstance(preference, str):
        raise TypeError(f"pick_device takes a device name such as 'auto', 'cpu', 'cuda:0' or 'mps', a GPU index or "
                        f"a torch.device, not {type(preference).__name__} {preference!r}")
    pref = (preference or "auto").strip().lower()
    if pref == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        if mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(pref)
    except RuntimeError as e:
        raise ValueError(f"Unknown device {preference!r}: use 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'.") from e
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda":
        return _checked_cuda(dev)
    if dev.type == "mps":
        if not mps_available():
            raise DeviceUnavailableError(
                "MPS (Apple GPU) was asked for, but it is not available here: it needs macOS 14 (Sonoma) or "
                "newer on Apple silicon (PyTorch 2.9 and later) and an arm64 build of torch. Use DEVICE='auto' to "
                "fall back to the CPU."
            )
        return dev
    raise ValueError(f"Device type {dev.type!r} is not supported by the course: use 'auto', 'cpu', 'cuda' or 'mps'.")


def _checked_cuda(dev: torch.device) -> torch.device:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not torch.cuda.is_available():
        hidden = visible is not None and visible.strip() in ("", "-1")
        hint = f" CUDA_VISIBLE_DEVICES={visible!r} hides every GPU from this process." if hidden else ""
        raise DeviceUnavailableError(
            f"CUDA was asked for, but this process sees no CUDA GPU (torch {torch.__version__}, built for CUDA "
            f"{torch.version.cuda or 'none: a CPU-only build'}).{hint} Use DEVICE='auto' to fall back to "
            "MPS or CPU, or run Day 01's checks: `nvidia-smi` on the host, the driver, and a CUDA build of torch."
        )
    count = torch.cuda.device_count()
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    if index >= count:
        raise DeviceUnavailableError(
            f"cuda:{index} was asked for, but only {count} GPU(s) are visible (CUDA_VISIBLE_DEVICES={visible!r}); "
            f"indices count visible devices from 0. Use cuda:0..cuda:{count - 1}."
        )
    return torch.device("cuda", index)


def synchronize(device: torch.device | str) -> None:
    """Wait until all queued work on ``device`` has finished (a no-op on the CPU, which runs eagerly)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "mps":
        torch.mps.synchronize()

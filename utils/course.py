"""Notebook start-up: every notebook's first code cell calls :func:`course_setup`.

It picks the device (cuda -> mps -> cpu), decides whether the run is a smoke run (CI, nbgrader, or ``SMOKE=True``),
seeds every random number generator, installs the unsolved-exercise hints (:mod:`utils.exercise_hints`) and prints
one line saying where the numbers come from. The returned
:class:`CourseRun` then chooses sizes for this run with ``run.pick(smoke=..., cpu=..., gpu=...)``.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TypeVar

import torch

from .device import pick_device
from .environment import hardware_label
from .exercise_hints import install_exercise_hints
from .seeding import seed_everything

T = TypeVar("T")

SMOKE_ENV_VARS = ("NBGRADER_EXECUTION", "BOOTCAMP_SMOKE")
_FALSE_WORDS = ("", "0", "false", "no", "off")


def smoke_mode(flag: bool = False) -> bool:
    """True when the notebook should run at smoke size: ``flag`` set, or running under nbgrader
    (``NBGRADER_EXECUTION``) or with ``BOOTCAMP_SMOKE=1`` in the environment (``0``/``false``/empty mean off)."""
    if flag:
        return True
    return any(os.environ.get(v, "").strip().lower() not in _FALSE_WORDS for v in SMOKE_ENV_VARS)


@dataclass
class CourseRun:
    """What a notebook needs to know about this run: the device, whether it is a smoke run, and the seed."""

    device: torch.device
    smoke: bool
    seed: int

    @property
    def on_gpu(self) -> bool:
        return self.device.type == "cuda"

    @property
    def mode(self) -> str:
        """``"smoke"``, ``"gpu"`` or ``"cpu"`` (MPS counts as ``"cpu"``-sized: laptops)."""
        return "smoke" if self.smoke else ("gpu" if self.on_gpu else "cpu")

    def pick(self, *, smoke: T, cpu: T, gpu: T) -> T:
        """The value for this run's size: ``smoke`` in smoke runs, ``gpu`` on CUDA, else ``cpu``."""
        return {"smoke": smoke, "cpu": cpu, "gpu": gpu}[self.mode]

    def hardware(self) -> str:
        """One line naming this run's hardware and torch version (see :func:`utils.environment.hardware_label`)."""
        return hardware_label(self.device)


def course_setup(smoke: bool = False, device: str = "auto", seed: int = 0, deterministic: bool = False,
                 quiet: bool = False) -> CourseRun:
    """Start a notebook: resolve smoke mode and the device, seed every RNG, print one banner line.

    Args:
        smoke: the notebook's ``SMOKE`` parameter (nbgrader and ``BOOTCAMP_SMOKE=1`` also turn it on).
        device: the notebook's ``DEVICE`` parameter: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"mps"``.
        seed: seed for ``random``, NumPy and torch.
        deterministic: also ask torch for deterministic kernels (slower; see :mod:`utils.seeding`).
        quiet: skip the banner line.
    """
    run = CourseRun(device=pick_device(device), smoke=smoke_mode(smoke), seed=seed)
    seed_everything(seed, deterministic=deterministic)
    install_exercise_hints()   # in Jupyter: say so when a cell fails because an exercise above is unsolved
    if not quiet:
        print(f"[course] device={run.device} mode={run.mode} seed={seed} | {run.hardware()} | "
              f"python {sys.version.split()[0]}")
    return run

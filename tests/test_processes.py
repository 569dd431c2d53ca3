"""utils.processes: the label of measurements made by CPU ranks matches how run_processes starts them."""
from __future__ import annotations

import inspect

import torch

from utils.processes import cpu_ranks_label, run_processes


def test_cpu_ranks_label_matches_run_processes_defaults():
    # The label says one torch thread per rank: that must stay run_processes' default.
    assert inspect.signature(run_processes).parameters["threads_per_process"].default == 1
    assert cpu_ranks_label() == f"cpu, gloo, 1 torch thread per rank, torch {torch.__version__}"

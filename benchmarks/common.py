"""Shared bits of the benchmark scripts: provenance metadata and result files."""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run as `python benchmarks/x.py` from a checkout without installing

from utils.environment import environment_report, hardware_label  # noqa: E402


def provenance(device: torch.device | str) -> dict:
    """Where a number came from: hardware, software versions, date, command line."""
    report = environment_report()
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "hardware": hardware_label(device),
        "gpus": [g.name for g in report.gpus],
        "driver": report.driver,
        "cpu_logical": report.cpu_count_logical,
        "cpu_physical": report.cpu_count_physical,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": report.cudnn,
        "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
    }


def write_result(name: str, payload: dict, out_dir: str | Path | None) -> Path | None:
    """Write ``payload`` as ``<out_dir>/<name>.json``; ``out_dir=None`` writes nothing."""
    if out_dir is None:
        return None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(payload, indent=1, default=str))
    return path

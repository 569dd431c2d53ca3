"""Shared bits of the benchmark scripts: provenance and result files, in the one format recorded results use.

Every result file carries :func:`utils.profiling.provenance` at its top level (hardware, software, date, source) and
loads with :func:`utils.profiling.load_recorded_file`, like the recordings under ``results/``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run as `python benchmarks/x.py` from a checkout without installing

from utils.profiling import provenance as _provenance, write_recorded  # noqa: E402


def command_line() -> str:
    """How this script was started, relative to the repository: ``python benchmarks/x.py --flags``."""
    return " ".join(["python", f"benchmarks/{Path(sys.argv[0]).name}"] + sys.argv[1:])


def provenance(device: torch.device | str, command: str | None = None) -> dict:
    """:func:`utils.profiling.provenance` with this script's command line as the source by default."""
    return _provenance(device, command or command_line())


def write_result(name: str, payload: dict, out_dir: str | Path | None) -> Path | None:
    """Write ``payload`` as ``<out_dir>/<name>.json`` (``out_dir=None`` writes nothing). ``payload["provenance"]``
    must be :func:`provenance`'s dict: it is written at the file's top level, the one recorded-results format."""
    if out_dir is None:
        return None
    data = dict(payload)
    prov = data.pop("provenance", None)
    if not isinstance(prov, dict):
        raise ValueError(f"{name}: the payload needs 'provenance': provenance(device) to be written")
    # Written under a hidden name, then renamed: a script stopped by a time limit mid-write leaves its last whole
    # file (tools/gpu_check.py packs the folder, hidden files excepted, while scripts run).
    path = Path(out_dir) / f"{name}.json"
    tmp = write_recorded(path.with_name(f".{name}.json.tmp"), data, prov)
    os.replace(tmp, path)
    return path

"""Profiling helpers: torch.profiler results as plain data, Chrome traces as event lists, recorded GPU results.

The profiler's own objects (``prof.key_averages()``) are hard to test against and change between releases; the
functions here turn them into lists of dicts with explicit units (microseconds ``_us``, bytes ``_bytes``), which
exercises and plots can use deterministically. Recorded results from a real GPU live in ``results/<day>/*.json``
and must say where they came from (:data:`PROVENANCE_KEYS`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

REPO_ROOT = Path(__file__).resolve().parents[1]

#: Keys every recorded-results JSON file must carry, so a number never travels without its context.
PROVENANCE_KEYS = ("hardware", "software", "date", "source")


def _get(event: Any, *names: str, default: float = 0.0) -> float:
    for name in names:
        value = getattr(event, name, None)
        if value is not None:
            return float(value)
    return default


def profile_records(averages: Iterable[Any]) -> list[dict[str, Any]]:
    """Turn ``prof.key_averages(...)`` (any grouping) into a list of plain dicts, one per row.

    Keys: ``name``, ``calls``, ``self_cpu_us``, ``cpu_total_us``, ``self_device_us``, ``device_total_us``
    (microseconds, summed over calls; device times are 0 on a CPU-only run), ``self_cpu_memory_bytes``,
    ``self_device_memory_bytes`` (bytes allocated minus freed by the op itself), ``input_shapes`` (a string, empty
    unless ``record_shapes=True`` and grouped by shape) and ``stack`` (a list of frames, empty unless
    ``with_stack=True`` and grouped by stack).
    """
    rows = []
    for e in averages:
        rows.append({
            "name": str(e.key),
            "calls": int(getattr(e, "count", 0)),
            "self_cpu_us": _get(e, "self_cpu_time_total"),
            "cpu_total_us": _get(e, "cpu_time_total"),
            "self_device_us": _get(e, "self_device_time_total", "self_cuda_time_total"),
            "device_total_us": _get(e, "device_time_total", "cuda_time_total"),
            "self_cpu_memory_bytes": int(_get(e, "self_cpu_memory_usage")),
            "self_device_memory_bytes": int(_get(e, "self_device_memory_usage", "self_cuda_memory_usage")),
            "input_shapes": str(getattr(e, "input_shapes", "") or ""),
            "stack": list(getattr(e, "stack", None) or []),
        })
    return rows


def trace_events(trace: str | Path | dict[str, Any], names: Iterable[str] | None = None,
                 prefixes: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Complete events (``"ph": "X"``) of a Chrome trace, as ``{"name", "start_us", "dur_us", "cat"}`` sorted by start.

    ``trace`` is a path to the JSON file ``prof.export_chrome_trace`` wrote, or its parsed dict. Keep only events
    whose name is in ``names`` or starts with one of ``prefixes`` (both empty: keep all). Times in microseconds.
    """
    data = json.loads(Path(trace).read_text()) if isinstance(trace, (str, Path)) else trace
    events = data.get("traceEvents", []) if isinstance(data, dict) else list(data)
    wanted = set(names or ())
    prefixes = tuple(prefixes)
    out = []
    for ev in events:
        if ev.get("ph") != "X" or "dur" not in ev:
            continue
        name = str(ev.get("name", ""))
        if (wanted or prefixes) and name not in wanted and not (prefixes and name.startswith(prefixes)):
            continue
        out.append({"name": name, "start_us": float(ev["ts"]), "dur_us": float(ev["dur"]),
                    "cat": str(ev.get("cat", ""))})
    return sorted(out, key=lambda e: e["start_us"])


def results_dir(day: str, root: str | Path | None = None) -> Path:
    """Where recorded results of ``day`` (e.g. ``"day22"``) live: ``<repo>/results/<day>``."""
    return Path(root) / day if root is not None else REPO_ROOT / "results" / day


def load_recorded_results(day: str, root: str | Path | None = None) -> list[dict[str, Any]]:
    """Every ``results/<day>/*.json`` file, parsed, sorted by file name; ``[]`` when there are none.

    Each file must be a JSON object with the :data:`PROVENANCE_KEYS` (hardware, software versions, date, how it was
    produced); a file without them raises ``ValueError`` rather than showing numbers of unknown origin. The file
    name is added under ``"file"``.
    """
    folder = results_dir(day, root)
    if not folder.is_dir():
        return []
    loaded = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a recorded result must be a JSON object")
        missing = [k for k in PROVENANCE_KEYS if not data.get(k)]
        if missing:
            raise ValueError(f"{path}: recorded results need provenance; missing {', '.join(missing)}")
        loaded.append({**data, "file": path.name})
    return loaded

"""Profiling helpers: torch.profiler results as plain data, Chrome traces as event lists, recorded GPU results.

The profiler's own objects (``prof.key_averages()``) are hard to test against and change between releases; the
functions here turn them into lists of dicts with explicit units (microseconds ``_us``, bytes ``_bytes``), which
exercises and plots can use deterministically.

With ``ProfilerActivity.CUDA`` every ``record_function`` range (and every ``ProfilerStep#N``) is recorded twice: the
host's range (device type CPU; ``cat`` ``user_annotation`` in a Chrome trace) and its GPU mirror (device type CUDA;
``cat`` ``gpu_user_annotation``), which spans the kernels the range launched, on the GPU's timeline.
``key_averages()`` keeps them apart (its grouping key includes the device type, ``torch/autograd/profiler_util.py``,
``EventList.key_averages.get_key``), so a name can have two rows: :func:`rows_by_name` picks one device's rows, and
:func:`trace_events` can keep only some categories (:data:`HOST_RANGE_CATS`, :data:`DEVICE_ACTIVITY_CATS`).

Recorded results from a real GPU live in ``results/<day>/*.json`` (and ``benchmarks/results/*.json``). Every such
file is one JSON object whose top level carries :func:`provenance`: ``hardware``, ``software``, ``date`` and
``source`` (the command that produced it), next to the measurements. :func:`write_recorded` writes that format and
:func:`load_recorded_results` accepts exactly it, so a number never travels without its context.
"""
from __future__ import annotations

import datetime as dt
import gzip
import json
import os
from pathlib import Path
from typing import Any, Iterable

import torch

from .device_busy import union_length
from .environment import environment_report, hardware_label

REPO_ROOT = Path(__file__).resolve().parents[1]

#: Chrome-trace categories of the host's own ranges (``record_function`` ranges and ``ProfilerStep#N``).
HOST_RANGE_CATS = ("user_annotation",)
#: The GPU mirror of those ranges: the span of the kernels each range launched, on the GPU's timeline.
GPU_RANGE_CATS = ("gpu_user_annotation",)
#: What a GPU runs: kernels, memory copies (host-device, device-device) and memsets.
DEVICE_ACTIVITY_CATS = ("kernel", "gpu_memcpy", "gpu_memset")

#: Keys every recorded-results JSON file carries at its top level (all non-empty strings; ``date`` is ISO 8601).
PROVENANCE_KEYS = ("hardware", "software", "date", "source")


def _get(event: Any, *names: str, default: float = 0.0) -> float:
    for name in names:
        value = getattr(event, name, None)
        if value is not None:
            return float(value)
    return default


def profile_records(averages: Iterable[Any]) -> list[dict[str, Any]]:
    """Turn ``prof.key_averages(...)`` (any grouping) into a list of plain dicts, one per row.

    Keys: ``name``, ``device_type`` (``"CPU"`` for host events; ``"CUDA"`` for kernels and for the GPU mirror of a
    ``record_function`` range, see the module docstring), ``calls``, ``self_cpu_us``, ``cpu_total_us``, ``self_device_us``, ``device_total_us``
    (microseconds, summed over calls; device times are 0 on a CPU-only run), ``self_cpu_memory_bytes``,
    ``self_device_memory_bytes`` (bytes allocated minus freed by the op itself), ``input_shapes`` (a string, empty
    unless ``record_shapes=True`` and grouped by shape) and ``stack`` (a list of frames, empty unless
    ``with_stack=True`` and grouped by stack).
    """
    rows = []
    for e in averages:
        rows.append({
            "name": str(e.key),
            "device_type": str(getattr(e, "device_type", "CPU")).rsplit(".", 1)[-1],
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


def rows_by_name(records: Iterable[dict[str, Any]], device_type: str = "CPU") -> dict[str, dict[str, Any]]:
    """The rows of :func:`profile_records` recorded on ``device_type`` (``"CPU"``: the host; ``"CUDA"``: the GPU),
    keyed by name.

    A plain ``{r["name"]: r for r in rows}`` is wrong on a CUDA run: a ``record_function`` range has a host row and
    a GPU-mirror row with the same name, and whichever comes last wins (the mirror's ``cpu_total_us`` is 0). Raises
    ``ValueError`` if a name repeats on one device (rows grouped by input shape or stack: key them yourself).
    """
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.get("device_type", "CPU") != device_type:
            continue
        if r["name"] in out:
            raise ValueError(f"{r['name']!r} has several {device_type} rows (grouped by shape or stack?): key them by "
                             "more than the name")
        out[r["name"]] = r
    return out


def _read_json(path: str | Path) -> Any:
    path = Path(path)
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return json.loads(raw)


def load_trace(path: str | Path) -> dict[str, Any]:
    """A Chrome trace file (gzip-compressed when it ends in ``.gz``) as its parsed dict: ``traceEvents`` plus
    whatever top-level keys the writer added (kineto's ``deviceProperties``; ``what``, ``synthetic``, ``trimmed``
    in the course's shipped and recorded traces)."""
    data = _read_json(path)
    return data if isinstance(data, dict) else {"traceEvents": list(data)}


def trace_events(trace: str | Path | dict[str, Any], names: Iterable[str] | None = None,
                 prefixes: Iterable[str] = (), cats: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Complete events (``"ph": "X"``) of a Chrome trace, as ``{"name", "start_us", "dur_us", "cat"}`` sorted by start.

    ``trace`` is a path to the JSON file ``prof.export_chrome_trace`` wrote (gzip-compressed when it ends in
    ``.gz``), or its parsed dict. Keep only events whose name is in ``names`` or starts with one of ``prefixes``
    (both empty: keep all), and, when ``cats`` is given, whose category is in it (e.g. :data:`HOST_RANGE_CATS`: the
    host's ranges without their GPU mirrors). Times in microseconds.
    """
    data = _read_json(trace) if isinstance(trace, (str, Path)) else trace
    events = data.get("traceEvents", []) if isinstance(data, dict) else list(data)
    wanted = set(names or ())
    prefixes = tuple(prefixes)
    wanted_cats = None if cats is None else set(cats)
    out = []
    for ev in events:
        if ev.get("ph") != "X" or "dur" not in ev:
            continue
        if wanted_cats is not None and str(ev.get("cat", "")) not in wanted_cats:
            continue
        name = str(ev.get("name", ""))
        if (wanted or prefixes) and name not in wanted and not (prefixes and name.startswith(prefixes)):
            continue
        out.append({"name": name, "start_us": float(ev["ts"]), "dur_us": float(ev["dur"]),
                    "cat": str(ev.get("cat", ""))})
    return sorted(out, key=lambda e: e["start_us"])


def device_busy_us(events: Iterable[dict[str, Any]], start_us: float, end_us: float,
                   cats: Iterable[str] = DEVICE_ACTIVITY_CATS) -> float:
    """Microseconds of ``[start_us, end_us]`` during which the device ran anything: the union of the intervals of
    the events (from :func:`trace_events`) whose ``cat`` is in ``cats``, clipped to the window. Overlapping work
    (two streams, a copy beside a kernel) counts once, so the result never exceeds the window."""
    wanted = set(cats)
    spans = [(max(e["start_us"], start_us), min(e["start_us"] + e["dur_us"], end_us))
             for e in events if e.get("cat") in wanted]
    return union_length(spans)


def example_trace_path(name: str = "day22_synthetic_resnet50_step.json.gz") -> Path:
    """A trace the course ships under ``results/examples/`` for learners without a GPU. The file says what it is
    (its top-level ``what``, ``synthetic`` and ``source`` keys): read them before you read its numbers."""
    return REPO_ROOT / "results" / "examples" / name


def trim_chrome_trace(trace: dict[str, Any], max_events: int = 20_000) -> dict[str, Any]:
    """A smaller copy of a Chrome trace that still opens in Perfetto / ``chrome://tracing``: the metadata events
    (process and thread names) and the ``max_events`` longest complete events, in time order. Flow arrows,
    instant and counter events are dropped. ``trimmed`` records what was kept out of how many."""
    if max_events < 1:
        raise ValueError(f"max_events must be >= 1, got {max_events}")
    events = trace.get("traceEvents", [])
    meta = [e for e in events if e.get("ph") == "M"]
    complete = [e for e in events if e.get("ph") == "X" and "dur" in e]
    kept = sorted(sorted(complete, key=lambda e: -float(e["dur"]))[:max_events], key=lambda e: float(e["ts"]))
    out = {k: v for k, v in trace.items() if k != "traceEvents"}
    out["traceEvents"] = meta + kept
    out["trimmed"] = {"complete_events_kept": len(kept), "complete_events_total": len(complete),
                      "other_events_dropped": len(events) - len(meta) - len(complete)}
    return out


def _trim_frames(entry: dict[str, Any], max_frames: int) -> dict[str, Any]:
    out = dict(entry)
    if "frames" in out:
        out["frames"] = list(out["frames"])[:max_frames]
    return out


def trim_memory_snapshot(snapshot: dict[str, Any], max_trace_entries: int = 2_000,
                         max_frames: int = 6) -> dict[str, Any]:
    """A smaller copy of ``torch.cuda.memory._snapshot()`` that https://pytorch.org/memory_viz still opens: every
    segment and block with stacks cut to ``max_frames`` frames, and the last ``max_trace_entries`` allocator events
    of each device's history."""
    segments = []
    for seg in snapshot.get("segments", []):
        seg = _trim_frames(seg, max_frames)
        seg["blocks"] = [_trim_frames(b, max_frames) for b in seg.get("blocks", [])]
        segments.append(seg)
    traces = [[_trim_frames(e, max_frames) for e in device_trace[-max_trace_entries:]]
              for device_trace in snapshot.get("device_traces", [])]
    return {"segments": segments, "device_traces": traces}


def memory_snapshot_summary(snapshot: dict[str, Any]) -> dict[str, Any]:
    """Totals of a memory snapshot, in bytes: reserved by the caching allocator (``reserved_bytes``), allocated to
    live tensors (``allocated_bytes``), the segment count, and how many allocator events of each kind the history
    holds (``actions``: alloc, free_requested, free_completed, segment_alloc, ...)."""
    segments = snapshot.get("segments", [])
    actions: dict[str, int] = {}
    for device_trace in snapshot.get("device_traces", []):
        for entry in device_trace:
            actions[entry.get("action", "?")] = actions.get(entry.get("action", "?"), 0) + 1
    return {"segments": len(segments), "reserved_bytes": int(sum(s.get("total_size", 0) for s in segments)),
            "allocated_bytes": int(sum(s.get("allocated_size", 0) for s in segments)), "actions": actions}


# --------------------------------------------------------------------------------------------- recorded results
def provenance(device: torch.device | str, command: str) -> dict[str, Any]:
    """Where a number came from: the top-level keys of every recorded-results file.

    ``hardware`` (:func:`utils.environment.hardware_label` of ``device``), ``software`` (one line of versions),
    ``date`` (UTC, ISO 8601), ``source`` (``command``: the script and its arguments, or the notebook and its
    parameters), plus ``versions`` and ``machine`` with the same facts as separate fields.
    """
    if not str(command).strip():
        raise ValueError("provenance needs the command that produced the numbers, e.g. 'python tools/gpu_check.py'")
    report = environment_report()
    versions = {"python": report.python, "torch": report.torch, "torchvision": report.torchvision,
                "cuda": report.cuda_build if torch.device(device).type == "cuda" else None, "cudnn": report.cudnn,
                "driver": report.driver}
    return {
        "hardware": hardware_label(device),
        "software": ", ".join(f"{k} {v}" for k, v in versions.items() if v),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "source": str(command),
        "versions": versions,
        "machine": {"platform": report.platform, "gpus": [g.name for g in report.gpus],
                    "cpu_logical": report.cpu_count_logical, "cpu_physical": report.cpu_count_physical,
                    "torch_threads": report.torch_threads,
                    "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None},
    }


def check_provenance(data: Any, where: str = "recorded result") -> None:
    """Raise ``ValueError`` unless ``data`` is a dict carrying :func:`provenance`'s keys at its top level."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: a recorded result must be a JSON object")
    if isinstance(data.get("provenance"), dict):
        raise ValueError(f"{where}: provenance is nested under 'provenance'; recorded results carry it at the top "
                         "level: write them with utils.profiling.write_recorded(path, payload, provenance(...))")
    missing = [k for k in PROVENANCE_KEYS if not isinstance(data.get(k), str) or not data[k].strip()]
    if missing:
        raise ValueError(f"{where}: recorded results need provenance; missing {', '.join(missing)} "
                         "(see utils.profiling.provenance)")
    try:
        dt.datetime.fromisoformat(data["date"])
    except ValueError as e:
        raise ValueError(f"{where}: date {data['date']!r} is not ISO 8601 (e.g. 2026-01-31T12:00:00+00:00)") from e


def write_recorded(path: str | Path, payload: dict[str, Any], prov: dict[str, Any]) -> Path:
    """Write ``payload`` with provenance ``prov`` (from :func:`provenance`) as one JSON object; returns the path."""
    clash = sorted(set(payload) & set(prov))
    if clash:
        raise ValueError(f"payload keys {clash} would overwrite provenance: rename them")
    data = {**prov, **payload}
    check_provenance(data, str(path))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")
    return path


def load_recorded_file(path: str | Path) -> dict[str, Any]:
    """One recorded-results file, parsed and checked (:func:`check_provenance`), with its name under ``"file"``."""
    path = Path(path)
    data = json.loads(path.read_text())
    check_provenance(data, str(path))
    return {**data, "file": path.name}


def results_dir(day: str, root: str | Path | None = None) -> Path:
    """Where recorded results of ``day`` (e.g. ``"day22"``) live: ``<repo>/results/<day>``."""
    return Path(root) / day if root is not None else REPO_ROOT / "results" / day


def load_recorded_results(day: str, root: str | Path | None = None) -> list[dict[str, Any]]:
    """Every ``results/<day>/*.json`` file, parsed, sorted by file name; ``[]`` when there are none.

    Each file must carry :func:`provenance` at its top level (hardware, software versions, date, the command that
    produced it); a file without it raises ``ValueError`` rather than showing numbers of unknown origin. The file
    name is added under ``"file"``.
    """
    folder = results_dir(day, root)
    if not folder.is_dir():
        return []
    return [load_recorded_file(p) for p in sorted(folder.glob("*.json"))]


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def format_rows(rows: list[dict[str, Any]]) -> str:
    """Dict rows as an aligned text table: one column per key (in first-seen order), floats to 4 digits."""
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    cells = [columns] + [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    return "\n".join("  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in cells)


def recorded_report(day: str, root: str | Path | None = None) -> str:
    """What a notebook shows when it cannot measure live: every recorded result of ``day``, labelled as recorded
    with its hardware, software, date and command, then its ``summary`` lines and its ``rows`` as a table; or a
    sentence saying there is none yet."""
    records = load_recorded_results(day, root)
    if not records:
        folder = results_dir(day, root)
        shown = folder.relative_to(REPO_ROOT) if folder.is_relative_to(REPO_ROOT) else folder   # results/dayNN
        return f"No recorded GPU result yet in {shown}: nothing recorded to show."
    parts = []
    for rec in records:
        parts.append(f"Recorded (not measured in this run) on {rec['hardware']}\n  {rec['software']}\n"
                     f"  {rec['date']} | {rec['source']} | {rec['file']}")
        if rec.get("what"):
            parts.append(f"  {rec['what']}")
        if rec.get("partial"):
            parts.append("  PARTIAL: the recorder was stopped before it finished; the rows it had not reached are "
                         "missing")
        parts += [f"  {line}" for line in rec.get("summary", [])]
        if rec.get("rows"):
            parts.append(format_rows(rec["rows"]))
    return "\n".join(parts)

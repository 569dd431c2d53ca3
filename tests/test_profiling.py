"""Unit tests of utils.profiling (CPU only, fast)."""
import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from utils.profiling import PROVENANCE_KEYS, load_recorded_results, profile_records, trace_events


def _profile():
    model = torch.nn.Linear(16, 4)
    x = torch.randn(8, 16)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("my_range"):
            model(x).sum().backward()
    return prof


def test_profile_records_plain_rows_with_units():
    prof = _profile()
    rows = profile_records(prof.key_averages())
    names = {r["name"] for r in rows}
    assert "my_range" in names and "aten::addmm" in names
    addmm = next(r for r in rows if r["name"] == "aten::addmm")
    assert addmm["calls"] == 1
    assert addmm["cpu_total_us"] >= addmm["self_cpu_us"] > 0
    assert addmm["self_device_us"] == 0.0  # CPU-only run
    json.dumps(rows)  # plain data


def test_profile_records_keeps_input_shapes():
    rows = profile_records(_profile().key_averages(group_by_input_shape=True))
    addmm = next(r for r in rows if r["name"] == "aten::addmm")
    assert "[8, 16]" in addmm["input_shapes"]


def test_trace_events_filters_and_sorts(tmp_path):
    trace = {"traceEvents": [
        {"ph": "X", "name": "b", "ts": 20, "dur": 5, "cat": "user_annotation"},
        {"ph": "X", "name": "ProfilerStep#1", "ts": 0, "dur": 50},
        {"ph": "i", "name": "b", "ts": 1},
        {"ph": "X", "name": "a", "ts": 10, "dur": 3},
    ]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    assert [e["name"] for e in trace_events(path)] == ["ProfilerStep#1", "a", "b"]
    assert [e["name"] for e in trace_events(trace, names=["b"], prefixes=["Profiler"])] == ["ProfilerStep#1", "b"]
    assert trace_events(trace, names=["a"])[0] == {"name": "a", "start_us": 10.0, "dur_us": 3.0, "cat": ""}


def test_trace_events_of_a_real_export(tmp_path):
    prof = _profile()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    ranges = trace_events(path, names=["my_range"])
    assert len(ranges) == 1 and ranges[0]["dur_us"] > 0


def test_load_recorded_results(tmp_path):
    assert load_recorded_results("day99", root=tmp_path) == []
    folder = tmp_path / "day99"
    folder.mkdir()
    good = {k: "x" for k in PROVENANCE_KEYS} | {"value": 3}
    (folder / "b.json").write_text(json.dumps(good))
    (folder / "a.json").write_text(json.dumps(good))
    loaded = load_recorded_results("day99", root=tmp_path)
    assert [r["file"] for r in loaded] == ["a.json", "b.json"] and loaded[0]["value"] == 3
    (folder / "c.json").write_text(json.dumps({"value": 1, "hardware": "H100"}))
    with pytest.raises(ValueError, match="provenance"):
        load_recorded_results("day99", root=tmp_path)

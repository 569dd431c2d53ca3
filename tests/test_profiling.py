"""Unit tests of utils.profiling (CPU only, fast)."""
import gzip
import json
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from torch.autograd import DeviceType
from torch.autograd.profiler_util import EventList, FunctionEvent

from utils.profiling import (DEVICE_ACTIVITY_CATS, HOST_RANGE_CATS, PROVENANCE_KEYS, device_busy_us,
                             example_trace_path, format_rows, load_recorded_file, load_recorded_results, load_trace,
                             memory_snapshot_summary, profile_records, provenance, recorded_report, rows_by_name,
                             trace_events, trim_chrome_trace, trim_memory_snapshot, write_recorded)

ROOT = Path(__file__).resolve().parents[1]


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


def _cuda_profile_events() -> EventList:
    """What key_averages() sees on a CUDA run, built from real FunctionEvents: each record_function range (and the
    ProfilerStep) on the host, and its GPU mirror (device type CUDA, user annotation), which comes later."""
    def event(i, name, start, end, device=DeviceType.CPU):
        return FunctionEvent(id=i, name=name, thread=0, start_us=start, end_us=end, device_type=device,
                             is_user_annotation=True, use_device="cuda", stack=[])
    events = EventList([event(1, "ProfilerStep#1", 0, 1000), event(2, "data", 10, 310), event(3, "forward", 320, 700),
                        event(4, "data", 40, 90, DeviceType.CUDA), event(5, "forward", 330, 1900, DeviceType.CUDA),
                        event(6, "ProfilerStep#1", 40, 1950, DeviceType.CUDA)], use_device="cuda")
    events._build_tree()
    return events


def test_gpu_mirror_rows_are_kept_apart_by_device():
    records = profile_records(_cuda_profile_events().key_averages())
    assert sorted((r["name"], r["device_type"]) for r in records) == [
        ("ProfilerStep#1", "CPU"), ("ProfilerStep#1", "CUDA"), ("data", "CPU"), ("data", "CUDA"),
        ("forward", "CPU"), ("forward", "CUDA")]
    # The old method: a dict keyed by name keeps the mirror (CPU time 0), and Day 22's share divides by zero.
    naive = {r["name"]: r for r in records}
    assert naive["ProfilerStep#1"]["cpu_total_us"] == 0
    host = rows_by_name(records, "CPU")
    steps_total = sum(r["cpu_total_us"] for n, r in host.items() if n.startswith("ProfilerStep"))
    assert steps_total == 1000 and host["data"]["cpu_total_us"] / steps_total == 0.3
    gpu = rows_by_name(records, "CUDA")
    assert gpu["forward"]["device_total_us"] == 1570 and gpu["forward"]["cpu_total_us"] == 0


def test_rows_by_name_refuses_repeated_names():
    rows = [{"name": "aten::add", "device_type": "CPU"}, {"name": "aten::add", "device_type": "CPU"}]
    with pytest.raises(ValueError, match="several CPU rows"):
        rows_by_name(rows)
    assert rows_by_name([{"name": "x"}]) == {"x": {"name": "x"}}     # rows without device_type are host rows


def test_trace_events_keeps_only_the_host_ranges_when_asked():
    trace = {"traceEvents": [
        {"ph": "X", "name": "ProfilerStep#1", "ts": 0, "dur": 100, "cat": "user_annotation"},
        {"ph": "X", "name": "data", "ts": 5, "dur": 20, "cat": "user_annotation"},
        {"ph": "X", "name": "data", "ts": 30, "dur": 10, "cat": "gpu_user_annotation"},
        {"ph": "X", "name": "ProfilerStep#1", "ts": 30, "dur": 90, "cat": "gpu_user_annotation"},
        {"ph": "X", "name": "gemm", "ts": 30, "dur": 50, "cat": "kernel"},
    ]}
    both = trace_events(trace, names=["data"], prefixes=["ProfilerStep"])
    assert len(both) == 4                       # the old method counts every range twice on a GPU run
    host = trace_events(trace, names=["data"], prefixes=["ProfilerStep"], cats=HOST_RANGE_CATS)
    assert [(e["name"], e["start_us"]) for e in host] == [("ProfilerStep#1", 0.0), ("data", 5.0)]
    assert [e["name"] for e in trace_events(trace, cats=DEVICE_ACTIVITY_CATS)] == ["gemm"]


def test_device_busy_us_is_a_clipped_union():
    ev = [{"name": "a", "cat": "kernel", "start_us": 0.0, "dur_us": 40.0},
          {"name": "b", "cat": "kernel", "start_us": 10.0, "dur_us": 20.0},        # another stream, inside a
          {"name": "c", "cat": "gpu_memcpy", "start_us": 35.0, "dur_us": 15.0},    # overlaps a's end
          {"name": "d", "cat": "gpu_user_annotation", "start_us": 0.0, "dur_us": 100.0},
          {"name": "e", "cat": "kernel", "start_us": 90.0, "dur_us": 30.0}]        # sticks out of the window
    assert device_busy_us(ev, 0.0, 100.0) == 60.0
    assert device_busy_us(ev, 20.0, 45.0) == 25.0
    assert device_busy_us([], 0.0, 10.0) == 0.0


def test_the_shipped_example_trace_says_it_is_synthetic_and_has_gpu_work():
    trace = load_trace(example_trace_path())
    assert trace["synthetic"] is True and trace["what"].startswith("SYNTHETIC") and trace["source"]
    events = trace_events(trace)
    steps = [e for e in events if e["name"].startswith("ProfilerStep") and e["cat"] in HOST_RANGE_CATS]
    assert len(steps) == 3
    shares = [device_busy_us(events, s["start_us"], s["start_us"] + s["dur_us"]) / s["dur_us"] for s in steps]
    assert shares[1] < 0.7 < min(shares[0], shares[2]), shares    # step 2 waits for data
    assert example_trace_path().stat().st_size < 200_000


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
    good = {k: "x" for k in PROVENANCE_KEYS} | {"date": "2026-01-31T12:00:00+00:00", "value": 3}
    (folder / "b.json").write_text(json.dumps(good))
    (folder / "a.json").write_text(json.dumps(good))
    loaded = load_recorded_results("day99", root=tmp_path)
    assert [r["file"] for r in loaded] == ["a.json", "b.json"] and loaded[0]["value"] == 3
    (folder / "c.json").write_text(json.dumps({"value": 1, "hardware": "H100"}))
    with pytest.raises(ValueError, match="provenance"):
        load_recorded_results("day99", root=tmp_path)


def test_provenance_round_trip_through_write_and_load(tmp_path):
    prov = provenance("cpu", "python tools/gpu_check.py --only day08")
    assert prov["hardware"].startswith("cpu") and "torch " in prov["software"] and prov["source"].endswith("day08")
    path = write_recorded(tmp_path / "day08" / "cpu.json", {"rows": [{"batch": 64, "peak_bytes": 10}]}, prov)
    loaded = load_recorded_results("day08", root=tmp_path)
    assert len(loaded) == 1 and loaded[0]["rows"][0]["batch"] == 64 and loaded[0]["file"] == path.name
    assert loaded[0]["versions"]["torch"] == torch.__version__
    with pytest.raises(ValueError, match="command"):
        provenance("cpu", " ")
    with pytest.raises(ValueError, match="overwrite provenance"):
        write_recorded(tmp_path / "x.json", {"date": "yesterday"}, prov)


def test_loader_rejects_nested_provenance_and_bad_dates(tmp_path):
    folder = tmp_path / "day99"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps({"provenance": {k: "x" for k in PROVENANCE_KEYS}, "rows": []}))
    with pytest.raises(ValueError, match="top level"):
        load_recorded_results("day99", root=tmp_path)
    (folder / "a.json").write_text(json.dumps({k: "x" for k in PROVENANCE_KEYS}))
    with pytest.raises(ValueError, match="ISO 8601"):
        load_recorded_results("day99", root=tmp_path)
    (folder / "a.json").write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match="JSON object"):
        load_recorded_results("day99", root=tmp_path)


def test_every_committed_recording_loads():
    files = sorted((ROOT / "benchmarks" / "results").glob("*.json")) + sorted((ROOT / "results").glob("*/*.json"))
    assert files, "benchmarks/results holds the CPU recordings"
    for path in files:
        assert load_recorded_file(path)["hardware"]


def test_recorded_report_labels_the_hardware_or_says_there_is_none(tmp_path):
    assert "No recorded GPU result yet" in recorded_report("day08", root=tmp_path)
    prov = provenance("cpu", "python tools/gpu_check.py")
    write_recorded(tmp_path / "day08" / "gpu.json",
                   {"summary": ["peak / prediction = 0.93"], "rows": [{"batch": 64, "gib": 1.23456}]},
                   prov | {"hardware": "cuda:0 NVIDIA H200, torch 2.11.0"})
    text = recorded_report("day08", root=tmp_path)
    assert text.startswith("Recorded (not measured in this run) on cuda:0 NVIDIA H200")
    assert "peak / prediction = 0.93" in text and "1.235" in text and "gpu.json" in text
    assert "PARTIAL" not in text
    write_recorded(tmp_path / "day08" / "gpu.json", {"partial": True, "summary": ["first run"], "rows": []},
                   prov | {"hardware": "cuda:0 NVIDIA H200, torch 2.11.0"})
    assert "PARTIAL: the recorder was stopped before it finished" in recorded_report("day08", root=tmp_path)


def test_format_rows_aligns_columns_of_uneven_rows():
    lines = format_rows([{"a": 1, "b": 0.123456}, {"a": 22, "c": None}]).splitlines()
    assert lines[0].split() == ["a", "b", "c"]
    assert lines[1].split() == ["1", "0.1235", "-"] and lines[2].split() == ["22", "-", "-"]
    assert len({len(line) for line in lines}) == 1


def test_trim_chrome_trace_keeps_the_longest_events_in_time_order(tmp_path):
    trace = {"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1}]
             + [{"ph": "X", "name": f"k{i}", "ts": i, "dur": d} for i, d in enumerate([5, 1, 9, 3])]
             + [{"ph": "s", "name": "flow", "ts": 1}], "deviceProperties": [{"name": "H200"}]}
    small = trim_chrome_trace(trace, max_events=2)
    assert [e["name"] for e in small["traceEvents"]] == ["process_name", "k0", "k2"]
    assert small["trimmed"] == {"complete_events_kept": 2, "complete_events_total": 4, "other_events_dropped": 1}
    assert small["deviceProperties"] == trace["deviceProperties"]
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(small).encode()))
    assert [e["name"] for e in trace_events(path)] == ["k0", "k2"]


def test_memory_snapshot_trim_and_summary():
    frames = [{"filename": f"f{i}.py", "line": i, "name": "fn"} for i in range(10)]
    snap = {"segments": [{"total_size": 2048, "allocated_size": 512, "frames": frames,
                          "blocks": [{"size": 512, "state": "active_allocated", "frames": frames}]}],
            "device_traces": [[{"action": "alloc", "size": 512, "frames": frames}] * 5
                              + [{"action": "free_completed", "size": 512, "frames": frames}]]}
    small = trim_memory_snapshot(snap, max_trace_entries=3, max_frames=2)
    assert len(small["device_traces"][0]) == 3 and small["device_traces"][0][-1]["action"] == "free_completed"
    assert len(small["segments"][0]["blocks"][0]["frames"]) == 2 and len(snap["device_traces"][0][0]["frames"]) == 10
    summary = memory_snapshot_summary(snap)
    assert summary == {"segments": 1, "reserved_bytes": 2048, "allocated_bytes": 512,
                       "actions": {"alloc": 5, "free_completed": 1}}

"""utils.bus_bandwidth: nccl-tests' bus-bandwidth convention, and an all_reduce timing that cannot hang."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from utils import bus_bandwidth
from utils.bus_bandwidth import all_reduce_window_times, bandwidths, bus_factor, measure_all_reduce
from utils.processes import run_processes
from utils.profiling import load_recorded_file, provenance, write_recorded


@pytest.mark.parametrize("collective, n, factor", [("all_reduce", 2, 1.0), ("all_reduce", 4, 1.5),
                                                   ("all_reduce", 8, 1.75), ("all_gather", 4, 0.75),
                                                   ("reduce_scatter", 8, 0.875), ("broadcast", 8, 1.0),
                                                   ("all_reduce", 1, 0.0)])
def test_factors_are_nccl_tests(collective, n, factor):
    assert bus_factor(collective, n) == pytest.approx(factor)


def test_busbw_is_algbw_times_the_factor():
    algbw, busbw = bandwidths(8_000_000, 0.004, "all_reduce", 4)
    assert algbw == pytest.approx(2e9) and busbw == pytest.approx(3e9)
    with pytest.raises(ValueError):
        bandwidths(1, 0.0, "all_reduce", 2)
    with pytest.raises(ValueError):
        bus_factor("allreduce", 2)


def _uneven_first_call(rank: int, world_size: int, sizes: list[int]) -> list[dict]:
    # Rank 1's clock runs 50x fast during the probe call, so on its own it would choose far fewer calls per window:
    # the ranks must agree on one count (a MAX all_reduce), or their windows would not match and the group hangs.
    if rank == 1:
        real = time.perf_counter
        stretched = iter([real(), real() + 50 * 0.02])
        bus_bandwidth.time.perf_counter = lambda: next(stretched, None) or real()
        try:
            return all_reduce_window_times(rank, world_size, sizes[:1], repeats=2, min_window_s=0.02)
        finally:
            bus_bandwidth.time.perf_counter = real
    return all_reduce_window_times(rank, world_size, sizes[:1], repeats=2, min_window_s=0.02)


@pytest.mark.slow
def test_ranks_agree_on_the_calls_per_window_even_when_their_probes_disagree():
    rows = run_processes(_uneven_first_call, 2, ([4096],), timeout_s=60, collective_timeout_s=20)
    assert rows[0][0]["calls_per_window"] == rows[1][0]["calls_per_window"] > 1


@pytest.mark.slow
def test_measure_all_reduce_rows():
    rows = measure_all_reduce(2, [4096, 65536], repeats=2, min_window_s=0.005, timeout_s=90)
    assert [r["bytes"] for r in rows] == [4096, 65536]
    for r in rows:
        assert r["world_size"] == 2 and r["backend"] == "gloo" and r["seconds"] > 0
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * bus_factor("all_reduce", 2))


@pytest.mark.slow
def test_the_kits_recording_payload_on_the_cpu(tmp_path: Path):
    payload = bus_bandwidth.recording_payload(tiny=True)
    assert payload["backend"] == "gloo" and [r["bytes"] for r in payload["rows"]] == [4096, 65536]
    assert payload["summary"] and "busbw" in payload["summary"][0] and "2(n-1)/n" in payload["what"]
    path = write_recorded(tmp_path / "cpu.json", payload, provenance("cpu", "pytest"))
    assert load_recorded_file(path)["rows"] == payload["rows"], "the kit writes it with provenance; it loads back"

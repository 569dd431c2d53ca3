"""utils.core_wait: the share of this process's CPUs that other processes used during a block (fake clocks; Linux's
real /proc/stat)."""
from __future__ import annotations

import os

import pytest

from utils import core_wait as W
from utils.environment import usable_cpus


def fake(busy, own, wall, cpus=(0, 1), waits=(None, None)):
    busy, own, wall, waits = iter(busy), iter(own), iter(wall), iter(waits)
    return W.CoreWait(busy_clock=lambda: next(busy), own_clock=lambda: next(own), wall_clock=lambda: next(wall),
                      cpus=set(cpus), wait_clock=lambda: next(waits))


def test_fraction_is_the_others_share_of_the_cpus_time():
    with fake(busy=[100.0, 104.0], own=[10.0, 12.0], wall=[0.0, 2.0]) as wait:   # 4 s busy, 2 s of them ours
        pass
    assert wait.others_s == 2.0 and wait.fraction == 0.5 and wait.starved        # 2 s of 2 CPUs x 2 s
    with fake(busy=[100.0, 102.2], own=[10.0, 12.0], wall=[0.0, 2.0]) as wait:   # a quiet machine
        pass
    assert wait.fraction == pytest.approx(0.05) and not wait.starved


def test_starved_needs_both_others_on_the_cores_and_this_process_waiting():
    # One other busy process on 2 cores, and this process's threads waited half the time: disturbed.
    with fake(busy=[0.0, 4.0], own=[0.0, 2.0], wall=[0.0, 2.0], waits=[1.0, 2.0]) as wait:
        pass
    assert wait.fraction == 0.5 and wait.waited == 0.5 and wait.starved
    # The same other process, but a one-thread timing kept its own core (no wait): not disturbed.
    with fake(busy=[0.0, 4.0], own=[0.0, 2.0], wall=[0.0, 2.0], waits=[1.0, 1.02]) as wait:
        pass
    assert wait.fraction == 0.5 and wait.waited == pytest.approx(0.01) and not wait.starved
    # This process's own threads competing (eager PyTorch beside ONNX Runtime) on a quiet machine: not disturbed.
    with fake(busy=[0.0, 3.9], own=[0.0, 3.9], wall=[0.0, 2.0], waits=[0.0, 0.9]) as wait:
        pass
    assert wait.fraction == 0.0 and wait.waited == 0.45 and not wait.starved


def test_own_threads_are_not_others():
    # Two busy threads of this process on 2 CPUs: all the busy time is its own.
    with fake(busy=[0.0, 4.0], own=[0.0, 4.0], wall=[0.0, 2.0]) as wait:
        pass
    assert wait.fraction == 0.0 and not wait.starved


def test_cannot_tell_without_proc_stat_or_for_a_too_short_block():
    with fake(busy=[None, None], own=[0.0, 1.0], wall=[0.0, 1.0]) as wait:
        pass
    assert wait.fraction is None and not wait.starved
    with fake(busy=[0.0, 0.2], own=[0.0, 0.0], wall=[0.0, 0.1]) as wait:      # 0.1 s: ticks too coarse
        pass
    assert wait.fraction is None and not wait.starved


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux reports per-CPU busy time in /proc/stat")
def test_busy_time_and_waits_are_read_on_linux():
    cpus = set(usable_cpus())
    first, waited = W.busy_cpu_s(cpus), W.runqueue_wait_s()
    assert cpus and first is not None and first >= 0 and W.busy_cpu_s(cpus) >= first
    assert waited is not None and W.runqueue_wait_s() >= waited


def test_a_kernel_without_scheduler_statistics_reports_no_waits(tmp_path):
    # Files of zeros (no statistics kept) must read as "cannot tell", not as "never waited": a waited of 0 would
    # keep `starved` False on the busiest machine.
    for tid, text in [("1", "0 0 0\n"), ("2", "0 0 0\n")]:
        (tmp_path / tid).mkdir()
        (tmp_path / tid / "schedstat").write_text(text)
    assert W.runqueue_wait_s(str(tmp_path / "*" / "schedstat")) is None
    (tmp_path / "2" / "schedstat").write_text("5000000 2500000000 7\n")
    assert W.runqueue_wait_s(str(tmp_path / "*" / "schedstat")) == 2.5
    assert W.runqueue_wait_s(str(tmp_path / "none" / "schedstat")) is None

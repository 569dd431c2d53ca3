"""Was this process given the cores while it timed CPU work? A busy machine's timings measure its load.

On a CPU, other processes that hold the cores slow a timing in a way its repeats cannot show: a load that slows
every round alike leaves the rounds in agreement. Worse, PyTorch's OpenMP threads wait for each other at the end of
every parallel operation, so one descheduled thread stalls them all: measured here, a 2-thread forward pass of a
small CNN took 10x longer while one other busy process shared the 2 cores. :class:`CoreWait` measures the disturbance
itself: how much of this process's cores other processes used while it timed, and whether this process's threads
had to wait for a core meanwhile, so that a notebook can refuse to judge a comparison timed on a busy machine instead
of printing the load as a speed-up.
"""
from __future__ import annotations

import glob
import os
import time
from typing import Callable

from .environment import usable_cpus

__all__ = ["CoreWait", "busy_cpu_s", "runqueue_wait_s"]

_STARVED = 0.25          # others used over a quarter of the cores' time
_WAITED = 0.1            # and this process's threads waited for a core over a tenth of the time
_SHORTEST_S = 0.2        # below this, the kernel's 10 ms ticks make the share too coarse to read


def busy_cpu_s(cpus: set[int]) -> float | None:
    """Seconds the CPUs ``cpus`` have spent busy (user, nice, system, interrupts, steal) since boot, by any process,
    from Linux's ``/proc/stat``; None where the kernel does not report it (macOS, Windows)."""
    try:
        with open("/proc/stat") as f:
            lines = [line.split() for line in f if line.startswith("cpu") and line[3:4].isdigit()]
    except OSError:
        return None
    ticks = 0
    for name, *values in lines:
        if int(name[3:]) in cpus:
            v = [int(x) for x in values] + [0] * 8
            ticks += v[0] + v[1] + v[2] + v[5] + v[6] + v[7]      # user nice system (idle iowait) irq softirq steal
    return ticks / os.sysconf("SC_CLK_TCK") if lines else None


def runqueue_wait_s(pattern: str = "/proc/self/task/*/schedstat") -> float | None:
    """Seconds this process's threads have spent so far runnable but waiting for a core (Linux:
    ``/proc/self/task/*/schedstat``, second field, nanoseconds), or None where the kernel does not report it: no such
    files (macOS, Windows), or files of zeros (a kernel that keeps no scheduler statistics writes ``0 0 0`` even for
    the time a thread ran, the first field, which a running process cannot have spent at 0)."""
    waited, ran, found = 0, 0, False
    for path in glob.glob(pattern):
        try:
            with open(path) as f:
                fields = f.read().split()
            ran, waited, found = ran + int(fields[0]), waited + int(fields[1]), True
        except (OSError, IndexError, ValueError):     # a thread that ended meanwhile
            continue
    return waited / 1e9 if found and ran > 0 else None


class CoreWait:
    """``with CoreWait() as wait: <CPU timings>`` then ``wait.fraction`` and ``wait.starved``: did other processes
    hold this process's cores while it timed CPU work?

    ``fraction`` is the CPU time that other processes (this process's children included: DataLoader workers, ranks)
    used on this process's usable CPUs during the block, as a share of those CPUs' time (0 to 1): the machine's busy
    time minus this process's own CPU time. A quiet machine leaves it near 0; one other busy process on 2 cores makes
    it about 0.5. ``waited`` is the time this process's threads spent runnable but waiting for a core, per wall second
    (summed over threads). Neither alone means the timing was disturbed: other processes may use cores this process
    left idle (a one-thread timing beside one busy process on 2 cores), and this process's own threads may compete
    with each other (eager PyTorch beside ONNX Runtime on a quiet machine waited 0.45). ``starved`` is both: others
    used over a quarter of the cores (``fraction > 0.25``) and this process waited for one over a tenth of the time
    (``waited > 0.1``; where the kernel does not report waits, ``fraction`` alone decides). A timing taken then
    measures the other processes' load as much as the code. ``fraction`` is None where it cannot be measured: no
    ``/proc/stat`` (macOS, Windows), or a block shorter than 0.2 s (the kernel counts in 10 ms ticks); ``starved`` is
    then False: the run cannot tell.
    Meaningful for CPU work only: a host waiting for a GPU (with PyTorch's defaults it spins on a core) measures the
    GPU, and how long it waits does not depend on who else wants the cores.
    """

    def __init__(self, busy_clock: Callable[[], float | None] | None = None,
                 own_clock: Callable[[], float] = time.process_time,
                 wall_clock: Callable[[], float] = time.perf_counter, cpus: set[int] | None = None,
                 wait_clock: Callable[[], float | None] = runqueue_wait_s) -> None:
        self.cpus = set(usable_cpus() if cpus is None else cpus)
        self._busy_clock = busy_clock or (lambda: busy_cpu_s(self.cpus))
        self._own_clock, self._wall_clock, self._wait_clock = own_clock, wall_clock, wait_clock
        self.wall_s = float("nan")
        self.others_s: float | None = None
        self.waited_s: float | None = None

    def __enter__(self) -> "CoreWait":
        self._wall0, self._own0, self._busy0 = self._wall_clock(), self._own_clock(), self._busy_clock()
        self._wait0 = self._wait_clock()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = self._wall_clock() - self._wall0
        own = self._own_clock() - self._own0
        busy1, wait1 = self._busy_clock(), self._wait_clock()
        self.others_s = None if self._busy0 is None or busy1 is None else max(0.0, busy1 - self._busy0 - own)
        self.waited_s = None if self._wait0 is None or wait1 is None else max(0.0, wait1 - self._wait0)

    @property
    def fraction(self) -> float | None:
        """Share of this process's CPUs' time that other processes used during the block; None if not measurable."""
        if self.others_s is None or not self.wall_s >= _SHORTEST_S:
            return None
        return min(1.0, self.others_s / (len(self.cpus) * self.wall_s))

    @property
    def waited(self) -> float | None:
        """Seconds this process's threads waited for a core per wall second of the block; None if not measurable."""
        return None if self.waited_s is None or not self.wall_s > 0 else self.waited_s / self.wall_s

    @property
    def starved(self) -> bool:
        """True when other processes used over a quarter of this process's CPUs' time during the block and this
        process's threads waited for a core over a tenth of it (the second where the kernel reports waits)."""
        return (self.fraction is not None and self.fraction > _STARVED
                and (self.waited is None or self.waited > _WAITED))

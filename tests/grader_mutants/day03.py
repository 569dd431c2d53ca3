"""Day 03 · Devices and honest timing: plausible wrong answers to honest_time and h2d_bandwidth."""
from grader_mutants import Mutant

MUTANTS = [
    Mutant(cell="day03_honest_time",
           find="        fn()\n        sync()\n", replace="        fn()\n",
           why="no sync before reading the clock at the stop: times the launch, not the work",
           caught_by="day03_honest_time_tests"),
    Mutant(cell="day03_honest_time",
           find="        sync()\n        start = clock()", replace="        start = clock()",
           why="no sync before the start: work queued earlier (the warm-up) is billed to the timed run",
           caught_by="day03_honest_time_tests"),
    Mutant(cell="day03_honest_time",
           find="statistics.median(times)", replace="statistics.mean(times)",
           why="the mean of the runs, which one slow outlier moves",
           caught_by="day03_honest_time_tests"),
    Mutant(cell="day03_honest_time",
           find="    for _ in range(warmup):\n        fn()\n", replace="",
           why="no warm-up: the cold first calls are timed",
           caught_by="day03_honest_time_tests"),
    Mutant(cell="day03_honest_time",
           find="statistics.median(times)", replace="sorted(times)[len(times) // 2]",
           why="the upper middle value instead of the median of an even number of runs",
           caught_by="day03_honest_time_tests"),
    Mutant(cell="day03_h2d_bandwidth",
           find="pinned.to(device, non_blocking=True)", replace="host.pin_memory().to(device, non_blocking=True)",
           why="pinned inside the timed copy: the page-locking is billed to the pinned bandwidth",
           caught_by="day03_h2d_bandwidth_tests"),
    Mutant(cell="day03_h2d_bandwidth",
           find="lambda: host.to(device)", replace="lambda: pinned.to(device)",
           why="the 'pageable' copy is made from the pinned tensor",
           caught_by="day03_h2d_bandwidth_tests"),
    Mutant(cell="day03_h2d_bandwidth",
           find="host.numel() * host.element_size()", replace="host.numel() * 4",
           why="assumed 4 bytes per element (fp32) whatever the dtype",
           caught_by="day03_h2d_bandwidth_tests"),
    Mutant(cell="day03_h2d_bandwidth",
           find='"pageable": nbytes / pageable_s / 1e9, "pinned": nbytes / pinned_s / 1e9',
           replace='"pageable": nbytes / pageable_s / 2**30, "pinned": nbytes / pinned_s / 2**30',
           why="GiB/s (2**30 bytes) reported as GB/s",
           caught_by="day03_h2d_bandwidth_tests"),
    Mutant(cell="day03_h2d_bandwidth",
           find="    pinned_s = honest_time(lambda: pinned.to(device, non_blocking=True), sync, warmup, repeats, clock)",
           replace="    def naive(fn):\n"
                   "        for _ in range(warmup):\n"
                   "            fn()\n"
                   "        times = []\n"
                   "        for _ in range(repeats):\n"
                   "            sync()\n"
                   "            start = clock()\n"
                   "            fn()\n"
                   "            times.append(clock() - start)\n"
                   "        return statistics.median(times)\n"
                   "    pinned_s = naive(lambda: pinned.to(device, non_blocking=True))",
           why="an own timing loop without a sync at the stop: the non_blocking copy returns at once",
           caught_by="day03_h2d_bandwidth_tests"),
    Mutant(cell="day03_h2d_bandwidth",
           find="    pageable_s = honest_time(lambda: host.to(device), sync, warmup, repeats, clock)",
           replace="    pageable_s = honest_time(lambda: host.to(device), sync, 0, 1, clock)",
           why="ignored warmup and repeats: one cold copy timed",
           caught_by="day03_h2d_bandwidth_tests"),
    Mutant(cell="day03_honest_time",
           find="        sync()\n        times.append(clock() - start)",
           replace="        times.append(clock() - start)\n        sync()",
           why="reads the clock at the stop before the sync: the timed run ends at the launch, not the work",
           caught_by="day03_honest_time_tests"),
    Mutant(cell='day03_h2d_bandwidth',
           find='    pinned_s = honest_time(lambda: pinned.to(device, non_blocking=True), sync, warmup, repeats, clock)\n',
           replace='    for _ in range(warmup):\n        pinned.to(device, non_blocking=True)\n    runs = []\n    for _ in range(repeats):\n        start = clock()\n        pinned.to(device, non_blocking=True)\n        sync()\n        runs.append(clock() - start)\n    pinned_s = statistics.median(runs)\n',
           why="a pinned timing loop with no sync before the clock starts: the warm-up's queued copy is billed to the first timed run",
           caught_by='day03_h2d_bandwidth_tests'),
    Mutant(cell='day03_h2d_bandwidth',
           find='    pageable_s = honest_time(lambda: host.to(device), sync, warmup, repeats, clock)\n    pinned_s = honest_time(lambda: pinned.to(device, non_blocking=True), sync, warmup, repeats, clock)',
           replace='    def best_of(copy):\n        for _ in range(warmup):\n            copy()\n        runs = []\n        for _ in range(repeats):\n            sync()\n            start = clock()\n            copy()\n            sync()\n            runs.append(clock() - start)\n        return min(runs)                            # the best run: the bandwidth the link can reach\n    pageable_s = best_of(lambda: host.to(device))\n    pinned_s = best_of(lambda: pinned.to(device, non_blocking=True))',
           why='an own timing loop that reports the best run (min) as the bandwidth, a common benchmarking habit; the text asks for the median of repeats runs like honest_time. The simulated bus is deterministic and every hidden hiccup test has one slow copy per source, so min equals the median everywhere. The same test also catches sorted(runs)[len//2] (upper middle) in an own loop',
           caught_by='day03_h2d_bandwidth_tests'),
]

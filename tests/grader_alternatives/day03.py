"""Day 03: correct answers to honest_time and h2d_bandwidth, written other ways."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    # --- Exercise 1: honest_time
    Alternative(cell="day03_honest_time",
                why="one sync after the warm-up, then a sync only at the stop of each run: the previous run's sync "
                    "already left the device idle when the next clock starts",
                source='''def honest_time(fn, sync, warmup: int = 3, repeats: int = 10, clock=time.perf_counter) -> float:
    for _ in range(warmup):
        fn()
    sync()                                   # the warm-up's work is done before the first clock
    durations = []
    for _ in range(repeats):
        t0 = clock()
        fn()
        sync()                               # this run's work is done; the next run starts on an idle device
        durations.append(clock() - t0)
    return statistics.median(durations)
'''),
    Alternative(cell="day03_honest_time",
                why="numpy's median of float64 durations, a list comprehension over a timed helper",
                source='''def honest_time(fn, sync, warmup: int = 3, repeats: int = 10, clock=time.perf_counter) -> float:
    import numpy as np

    def one_run() -> float:
        sync()
        begin = clock()
        fn()
        sync()
        return clock() - begin

    [fn() for _ in range(warmup)]
    return float(np.median(np.array([one_run() for _ in range(repeats)], dtype=np.float64)))
'''),
    # --- Exercise 2: h2d_bandwidth
    Alternative(cell="day03_h2d_bandwidth",
                why="host.nbytes for the bytes, .cuda()-style copies through Tensor.to with the device as keyword, "
                    "blocking copies from the pinned tensor (the sync waits for them either way)",
                source='''def h2d_bandwidth(host: torch.Tensor, device, sync, warmup: int = 1, repeats: int = 5,
                  clock=time.perf_counter) -> dict[str, float]:
    page_locked = host.pin_memory()
    seconds = {
        "pageable": honest_time(lambda: host.to(device=device), sync, warmup=warmup, repeats=repeats, clock=clock),
        "pinned": honest_time(lambda: page_locked.to(device=device), sync, warmup=warmup, repeats=repeats,
                              clock=clock),
    }
    return {name: host.nbytes / s / 10**9 for name, s in seconds.items()}
'''),
    Alternative(cell="day03_h2d_bandwidth",
                why="its own timing loop (sync, clock, copy, sync, clock; median), non_blocking copies from both "
                    "sources, bytes from the dtype's itemsize",
                source='''def h2d_bandwidth(host: torch.Tensor, device, sync, warmup: int = 1, repeats: int = 5,
                  clock=time.perf_counter) -> dict[str, float]:
    nbytes = host.numel() * host.dtype.itemsize
    sources = {"pageable": host, "pinned": host.pin_memory()}
    result = {}
    for name, source in sources.items():
        for _ in range(warmup):
            source.to(device, non_blocking=True)
        durations = []
        for _ in range(repeats):
            sync()
            start = clock()
            source.to(device, non_blocking=True)
            sync()
            durations.append(clock() - start)
        result[name] = nbytes / statistics.median(durations) / 1e9
    return result
'''),
]

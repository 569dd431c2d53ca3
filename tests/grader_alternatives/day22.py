"""Day 22 · The PyTorch profiler: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    # Exercise 1 · op_calls_per_step
    Alternative(cell="day22_op_calls_per_step",
                why="counts the recorded events with a Counter over prof.events() instead of key_averages()",
                source='''from collections import Counter


def op_calls_per_step(step_fn, active: int = 3, wait: int = 1, warmup: int = 1) -> dict[str, float]:
    sched = schedule(wait=wait, warmup=warmup, active=active, repeat=1)
    with profile(activities=[ProfilerActivity.CPU], schedule=sched) as prof:
        for _ in range(wait + warmup + active):
            step_fn()
            prof.step()
    counts = Counter(e.name for e in prof.events() if e.name.startswith("aten::"))
    return {name: n / float(active) for name, n in counts.items()}
'''),
    Alternative(cell="day22_op_calls_per_step",
                why="keeps the averages in an on_trace_ready callback (as section 3 does) and reads key/count "
                    "directly, with a while loop",
                source='''def op_calls_per_step(step_fn, active: int = 3, wait: int = 1, warmup: int = 1) -> dict[str, float]:
    seen = {}

    def keep(prof):
        for avg in prof.key_averages():
            if avg.key.startswith("aten::"):
                seen[avg.key] = seen.get(avg.key, 0) + avg.count

    calls = 0
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=1),
                                on_trace_ready=keep) as prof:
        while calls < wait + warmup + active:
            step_fn()
            calls += 1
            prof.step()
    return {k: float(v) / active for k, v in seen.items()}
'''),
    # Exercise 2 · data_wait_share
    Alternative(cell="day22_data_wait_share",
                why="loops over the steps and sums each step's data ranges, keeping numerator and denominator apart",
                source='''def data_wait_share(events: list[dict], data_name: str = "data") -> float:
    step_total = 0.0
    data_total = 0.0
    datas = [e for e in events if e["name"] == data_name]
    for step in events:
        if not step["name"].startswith("ProfilerStep"):
            continue
        lo, hi = step["start_us"], step["start_us"] + step["dur_us"]
        step_total += step["dur_us"]
        for d in datas:
            if lo <= d["start_us"] and d["start_us"] + d["dur_us"] <= hi:
                data_total += d["dur_us"]
    return data_total / step_total if step_total > 0 else 0.0
'''),
    Alternative(cell="day22_data_wait_share",
                why="math.fsum over generator expressions, in float64 via NumPy for the step total",
                source='''import math

import numpy as np


def data_wait_share(events: list[dict], data_name: str = "data") -> float:
    steps = [(e["start_us"], e["start_us"] + e["dur_us"]) for e in events if e["name"].startswith("ProfilerStep")]
    if not steps:
        return 0.0
    total = float(np.sum(np.array([b - a for a, b in steps], dtype=np.float64)))
    if total == 0:
        return 0.0

    def inside(e):
        return any(a <= e["start_us"] and e["start_us"] + e["dur_us"] <= b for a, b in steps)

    waited = math.fsum(e["dur_us"] for e in events if e["name"] == data_name and inside(e))
    return float(waited / total)
'''),
    # Exercise 3 · labelled_batches
    Alternative(cell="day22_labelled_batches",
                why="next() with a sentinel instead of catching StopIteration, and the yield after the range closes",
                source='''def labelled_batches(batches, device, name: str = "data"):
    it = iter(batches)
    done = object()
    while True:
        with torch.profiler.record_function(name):
            batch = next(it, done)
            if batch is not done:
                x, y = batch
                x = x.to(device, non_blocking=True)
                y = y.to(device, non_blocking=True)
        if batch is done:
            break
        yield x, y
'''),
    Alternative(cell="day22_labelled_batches",
                why="enters and exits the range by hand (record_function's __enter__/__exit__) around fetch and copy",
                source='''def labelled_batches(batches, device, name: str = "data"):
    iterator = iter(batches)
    while True:
        rng = record_function(name)
        rng.__enter__()
        try:
            xb, yb = next(iterator)
        except StopIteration:
            rng.__exit__(None, None, None)
            return
        xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
        rng.__exit__(None, None, None)
        yield xb, yb
'''),
    # Exercise 4 · gpu_time_breakdown
    Alternative(cell="day22_gpu_time_breakdown",
                why="a sweep line over the sorted start and end points, counting running kernels and copies",
                source='''def gpu_time_breakdown(events: list[dict], start_us: float, end_us: float) -> dict[str, float]:
    points = []
    for e in events:
        kind = "k" if e["cat"] == "kernel" else "m" if e["cat"] in ("gpu_memcpy", "gpu_memset") else None
        if kind is None:
            continue
        a, b = max(e["start_us"], start_us), min(e["start_us"] + e["dur_us"], end_us)
        if b > a:
            points += [(a, kind, 1), (b, kind, -1)]
    points.sort(key=lambda p: p[0])
    out = {"compute_us": 0.0, "memory_us": 0.0, "idle_us": 0.0}
    running = {"k": 0, "m": 0}
    t = start_us
    for when, kind, delta in points:
        state = "compute_us" if running["k"] else "memory_us" if running["m"] else "idle_us"
        out[state] += when - t
        t = when
        running[kind] += delta
    out["idle_us"] += end_us - t
    return out
'''),
    Alternative(cell="day22_gpu_time_breakdown",
                why="merges each category's intervals apart and subtracts their intersection, with explicit lists",
                source='''def _merge(spans):
    merged = []
    for a, b in sorted(spans):
        if b <= a:
            continue
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def gpu_time_breakdown(events: list[dict], start_us: float, end_us: float) -> dict[str, float]:
    def clip(e):
        return (max(e["start_us"], start_us), min(e["start_us"] + e["dur_us"], end_us))

    kernels = _merge([clip(e) for e in events if e["cat"] == "kernel"])
    copies = _merge([clip(e) for e in events if e["cat"] in ("gpu_memcpy", "gpu_memset")])
    compute = sum(b - a for a, b in kernels)
    copy_total = sum(b - a for a, b in copies)
    both = 0.0
    for a, b in copies:
        for c, d in kernels:
            both += max(0.0, min(b, d) - max(a, c))
    memory = copy_total - both
    return {"compute_us": float(compute), "memory_us": float(memory),
            "idle_us": float((end_us - start_us) - compute - memory)}
'''),
]

"""Day 14 · Week 2 project: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    # Exercise 1 · activation_bytes
    Alternative(cell="day14_activation_bytes",
                why="a module-level cache filled on first use; lines fitted with numpy.polyfit; the stage lines "
                    "probed with stage_saved directly",
                source='''_PROBES = {}

def activation_bytes(precision: str, checkpointing: bool, b: int) -> float:
    import numpy as np
    key = (precision, checkpointing)
    if key not in _PROBES:
        fwd = [forward_saved(xb[:n], precision, checkpointing) for n in (2, 4)]
        forward_fit = np.polyfit([2, 4], fwd, 1)                      # slope, intercept
        stage_fits = []
        if checkpointing:
            s2, s4 = stage_saved(xb[:2], precision), stage_saved(xb[:4], precision)
            stage_fits = [np.polyfit([2, 4], [u, v], 1) for u, v in zip(s2, s4)]
        _PROBES[key] = (forward_fit, stage_fits)
    forward_fit, stage_fits = _PROBES[key]
    total = float(np.polyval(forward_fit, b))
    if stage_fits:
        total += max(float(np.polyval(fit, b)) for fit in stage_fits)
    return total
'''),
    Alternative(cell="day14_activation_bytes",
                why="keeps a closure per choice in a dict default argument; slope and intercept written out",
                source='''def activation_bytes(precision: str, checkpointing: bool, b: int, _models={}) -> float:
    if (precision, checkpointing) not in _models:
        def fit(v2, v4):
            slope = (v4 - v2) / 2
            return v2 - 2 * slope, slope
        f2 = forward_saved(xb[:2], precision, checkpointing)
        f4 = forward_saved(xb[:4], precision, checkpointing)
        base = fit(f2, f4)
        stages = []
        if checkpointing:
            stages = [fit(u, v) for u, v in zip(stage_saved(xb[:2], precision), stage_saved(xb[:4], precision))]
        def predict(n, base=base, stages=stages):
            extra = max((c + s * n for c, s in stages), default=0.0)
            return base[0] + base[1] * n + extra
        _models[(precision, checkpointing)] = predict
    return float(_models[(precision, checkpointing)](b))
'''),
    # Exercise 2 · max_micro_batch
    Alternative(cell="day14_max_micro_batch",
                why="walks the divisors from the largest down and returns the first that fits",
                source='''def max_micro_batch(predict_peak, budget: float, logical_batch: int) -> int:
    for b in range(logical_batch, 0, -1):
        if logical_batch % b:
            continue
        if predict_peak(b) <= budget:
            return b
    return 0
'''),
    Alternative(cell="day14_max_micro_batch",
                why="collects the divisors in pairs up to the square root, filters them, max(default=0)",
                source='''def max_micro_batch(predict_peak, budget, logical_batch):
    import math
    divisors = set()
    for d in range(1, math.isqrt(logical_batch) + 1):
        if logical_batch % d == 0:
            divisors.update((d, logical_batch // d))
    return max((d for d in sorted(divisors) if predict_peak(d) <= budget), default=0)
'''),
    # The project
    Alternative(cell="day14_project_search",
                why="nested loops; FLOPs and operations counted in one with-statement around the step",
                source='''CANDIDATES = []
for precision in ("fp32", "low"):
    for checkpointing in (False, True):
        micro = max_micro_batch(predictor(precision, checkpointing), BUDGET, LOGICAL_BATCH)
        if not micro:
            continue
        cfg = Config(micro, precision, checkpointing)
        step = make_logical_step(cfg)
        with FlopCounterMode(display=False) as counter:
            n_ops = count_ops(step)
        compute_s = counter.get_total_flops() / GPU_FLOPS_PER_S[precision]
        launch_s = n_ops * OP_OVERHEAD_S
        CANDIDATES.append(dict(config=cfg, peak_bytes=peak_bytes(cfg), samples_per_s=throughput(cfg),
                               step_flops=counter.get_total_flops(), step_ops=n_ops, compute_s=compute_s,
                               launch_s=launch_s, gpu_s=max(compute_s, launch_s)))
CHOSEN = sorted(CANDIDATES, key=lambda c: c["gpu_s"])[0]["config"]
base_gpu_s = next((c["gpu_s"] for c in CANDIDATES if c["config"] == BASELINE), float("nan"))
for c in CANDIDATES:
    print(c["config"], c["gpu_s"])
print(f"CHOSEN: {CHOSEN}")
'''),
    Alternative(cell="day14_project_search",
                why="counts the FLOPs and the operations in two separate runs of the step; times first",
                source='''def describe(cfg):
    speed = throughput(cfg)
    with FlopCounterMode(display=False) as fc:
        make_logical_step(cfg)()
    ops = count_ops(make_logical_step(cfg))
    flops = fc.get_total_flops()
    terms = {"compute_s": flops / GPU_FLOPS_PER_S[cfg.precision], "launch_s": ops * OP_OVERHEAD_S}
    return {"config": cfg, "peak_bytes": peak_bytes(cfg), "samples_per_s": speed, "step_flops": flops,
            "step_ops": ops, **terms, "gpu_s": max(terms.values())}

CANDIDATES = [describe(Config(b, p, c)) for p, c in itertools.product(("fp32", "low"), (False, True))
              for b in [max_micro_batch(predictor(p, c), BUDGET, LOGICAL_BATCH)] if b > 0]
CHOSEN = min(CANDIDATES, key=lambda c: c["gpu_s"])["config"]
base_gpu_s = next((c["gpu_s"] for c in CANDIDATES if c["config"] == BASELINE), float("nan"))
print(f"CHOSEN: {CHOSEN}")
'''),
]

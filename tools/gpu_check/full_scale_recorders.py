"""Part B's full-size recorders: ResNet50 at 224 px, what the days' full-size sections (``utils.full_scale_section``)
and full-size cells show when they cannot measure live. Registered in :data:`gpu_check.recorders.RECORDERS` on import.

- Day 14: every technique once (the shared rows that the full-size sections of Days 03-26 show), on the cached input
  path, and the baseline and pinned runs once more through the DataLoader (the end-to-end rows of Days 03 and 10).
- Day 24: the compiled whole training step (forward, backward, optimizer) against eager: first call, steady state,
  break-even; the MLP step of the day's Section 2; a training step in one CUDA Graph.
- Day 25: bf16 autocast alone, each fast-path knob on top of it and all together, as the Day 25 section runs them.
- Day 30: ResNet50 exported to ONNX, parity with eager, eager vs ONNX Runtime like with like.
- Day 32: the capstone's full-size configuration's images/s and peak memory (no accuracy: no network there).

Without the real Imagenette (the GPU machine has no network) the data are generated Imagenette-shaped JPEGs
(:func:`utils.datasets.write_imagenette_like`): right for speed and memory, meaningless for accuracy, and the
payloads say so. Every full-size row records its input path, the input path's own images/s measured in the same run
and whether the run was input-bound (:func:`utils.input_path.input_bound`). Each recorder saves its rows as it goes
(``ctx.save``) and copes with having none (its budget spent before the first run).
"""
from __future__ import annotations

import copy
import math
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import nn

from gpu_check.recorders import NOTHING_MEASURED, GiB, Context, Skip, _peak, _peak_reset, best_row, recorder
from utils.batch_size import free_device_memory
from utils.data import DataSplits
from utils.device import synchronize
from utils.models import build_model
from utils.timing import time_fn

GENERATED = "generated Imagenette-shaped JPEGs (utils.datasets.write_imagenette_like): speed and memory only"


@contextmanager
def imagenette_data(ctx: Context, size: int, train_per_class: int) -> Iterator[tuple[DataSplits, str]]:
    """``(data for utils.full_scale.full_scale_run, where it came from)``: the real Imagenette at 320 px if it is on
    this disk (never at toy size), else generated JPEGs of the same shapes in a temp folder removed afterwards."""
    from utils.datasets import IMAGENETTE_FOLDERS, data_root, write_imagenette_like
    from utils.full_scale import full_scale_data

    real = data_root() / IMAGENETTE_FOLDERS["320px"]
    with tempfile.TemporaryDirectory() as tmp:
        if real.is_dir() and not ctx.tiny:
            yield full_scale_data("imagenette", size, stats_workers=8), f"Imagenette 320px from {data_root()}"
            return
        write_imagenette_like(tmp, size=ctx.pick("160px", "320px"), train_per_class=train_per_class,
                              val_per_class=ctx.pick(3, 2), num_classes=ctx.pick(3, 10))
        yield full_scale_data("imagenette", size, root=tmp, stats_workers=ctx.pick(0, 8)), GENERATED


def _run_row(r: Any, label: str, steps: int) -> dict:
    """One table row from a :class:`utils.full_scale.FullScaleResult`."""
    return {"run": label, "images_per_s": r.images_per_s, "data_wait_share": r.data_wait_share,
            "peak_memory_gib": r.peak_memory_bytes / GiB if r.peak_memory_bytes is not None else None,
            "timed_steps": steps - 3, "input_path": r.input_path, "loader_images_per_s": r.loader_images_per_s,
            "input_bound": r.input_bound}


def _input_lines(rows: list[dict]) -> list[str]:
    """What the summary says about the input paths: which runs they limited, or that none was."""
    bound = [r for r in rows if r.get("input_bound")]
    if bound:
        return [f"input-bound (the loader, not the technique, set the speed): " + ", ".join(
            f"{r.get('run', r.get('technique'))} ({r['data_wait_share']:.0%} waiting, input path alone "
            f"{r['loader_images_per_s'] or float('nan'):,.0f} images/s)" for r in bound)]
    return ["no run was input-bound: each input path alone delivered at least "
            f"{min(r['loader_images_per_s'] / r['images_per_s'] for r in rows):.1f}x the images/s trained"] \
        if rows and all(r.get("loader_images_per_s") for r in rows) else []


def _relative(rows: list[dict]) -> None:
    """Add speed and memory relative to the first row (the baseline) to every row (none: nothing to do)."""
    if not rows:
        return
    base = rows[0]
    for r in rows:
        r["speedup_vs_baseline"] = r["images_per_s"] / base["images_per_s"]
        r["memory_vs_baseline"] = (r["peak_memory_gib"] / base["peak_memory_gib"]
                                   if r["peak_memory_gib"] is not None and base["peak_memory_gib"] else None)


#: cuDNN's plan cache lives as long as the worker process, which runs Days 14, 25 and 32 one after another: a run
#: whose convolutions have the key of an earlier run's reuses the plans that run made, whatever cudnn.benchmark says
#: now. Key -> whether the first run with it autotuned.
_CONV_PLANS: dict[tuple, bool] = {}


def conv_plans_label(model: str, image_px: int, batch_size: int, technique: str, device: torch.device,
                     **knobs: Any) -> str:
    """What a run of ``technique`` with ``knobs`` gets from cuDNN's plan cache in this process: ``"-"`` (its own
    plans: autotuned if the flag is on, heuristic if not), ``"reused autotuned plans"`` or ``"reused heuristic
    plans"``. Call it just before the run (``batch_size`` in images per optimizer step). The key is what cuDNN keys
    on: the shapes (model, image size, micro-batch), the dtype, the layout and the effective TF32 flag of
    convolutions (PyTorch's default allows TF32 in cuDNN), read through ``tf32_in_use``, which never raises (the
    legacy ``cudnn.allow_tf32`` getter raises in 2.14 once conv and RNN precisions differ)."""
    from utils.techniques import resolve_settings
    from utils.tf32 import tf32_in_use

    s = resolve_settings(technique, device, **knobs)
    tf32 = s.tf32 if s.tf32 is not None else tf32_in_use()["conv"]
    autotune = s.cudnn_benchmark if s.cudnn_benchmark is not None else bool(torch.backends.cudnn.benchmark)
    micro_batch = batch_size // s.accumulation_steps
    key = (model, image_px, micro_batch, s.amp, s.channels_last, tf32)
    first_autotuned = _CONV_PLANS.setdefault(key, bool(autotune))
    if first_autotuned == bool(autotune):
        return "-"
    return "reused autotuned plans" if first_autotuned else "reused heuristic plans"


# ----------------------------------------------------------------------------------------------------------- 14
# technique -> the days that teach it (the rows Days 03-32 show as their full-size reference)
# (utils.full_scale_section shows a day the rows of its own techniques from this recording)
FULL_SCALE_DAYS = {"baseline": "day03, day09, day13, day14, day24, day26", "pinned": "day03, day25",
                   "tf32": "day11, day25", "bf16": "day11, day14, day25", "fp16": "day11, day14, day25",
                   "channels_last": "day25", "checkpointing": "day13, day14", "accumulation": "day12, day14",
                   "fast": "day25, day26"}


@recorder("day14", 45, "ResNet50 at 224 px, batch 64, one technique at a time (utils.full_scale.full_scale_run) on "
                       "the cached input path (decoded once, crop/flip on the GPU), then baseline and pinned again "
                       "through the DataLoader (JPEG decoding in worker processes): images/s, data-wait share, the "
                       "input path's own images/s, peak memory, 40 steps each")
def record_day14(ctx: Context) -> dict:
    from utils.full_scale import full_scale_run
    from utils.precision import has_native_bf16
    from utils.techniques import TECHNIQUES

    size, model, steps, batch = ctx.pick((32, "small_cnn", 4, 8), (224, "resnet50", 40, 64))
    half = "bf16" if has_native_bf16(ctx.device) else "fp16"
    techniques = ctx.pick(["baseline", "accumulation", "fast"],
                          ["baseline", "pinned", "tf32", half, "channels_last", "checkpointing", "accumulation",
                           "fast"])
    runs = [(t, "cached") for t in techniques] + [(t, "dataloader") for t in ("baseline", "pinned")]
    if ctx.tiny:
        runs = runs[:3] + runs[-1:]
    rows, settings, skipped, used_workers = [], {}, [], None

    def summary() -> list[str]:
        lines = [f"{model} {size} px, batch {batch}, data: {source}; cached input path unless the row says "
                 f"DataLoader ({used_workers} worker processes)"]
        lines += [f"{r['run']}: {r['images_per_s']:,.0f} images/s (x{r['speedup_vs_baseline']:.2f}), "
                  f"{r['data_wait_share']:.0%} of the time waiting for data"
                  + (f", peak {r['peak_memory_gib']:.2f} GiB (x{r['memory_vs_baseline']:.2f})"
                     if r["peak_memory_gib"] is not None and r["memory_vs_baseline"] is not None else "")
                  for r in rows] or [NOTHING_MEASURED]
        lines += _input_lines(rows)
        if skipped:
            lines.append(f"not run (time budget spent): {', '.join(skipped)}")
        return lines + ["torch.compile is not in this table: compiling ResNet50's training step takes minutes"]

    with imagenette_data(ctx, size, train_per_class=ctx.pick(12, 26)) as (data, source):
        for technique, path in runs:
            label = technique if path == "cached" else f"{technique} via DataLoader"
            if ctx.left_s() < ctx.pick(0, 6):
                skipped.append(label)
                continue
            plans = conv_plans_label(model, size, batch, technique, ctx.device) if ctx.cuda else "-"
            r = full_scale_run(technique, steps=steps, batch_size=batch, data=data, model=model,
                               num_workers=ctx.pick(0, None), eval_batches=0, device=ctx.device,
                               allow_cpu=ctx.tiny, progress=False, input_path=path)
            rows.append({**_run_row(r, label, steps), "technique": technique, "what": TECHNIQUES[technique][1],
                         "days": FULL_SCALE_DAYS.get(technique, "") if path == "cached" else "day03, day10",
                         "cudnn_plans": plans})
            settings[label] = r.settings
            if path == "dataloader":
                used_workers = r.extras["num_workers"]
            free_device_memory(ctx.device)
            _relative(rows)
            ctx.save({"summary": summary(), "rows": rows, "model": model, "image_px": size, "batch": batch})
    _relative(rows)
    return {"summary": summary(), "rows": rows, "model": model, "image_px": size, "batch": batch, "data": source,
            "num_workers": used_workers, "settings": settings}


# ----------------------------------------------------------------------------------------------------------- 24
def _mlp(width: int, depth: int, device: torch.device) -> nn.Module:
    torch.manual_seed(0)
    blocks: list[nn.Module] = []
    for _ in range(depth):
        blocks += [nn.Linear(width, width), nn.GELU(), nn.LayerNorm(width)]
    return nn.Sequential(*blocks, nn.Linear(width, 10)).to(device)


def windowed_s(fn: Any, device: torch.device, calls: int, rounds: int = 5, warmup: int = 5) -> float:
    """Seconds per call of ``fn``: ``calls`` calls back to back between two CUDA events (no host sync inside the
    window: a step of 50-500 us would otherwise measure the sync), the median of ``rounds`` windows after
    ``warmup`` calls. On a CPU, the same with the host clock."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(rounds):
        if device.type == "cuda":
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / 1e3 / calls)
        else:
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            synchronize(device)
            times.append((time.perf_counter() - t0) / calls)
    return statistics.median(times)


def _graph_vs_eager_training(width: int, batch: int, device: torch.device, replays: int = 100) -> dict:
    """A whole training step (forward, backward, Adam) captured in one CUDA Graph, against the same step run
    eagerly as an eager loop would run it: default Adam (``capturable=False``, its step count on the host) on a copy
    of the same network. Both timed over ``replays`` back-to-back steps between CUDA events. The network is Day 24
    Section 5's (Linear-ReLU-Linear-ReLU-Linear): the share a graph saves depends on how many kernels a step has."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                        nn.Linear(width, 10)).to(device)
    eager_net = copy.deepcopy(net)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, capturable=True)    # a captured step needs capturable state
    eager_opt = torch.optim.Adam(eager_net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    static_x, static_y = torch.randn(batch, width, device=device), torch.randint(0, 10, (batch,), device=device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):            # warm up outside the capture: lazy state is created here
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_fn(net(static_x), static_y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        loss_fn(net(static_x), static_y).backward()
        opt.step()
    xb, yb = torch.randn(batch, width, device=device), torch.randint(0, 10, (batch,), device=device)

    def graphed() -> None:
        static_x.copy_(xb)
        static_y.copy_(yb)
        graph.replay()

    def eager() -> None:
        eager_opt.zero_grad(set_to_none=True)
        loss_fn(eager_net(xb), yb).backward()
        eager_opt.step()

    t_graph = windowed_s(graphed, device, replays)
    t_eager = windowed_s(eager, device, replays)
    return {"width": width, "batch": batch, "eager_step_us": t_eager * 1e6, "graph_step_us": t_graph * 1e6,
            "saved_share": 1 - t_graph / t_eager, "steps_per_window": replays, "eager_optimizer": "Adam (default)",
            "graph_optimizer": "Adam (capturable=True)"}


def break_even_calls(first_call_s: float, eager_step_s: float, compiled_step_s: float) -> float:
    """The smallest ``N >= 1`` with ``first_call_s + (N - 1) * compiled_step_s <= N * eager_step_s`` (the first call
    already did one step), ``math.inf`` when the compiled step is not faster: Day 24's Exercise 1."""
    if first_call_s <= eager_step_s:
        return 1
    gain = eager_step_s - compiled_step_s
    if gain <= 0:
        return math.inf
    return max(1, math.ceil((first_call_s - compiled_step_s) / gain - 1e-9))


def compile_payoff(step: Any, inputs: tuple, device: torch.device, calls: int, **compile_kwargs: Any) -> dict:
    """Day 24's protocol: eager steady state, the compiled step's first call timed once between synchronisations,
    then the compiled steady state; each steady state as :func:`windowed_s` times it (``calls`` steps between two
    CUDA events, median of 3 windows); peak memory of each steady state on CUDA. Seconds and bytes."""
    _peak_reset(device)
    eager_s = windowed_s(lambda: step(*inputs), device, calls, rounds=3, warmup=3)
    eager_peak = _peak(device)
    compiled = torch.compile(step, **compile_kwargs)
    synchronize(device)
    start = time.perf_counter()
    compiled(*inputs)                           # tracing, AOTAutograd, code generation and one step
    synchronize(device)
    first_call_s = time.perf_counter() - start
    compiled(*inputs)                           # later one-off work (e.g. CUDA Graph recording) outside the peak
    _peak_reset(device)
    compiled_s = windowed_s(lambda: compiled(*inputs), device, calls, rounds=3, warmup=3)
    return {"first_call_s": first_call_s, "eager_step_ms": eager_s * 1e3,
            "compiled_step_ms": compiled_s * 1e3, "speedup": eager_s / compiled_s,
            "break_even_steps": break_even_calls(first_call_s, eager_s, compiled_s),
            "eager_peak_gib": eager_peak / GiB if eager_peak is not None else None,
            "compiled_peak_gib": (_peak(device) or 0) / GiB if device.type == "cuda" else None}


def training_step_for(model: nn.Module, opt: torch.optim.Optimizer) -> Any:
    """Day 24's ``train_step_for``: forward, loss, backward, optimizer update, gradients set to None; the loss back."""
    def train_step(xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        loss = nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()
    return train_step


def _dynamo_graphs() -> tuple[int, list[str]]:
    """Graphs Dynamo made since its counters were cleared, and the distinct graph-break reasons (first lines)."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"], sorted({r.splitlines()[0] for r in counters["graph_break"]})


@recorder("day24", 60, "a whole MLP training step in one CUDA Graph vs the same step eager (default Adam), timed "
                       "over 100 back-to-back steps with CUDA events; Section 2's MLP step (8 x Linear-GELU-"
                       "LayerNorm, width 1024, batch 1024, AdamW) compiled with torch.compile (default, then "
                       "reduce-overhead); the whole ResNet50 training step (224 px, batch 64, fp32 + SGD momentum "
                       "0.9) compiled, timed as Day 24's measure_compile_payoff does (first call, steady state, "
                       "break-even, eager in the same run); each part only if the budget still holds it")
def record_day24(ctx: Context) -> dict:
    from torch._dynamo.utils import counters

    # The dry run: Dynamo + AOTAutograd without Inductor's code generation (minutes of C++ compilation on a CPU).
    settings = (lambda mode: {"backend": "aot_eager"}) if ctx.tiny else (lambda mode: {"mode": mode})
    calls = ctx.pick(3, 20)
    rows: list[dict] = []
    graphs_rows: list[dict] = []
    skipped: list[str] = []
    name, size, batch = ctx.pick(("small_cnn", 32, 8), ("resnet50", 224, 64))

    def summary() -> list[str]:
        lines = [f"whole MLP training step in a CUDA Graph, width {g['width']}: eager {g['eager_step_us']:.0f} us, "
                 f"graph {g['graph_step_us']:.0f} us per step over {g['steps_per_window']} steps: "
                 f"{g['saved_share']:.0%} of the step saved" for g in graphs_rows]
        for r in rows:
            even = r["break_even_steps"]
            pays = (f"pays off after {even:,} steps" if even not in (None, math.inf)
                    else "never pays off (the compiled step is not faster)")
            lines.append(f"{r['step']}, {r['mode']}: first call {r['first_call_s']:.1f} s, eager "
                         f"{r['eager_step_ms']:.2f} ms, compiled {r['compiled_step_ms']:.2f} ms per step: "
                         f"x{r['speedup']:.2f}, {pays}; {r['dynamo_graphs']} graphs")
        if skipped:
            lines.append(f"not run (time budget spent): {', '.join(skipped)}")
        if ctx.tiny:
            lines.append("dry run: the aot_eager back end (no Inductor code generation); Inductor and CUDA Graphs "
                         "need the GPU run")
        return lines or [NOTHING_MEASURED]

    def save() -> None:
        for r in rows:        # JSON has no infinity
            r["break_even_steps"] = None if r["break_even_steps"] == math.inf else r["break_even_steps"]
        ctx.save({"summary": summary(), "rows": rows, "cuda_graph_training": graphs_rows})

    # 1. A whole training step in one CUDA Graph (Section 5): seconds.
    if ctx.cuda:
        graphs_rows += [_graph_vs_eager_training(w, 64, ctx.device) for w in (64, 1024)]
        save()
    # 2. Section 2's MLP step, default mode then reduce-overhead; 3. ResNet50's whole step (the costliest compile).
    width, depth, mlp_batch = ctx.pick((64, 2, 32), (1024, 8, 1024))
    plan = [("mlp", "default", 15), ("resnet", "default", 40), ("mlp", "reduce-overhead", 15)]
    for what, mode, needs_s in (plan if not ctx.tiny else plan[:2]):
        label = f"MLP step, {mode}" if what == "mlp" else f"{name} training step, {mode}"
        if ctx.left_s() < ctx.pick(0, needs_s):
            skipped.append(label)
            continue
        torch._dynamo.reset()
        counters.clear()
        torch.manual_seed(0)
        if what == "mlp":
            net = _mlp(width, depth, ctx.device).train()
            xb = torch.randn(mlp_batch, width, device=ctx.device)
            yb = torch.randint(0, 10, (mlp_batch,), device=ctx.device)
            r = compile_payoff(training_step_for(net, torch.optim.AdamW(net.parameters(), lr=1e-3)), (xb, yb),
                               ctx.device, calls * 2, **settings(mode))
            extra = {"step": f"MLP {depth} x {width}, batch {mlp_batch}, AdamW", "eager_images_per_s": None,
                     "compiled_images_per_s": None}
        else:
            net = build_model(name, 10, image_size=size).to(ctx.device).train()
            xb = torch.randn(batch, 3, size, size, device=ctx.device)
            yb = torch.randint(0, 10, (batch,), device=ctx.device)
            r = compile_payoff(training_step_for(net, torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)),
                               (xb, yb), ctx.device, calls, **settings(mode))
            extra = {"step": f"{name} {size} px batch {batch}, SGD", "eager_images_per_s": batch / r["eager_step_ms"]
                     * 1e3, "compiled_images_per_s": batch / r["compiled_step_ms"] * 1e3}
        graphs, breaks = _dynamo_graphs()
        rows.append({**extra, "mode": mode, **r, "dynamo_graphs": graphs, "graph_breaks": breaks})
        del net, xb, yb
        torch._dynamo.reset()
        free_device_memory(ctx.device)
        save()
    save()
    return {"summary": summary(), "rows": rows, "cuda_graph_training": graphs_rows,
            "compile_settings": settings("default"), "image_px": size, "batch": batch}


# ----------------------------------------------------------------------------------------------------------- 25
#: Day 25's knobs, as its full-size cell switches them on one at a time on top of mixed precision (same names).
DAY25_KNOBS = {"tf32": {"tf32": True}, "channels_last": {"channels_last": True},
               "cudnn_benchmark": {"cudnn_benchmark": True}, "fused_sgd": {"optimizer_impl": "fused"},
               "pinned": {"pin_memory": True}}


@recorder("day25", 35, "ResNet50 at 224 px, batch 64, as Day 25's full-size section runs it (the cached input path: "
                       "decoded once, crop/flip on the GPU): bf16 autocast alone (fp16 + GradScaler before Ampere), "
                       "each fast-path knob on top of it (TF32, channels_last, cudnn.benchmark, fused SGD, pinned "
                       "memory) and all of them ('fast'): images/s, data-wait share, the input path's own images/s "
                       "and peak memory, 40 steps each")
def record_day25(ctx: Context) -> dict:
    from utils.full_scale import full_scale_run
    from utils.precision import has_native_bf16

    size, model, steps, batch = ctx.pick((32, "small_cnn", 4, 8), (224, "resnet50", 40, 64))
    half = "bf16" if has_native_bf16(ctx.device) else "fp16"
    variants = ([(half, half, {})] + [(f"{half}+{k}", half, kw) for k, kw in DAY25_KNOBS.items()]
                + [("fast", "fast", {})])
    if ctx.tiny:     # the dry run checks the code path: the baseline, one knob and all of them
        variants = [variants[0], variants[2], variants[-1]]
    rows, skipped = [], []

    def summary() -> list[str]:
        lines = [f"{model} {size} px, batch {batch}, data: {source}, cached input path; every ratio is against "
                 f"{half} autocast alone"]
        lines += [f"{r['run']}: {r['images_per_s']:,.0f} images/s (x{r['speedup_vs_baseline']:.2f}), "
                  f"{r['data_wait_share']:.0%} waiting for data"
                  + (f", peak {r['peak_memory_gib']:.2f} GiB (x{r['memory_vs_baseline']:.2f})"
                     if r["peak_memory_gib"] is not None and r["memory_vs_baseline"] is not None else "")
                  for r in rows] or [NOTHING_MEASURED]
        lines += _input_lines(rows)
        # The kit's budget has no room for a fresh process per run, as the notebook starts for its flag-on runs.
        heuristic = [r["run"] for r in rows if r.get("cudnn_plans") == "reused heuristic plans"]
        autotuned = [r["run"] for r in rows if r.get("cudnn_plans") == "reused autotuned plans"]
        if heuristic:
            lines.append(f"{', '.join(heuristic)}: cudnn.benchmark on, but an earlier run in this process had the same "
                         "convolutions (shapes, dtype, layout, TF32) with the flag off; cuDNN's plan cache is keyed "
                         "without the flag, so these rows reuse those plans and do not measure autotuning (Day 25's "
                         "own full-size run trains them in a fresh process)")
        if autotuned:
            lines.append(f"{', '.join(autotuned)}: cudnn.benchmark off, but an earlier run in this process autotuned "
                         "the same convolutions (Day 14's recorder runs first); these rows reuse the autotuned "
                         "plans, so their ratio includes autotuning")
        if skipped:
            lines.append(f"not run (time budget spent): {', '.join(skipped)}")
        return lines

    with imagenette_data(ctx, size, train_per_class=ctx.pick(12, 26)) as (data, source):
        for label, technique, knobs in variants:
            if ctx.left_s() < ctx.pick(0, 5):
                skipped.append(label)
                continue
            plans = conv_plans_label(model, size, batch, technique, ctx.device, **knobs) if ctx.cuda else "-"
            r = full_scale_run(technique, steps=steps, batch_size=batch, data=data, model=model,
                               num_workers=ctx.pick(0, None), eval_batches=0, device=ctx.device,
                               allow_cpu=ctx.tiny, progress=False, **knobs)
            rows.append({**_run_row(r, label, steps), "technique": technique,
                         "knobs": ", ".join(f"{k}={v}" for k, v in knobs.items()) or "-", "cudnn_plans": plans})
            free_device_memory(ctx.device)
            _relative(rows)
            ctx.save({"summary": summary(), "rows": rows, "model": model, "image_px": size, "batch": batch,
                      "amp": half})
    _relative(rows)
    return {"summary": summary(), "rows": rows, "model": model, "image_px": size, "batch": batch, "data": source,
            "input_path": "cached", "amp": half}


# ----------------------------------------------------------------------------------------------------------- 30
def export_onnx(model: nn.Module, example: torch.Tensor, path: Path) -> Path:
    """Day 30's export: the dynamo exporter, a dynamic batch dimension, weights as external data, checked."""
    import onnx

    model.eval()
    torch.onnx.export(model, (example,), str(path), dynamo=True, external_data=True,
                      dynamic_shapes=({0: torch.export.Dim("batch")},), input_names=["images"],
                      output_names=["logits"], verbose=False)
    onnx.checker.check_model(str(path), full_check=True)
    return path


def eager_vs_onnxruntime(net: nn.Module, session: Any, dev: torch.device, batches: list[int], size: int,
                         repeats: int) -> list[dict]:
    """Day 30's like-with-like timing: fp32 with TF32 off on both sides, a host array in and out, cudnn.benchmark on
    where ONNX Runtime's CUDA provider searches convolution algorithms, warm-up, synchronised medians (ms)."""
    import copy

    from utils.tf32 import tf32_disabled

    net = copy.deepcopy(net).to(dev).eval()      # eager on the device ONNX Runtime computes on: like with like
    saved = torch.backends.cudnn.benchmark
    rows = []
    try:
        torch.backends.cudnn.benchmark = dev.type == "cuda"
        with tf32_disabled(), torch.inference_mode():
            for n in batches:
                x_np = torch.randn(n, 3, size, size).numpy()
                t_eager = time_fn(lambda: net(torch.from_numpy(x_np).to(dev)).cpu(), device=dev, warmup=3,
                                  repeats=repeats)
                t_ort = time_fn(lambda: session(x_np), device=dev, warmup=3, repeats=repeats)
                rows.append({"batch": n, "device": dev.type, "eager_ms": t_eager.median_s * 1e3,
                             "onnxruntime_ms": t_ort.median_s * 1e3, "speedup": t_eager.median_s / t_ort.median_s,
                             "onnxruntime_images_per_s": n / t_ort.median_s})
    finally:
        torch.backends.cudnn.benchmark = saved
    return rows


@recorder("day30", 15, "torchvision ResNet50 at 224 px (random weights) exported to ONNX as Day 30 does (dynamo "
                       "exporter, dynamic batch, external data, onnx.checker); parity with eager fp32; eager vs ONNX "
                       "Runtime like with like (fp32, TF32 off, host array in and out) on the CUDA provider at "
                       "batches 1, 8, 64, and the TensorRT provider (TF32 by default, so not like with like) only "
                       "where this onnxruntime has it; skipped where onnxruntime has no CUDA provider (the "
                       "notebook's CPU comparison needs no recording)")
def record_day30(ctx: Context) -> dict:
    import onnxruntime as ort
    import torchvision

    available = ort.get_available_providers()
    if ctx.cuda and "CUDAExecutionProvider" not in available:
        raise Skip(f"onnxruntime {ort.__version__} has no CUDA provider here ({', '.join(available)}): the "
                   "comparison would run on the CPU, which the notebook measures itself (onnxruntime-gpu records it)")
    size, batches, repeats = ctx.pick((16, [1, 4], 3), (224, [1, 8, 64], 10))
    torch.manual_seed(0)
    net = (build_model("small_cnn", 10, image_size=size) if ctx.tiny else torchvision.models.resnet50()).eval()
    net = net.to(ctx.device)
    summary, rows = [], []
    # The timed eager runs use cudnn.benchmark; cuDNN's plan cache is keyed without it, so it is on from the first
    # convolution (the parity reference at batch 8 would otherwise fix batch 8's plan from the heuristic).
    benchmark_before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = ctx.cuda
    try:
        return _record_day30(ctx, ort, net, size, batches, repeats, available, summary, rows)
    finally:
        torch.backends.cudnn.benchmark = benchmark_before


def _record_day30(ctx: Context, ort, net: torch.nn.Module, size: int, batches: list[int], repeats: int,
                  available: list[str], summary: list[str], rows: list[dict]) -> dict:
    from utils.export import OnnxModel, max_abs_diff
    from utils.tf32 import tf32_disabled

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        path = export_onnx(net, torch.randn(2, 3, size, size, device=ctx.device), Path(tmp) / "model.onnx")
        export_s = time.perf_counter() - start
        sizes_mb = sum(f.stat().st_size for f in Path(tmp).glob("model.onnx*")) / 1e6
        session = OnnxModel(path, threads=torch.get_num_threads(), cuda_device=ctx.device.index or 0)
        ort_dev = ctx.device if ctx.cuda and "CUDAExecutionProvider" in session.providers else torch.device("cpu")
        torch.manual_seed(1)
        images = torch.randn(8, 3, size, size)
        with torch.inference_mode(), tf32_disabled():
            reference = net(images.to(ctx.device)).cpu()
        got = session(images)
        parity = {"images": len(images), "inputs": "random normal images (speed and parity, not accuracy)",
                  "providers": session.providers, "max_abs_diff": max_abs_diff(reference, got),
                  "largest_abs_logit": float(reference.abs().max()),
                  "argmax_agreement": float((got.argmax(1) == reference.numpy().argmax(1)).mean())}
        parity["holds"] = parity["max_abs_diff"] < 1e-4 * max(1.0, parity["largest_abs_logit"])
        ctx.save({"summary": [f"exported in {export_s:.1f} s; parity max abs diff {parity['max_abs_diff']:.2e}"],
                  "rows": [], "parity": parity})
        rows = [{"runtime": f"onnxruntime {session.providers[0]}", **r}
                for r in eager_vs_onnxruntime(net, session, ort_dev, batches, size, repeats)]
        if "TensorrtExecutionProvider" in available and ctx.cuda and ctx.left_s() > 25:
            trt_batch = 64   # one shape: each new input shape builds a new engine
            trt = OnnxModel(path, providers=[("TensorrtExecutionProvider", {"device_id": str(ctx.device.index or 0)}),
                                             "CUDAExecutionProvider"], cuda_device=ctx.device.index or 0)
            rows += [{"runtime": "onnxruntime TensorrtExecutionProvider (fp32 weights; TensorRT builds TF32 kernels by "
                                 "default, and this provider has no switch for it)", **r}
                     for r in eager_vs_onnxruntime(net, trt, ctx.device, [trt_batch], size, repeats)]
        elif ctx.cuda:
            summary.append("TensorRT: not measured (no TensorrtExecutionProvider in this onnxruntime, or no time left)")
    summary.insert(0, f"{'ResNet50' if not ctx.tiny else 'small_cnn'} {size} px: exported in {export_s:.1f} s "
                      f"({sizes_mb:.1f} MB with its external data); parity with eager fp32 on {parity['images']} "
                      f"random images: max abs diff {parity['max_abs_diff']:.2e} -> "
                      + ("holds" if parity["holds"] else "FAILS"))
    summary += [f"{r['runtime']}, batch {r['batch']} on {r['device']}: eager {r['eager_ms']:.2f} ms, onnxruntime "
                f"{r['onnxruntime_ms']:.2f} ms: onnxruntime runs at {r['speedup']:.2f}x eager's speed" for r in rows
                if r["speedup"] is not None]
    del net
    free_device_memory(ctx.device)
    return {"summary": summary, "rows": rows, "parity": parity, "export_s": export_s, "onnx_mb": sizes_mb,
            "image_px": size, "onnxruntime": ort.__version__, "available_providers": available}


# ----------------------------------------------------------------------------------------------------------- 32
ACCURACY_NOT_RECORDED = ("no accuracy is recorded: the GPU machine has no network, so the runs train on generated "
                         "JPEGs that carry no class information, for a few steps")


@recorder("day32", 20, "the capstone's full-size configuration (ResNet50 at 224 px, micro-batch 128 x 2 accumulation "
                       "steps, mixed precision, the cached input path) trained through utils.full_scale.full_scale_run "
                       "on Imagenette-shaped JPEGs: images/s, data-wait share, the input path's own images/s and peak "
                       "memory, with the same run in fp32 (TF32 off) beside it (the capstone's one-knob comparison); "
                       "no accuracy")
def record_day32(ctx: Context) -> dict:
    from utils.full_scale import full_scale_run
    from utils.precision import has_native_bf16

    size, model, steps, micro = ctx.pick((32, "small_cnn", 4, 4), (224, "resnet50", 20, 128))
    half = "bf16" if has_native_bf16(ctx.device) else "fp16"
    rows, skipped = [], []

    def summary() -> list[str]:
        lines = [f"{model} {size} px, micro-batch {micro} x 2 accumulation steps (batch {2 * micro}), cached input "
                 f"path, data: {source}"]
        lines += [f"{r['run']}: {r['images_per_s']:,.0f} images/s (x{r['speedup_vs_baseline']:.2f} vs the first "
                  f"row), {r['data_wait_share']:.0%} waiting for data"
                  + (f", peak {r['peak_memory_gib']:.2f} GiB" if r["peak_memory_gib"] is not None else "")
                  for r in rows] or [NOTHING_MEASURED]
        lines += _input_lines(rows)
        lines += [f"accuracy: {ACCURACY_NOT_RECORDED}; the capstone's accuracy target stays to be confirmed by a run "
                  "with the real Imagenette",
                  "optimizer: full_scale_run's SGD with momentum, where the capstone uses AdamW (two moments instead "
                  "of one momentum buffer: about 0.1 GiB more state for ResNet50)"]
        if skipped:
            lines.append(f"not run (time budget spent): {', '.join(skipped)}")
        return lines

    with imagenette_data(ctx, size, train_per_class=ctx.pick(12, 30)) as (data, source):
        for label, technique, knobs in ((f"{half} autocast (the capstone's AMP='auto')", half, {}),
                                        ("fp32 (TF32 off)", "baseline", {"tf32": False})):
            if ctx.left_s() < ctx.pick(0, 8):
                skipped.append(label)
                continue
            r = full_scale_run(technique, steps=steps, batch_size=2 * micro, accumulation_steps=2, data=data,
                               model=model, num_workers=ctx.pick(0, None), eval_batches=0, device=ctx.device,
                               allow_cpu=ctx.tiny, progress=False, **knobs)
            rows.append({**_run_row(r, label, steps), "micro_batch": r.micro_batch_size, "batch": r.batch_size})
            free_device_memory(ctx.device)
            _relative(rows)
            ctx.save({"summary": summary(), "rows": rows, "accuracy": None, "accuracy_note": ACCURACY_NOT_RECORDED})
    _relative(rows)
    return {"summary": summary(), "rows": rows, "model": model, "image_px": size, "micro_batch": micro,
            "accumulation_steps": 2, "data": source, "input_path": "cached", "accuracy": None,
            "accuracy_note": ACCURACY_NOT_RECORDED}

"""Part B of the GPU check: the full-size recordings that notebooks show when they cannot measure live.

One function per day, registered with :func:`recorder` under the day's folder name. Each measures what its notebook
measures on a CUDA GPU (at the notebook's GPU sizes, or the size named in ``what``), through the course's own
``utils`` functions, and returns a payload: ``what`` (one line), ``summary`` (lines computed from the measurement),
``rows`` (a table) and anything else the day's notebook reads. The runner (``tools/gpu_check.py``) adds
:func:`utils.profiling.provenance` and writes ``results/<day>/<gpu>.json``. With ``tiny=True`` (the CPU dry run)
every recorder runs the same code at toy sizes so that the kit cannot rot; GPU-only steps are then skipped and the
payload says so.

Each recorder is bounded in time: its loops are sized to finish well inside ``budget_s`` on an H200, and the runner
kills a recorder that overruns its budget by a quarter and moves on. A recorder hands what it has measured so far to
``ctx.save(payload)`` as it goes: the runner writes it at once (marked ``partial``), so that a recorder stopped by
its limit, or a device call cut short, still returns its first rows. A recorder with nothing to measure on this
machine raises :class:`Skip` (Day 30 without a CUDA provider in onnxruntime). The full-size recorders (ResNet50 at
224 px: Days 14, 24, 25, 30 and 32) are in :mod:`gpu_check.full_scale_recorders`; :data:`RUN_ORDER` is the order
the kit runs them all in: the cheap per-day measurements first, then the ResNet50 runs.
"""
from __future__ import annotations

import gzip
import json
import pickle
import re
import statistics
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
from torch import nn

from utils.batch_size import budget_fits, cuda_fits, find_max_batch_size, formula_max_batch_size, free_device_memory
from utils.device import synchronize
from utils.fast_path import fast_path_flags, restore_fast_path_flags
from utils.memory import cuda_peak_training_bytes, measure_breakdown, parameter_bytes, saved_activation_bytes
from utils.models import build_model, resnet50, small_cnn
from utils.profiling import (HOST_RANGE_CATS, memory_snapshot_summary, profile_records, trace_events, trim_chrome_trace,
                             trim_memory_snapshot)
from utils.step import train_step
from utils.timing import time_fn

GiB = 2**30
MAX_TRACE_BYTES = 3 * 2**20      # a committed profiler trace, gzip-compressed
MAX_SNAPSHOT_BYTES = 4 * 2**20   # a committed memory snapshot (pickle, what memory_viz opens)


class Skip(Exception):
    """Raised by a recorder that has nothing to measure on this machine; the message says why."""


@dataclass
class Context:
    """What a recorder needs: the device, the size (``tiny`` on the CPU dry run), where its extra files go
    (``out_dir`` = ``results/<day>`` of the bundle), the file stem of this GPU (``slug``), its time budget, and
    ``saver``, which writes a partial payload (:meth:`save`)."""

    device: torch.device
    tiny: bool
    out_dir: Path
    slug: str
    budget_s: float
    started: float = field(default_factory=time.perf_counter)
    saver: Callable[[dict], None] | None = None

    def save(self, payload: dict) -> None:
        """Write what is measured so far (``summary`` and ``rows`` at least), marked partial."""
        if self.saver is not None:
            self.saver(payload)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def pick(self, tiny: Any, full: Any) -> Any:
        return tiny if self.tiny else full

    def left_s(self) -> float:
        return self.budget_s - (time.perf_counter() - self.started)


@dataclass
class Recorder:
    day: str
    budget_s: float     # seconds on an H200; the runner stops a part at GPU_SLACK (tools/gpu_check.py) times this
    what: str
    fn: Callable[[Context], dict]


RECORDERS: dict[str, Recorder] = {}


def recorder(day: str, budget_s: float, what: str) -> Callable[[Callable[[Context], dict]], Callable]:
    def register(fn: Callable[[Context], dict]) -> Callable[[Context], dict]:
        RECORDERS[day] = Recorder(day, budget_s, what, fn)
        return fn
    return register


def gpu_slug(device: torch.device) -> str:
    """File stem for results of ``device``: ``nvidia_h200`` for an NVIDIA H200, ``cpu`` on the CPU."""
    if device.type != "cuda":
        return device.type
    return re.sub(r"[^a-z0-9]+", "_", torch.cuda.get_device_name(device).lower()).strip("_")


@contextmanager
def tf32(enabled: bool) -> Iterator[None]:
    """TF32 for matmuls and cuDNN convolutions on (True) or off (False) inside the block; flags restored after."""
    saved = fast_path_flags()
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        restore_fast_path_flags(saved)


def _batch(n: int, size: int, device: torch.device, classes: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(n, 3, size, size, device=device), torch.randint(0, classes, (n,), device=device)


def _peak_reset(device: torch.device) -> None:
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)


def _peak(device: torch.device) -> int | None:
    return int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else None


NOTHING_MEASURED = "nothing measured: the time budget was spent before the first run"


def best_row(rows: list[dict], key: str) -> dict | None:
    """The row with the largest ``key``, or ``None`` for no rows (a recorder cut short before its first)."""
    return max(rows, key=lambda r: r[key]) if rows else None


# ----------------------------------------------------------------------------------------------------------- 02
@recorder("day02", 8, "GPU-Util (NVML) sampled while a 1-element add and an n x n fp32 matmul run in loops")
def record_day02(ctx: Context) -> dict:
    from utils.monitoring import Monitor

    n = ctx.pick(256, 8192)
    phase_s = ctx.pick(0.3, 1.5)
    backend = "nvml" if ctx.cuda else "psutil"
    util_key = "gpu_util_pct" if ctx.cuda else "process_cpu_pct"
    tiny = torch.zeros(1, device=ctx.device)
    a, b = torch.randn(n, n, device=ctx.device), torch.randn(n, n, device=ctx.device)
    a @ b
    synchronize(ctx.device)
    phases = []
    with Monitor(interval_s=0.05, backend=backend, device=ctx.device if ctx.cuda else None) as mon:
        time.sleep(phase_s / 2)
        # The matmul loop syncs every 8 calls: unbounded, it would queue ~1000 launches (tens of seconds of work)
        # that the final synchronize then waits for. The adds finish as fast as they are launched.
        for label, fn, flop, sync_every in (("1-element add", lambda: tiny.add_(1), 1, 0),
                                            (f"{n}x{n} matmul", lambda: a @ b, 2 * n**3, 8)):
            mon.mark(label)
            start, calls = time.perf_counter(), 0
            while time.perf_counter() - start < phase_s:
                fn()
                calls += 1
                if sync_every and calls % sync_every == 0:
                    synchronize(ctx.device)
            synchronize(ctx.device)
            elapsed = time.perf_counter() - start
            phases.append((label, mon.marks[-1][0], mon.marks[-1][0] + elapsed, calls / elapsed, flop))
        mon.mark("idle")
        time.sleep(phase_s / 2)
    trace = mon.as_dict()
    rows = []
    for label, t0, t1, rate, flop in phases:
        # Skip the first NVML window of a phase: NVML averages over up to 1 s, so it still holds the phase before.
        util = [u for t, u in zip(trace["t_s"], trace[util_key]) if t0 + 0.25 * (t1 - t0) <= t <= t1 and u is not None]
        rows.append({"loop": label, "seconds": t1 - t0, "calls_per_s": rate, "tflop_per_s": rate * flop / 1e12,
                     "util_pct_mean": statistics.fmean(util) if util else None, "samples": len(util)})
    ratio = rows[1]["tflop_per_s"] / rows[0]["tflop_per_s"]
    summary = [f"{'GPU-Util' if ctx.cuda else 'process CPU'}: {rows[0]['util_pct_mean'] or float('nan'):.0f} % "
               f"with 1-element adds, {rows[1]['util_pct_mean'] or float('nan'):.0f} % with {n}x{n} matmuls, while "
               f"the useful work differs {ratio:,.0f}x ({rows[1]['tflop_per_s']:.3g} vs "
               f"{rows[0]['tflop_per_s']:.2e} TFLOP/s): utilisation is a time fraction, not a work rate."]
    keep = ("t_s", util_key, "gpu_mem_used_bytes" if ctx.cuda else "process_rss_bytes")
    return {"summary": summary, "rows": rows, "backend": backend, "sample_interval_s": 0.05,
            "trace": {k: trace[k] for k in keep}, "marks": mon.marks}


# ----------------------------------------------------------------------------------------------------------- 03
@recorder("day03", 8, "host-to-device copies (pageable vs pinned), timing without/with sync, CUDA events")
def record_day03(ctx: Context) -> dict:
    sizes_mb = ctx.pick([1, 4], [1, 4, 16, 64, 256])
    repeats = ctx.pick(3, 10)
    rows = []
    for mb in sizes_mb:
        host = torch.randn(mb * 10**6 // 4)
        row: dict[str, Any] = {"size_mb": mb}
        if ctx.cuda:
            pinned = host.pin_memory()
            page = time_fn(lambda: host.to(ctx.device), device=ctx.device, warmup=2, repeats=repeats)
            pin = time_fn(lambda: pinned.to(ctx.device, non_blocking=True), device=ctx.device, warmup=2,
                          repeats=repeats)
            row |= {"pageable_gb_per_s": host.nbytes / page.median_s / 1e9,
                    "pinned_gb_per_s": host.nbytes / pin.median_s / 1e9}
        else:
            dst = torch.empty_like(host)
            copy = time_fn(lambda: dst.copy_(host), device=ctx.device, warmup=2, repeats=repeats)
            row |= {"host_copy_gb_per_s": host.nbytes / copy.median_s / 1e9}
        rows.append(row)
    n = ctx.pick(128, 4096)
    a, b = torch.randn(n, n, device=ctx.device), torch.randn(n, n, device=ctx.device)
    for _ in range(3):
        a @ b
    synchronize(ctx.device)
    naive = []
    for _ in range(repeats * 2):
        start = time.perf_counter()
        a @ b
        naive.append(time.perf_counter() - start)
    synchronize(ctx.device)
    honest = time_fn(lambda: a @ b, device=ctx.device, warmup=0, repeats=repeats * 2).median_s
    timing = {"matmul_n": n, "no_sync_median_s": statistics.median(naive), "sync_median_s": honest}
    summary = [f"{n}x{n} fp32 matmul: timed without sync {timing['no_sync_median_s'] * 1e3:.3f} ms, with sync "
               f"{honest * 1e3:.3f} ms: the naive timer is {honest / timing['no_sync_median_s']:.1f}x off."]
    if ctx.cuda:
        events = []
        for _ in range(repeats * 2):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            a @ b
            stop.record()
            stop.synchronize()
            events.append(start.elapsed_time(stop) / 1e3)
        timing["cuda_events_median_s"] = statistics.median(events)
        summary.append(f"CUDA events: {timing['cuda_events_median_s'] * 1e3:.3f} ms (the GPU's own clock, no host "
                       "sync inside the timed region).")
        best = max(rows, key=lambda r: r["pinned_gb_per_s"])
        summary.append(f"largest copy ({rows[-1]['size_mb']} MB): pageable {rows[-1]['pageable_gb_per_s']:.1f} GB/s, "
                       f"pinned {rows[-1]['pinned_gb_per_s']:.1f} GB/s; best pinned {best['pinned_gb_per_s']:.1f} "
                       f"GB/s at {best['size_mb']} MB.")
    else:
        summary.append("no host-to-device copy or CUDA events without CUDA: host-to-host copies only.")
    return {"summary": summary, "rows": rows, "timing": timing}


# ----------------------------------------------------------------------------------------------------------- 08
@recorder("day08", 10, "ResNet50 + Adam: torch.cuda.max_memory_allocated over two training steps vs the memory "
                       "model (utils.memory) at batch 64, 64 px and 224 px")
def record_day08(ctx: Context) -> dict:
    rows, summary = [], []
    batch = ctx.pick(2, 64)
    for size in ctx.pick([32], [64, 224]):
        free_device_memory(ctx.device)
        before = torch.cuda.memory_allocated(ctx.device) if ctx.cuda else 0
        torch.manual_seed(0)
        model = resnet50(10).to(ctx.device)
        breakdown = measure_breakdown(model, (3, size, size), batch, "adam", device=ctx.device)
        x, y = _batch(batch, size, ctx.device)
        peak = cuda_peak_training_bytes(model, x, y, "adam")
        measured = peak - before if peak is not None else None
        predicted = breakdown.peak_bytes()
        rows.append({"image_px": size, "batch": batch, **{f"{k.replace(' ', '_')}_mib": v / 2**20
                                                          for k, v in breakdown.parts().items()},
                     "predicted_peak_mib": predicted / 2**20,
                     "measured_peak_mib": measured / 2**20 if measured is not None else None,
                     "prediction_over_measured": predicted / measured if measured else None})
        if measured:
            summary.append(f"{size} px, batch {batch}: predicted {predicted / GiB:.2f} GiB, max_memory_allocated "
                           f"{measured / GiB:.2f} GiB (prediction / measurement = {predicted / measured:.2f})")
        del model, x, y
    if not ctx.cuda:
        summary.append("no CUDA allocator here: prediction only")
    free_device_memory(ctx.device)
    return {"summary": summary, "rows": rows, "optimizer": "adam"}


# ----------------------------------------------------------------------------------------------------------- 09
@recorder("day09", 25, "one random batch already on the GPU (no data loading, unlike the full-size runs): "
                       "ResNet50 at 224 px, fp32 weights + SGD (PyTorch's default flags: cuDNN convolutions may use "
                       "TF32): images/s vs batch size; the largest Adam batch found by out-of-memory search (bounded "
                       "in time: a lower bound when cut short), beside the memory model's and the rule of thumb's "
                       "answers")
def record_day09(ctx: Context) -> dict:
    name, size = ctx.pick(("small_cnn", 32), ("resnet50", 224))
    torch.manual_seed(0)
    model = build_model(name, 10, image_size=size).to(ctx.device).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rows: list[dict] = []
    for b in ctx.pick([4, 8], [32, 64, 128, 256]):
        if rows and ctx.left_s() < ctx.budget_s / 2:
            break
        x, y = _batch(b, size, ctx.device)
        try:
            t = time_fn(lambda: train_step(model, x, y, opt), device=ctx.device, warmup=2, repeats=ctx.pick(2, 4))
        except torch.OutOfMemoryError:
            free_device_memory(ctx.device)
            break
        rows.append({"batch": b, "step_ms": t.median_s * 1e3, "images_per_s": t.per_second(b)})
        ctx.save({"summary": [f"batch sweep so far: {len(rows)} batch sizes"], "rows": rows})
        del x, y
    del opt
    best = best_row(rows, "images_per_s")
    summary = ([f"{name} {size} px, default precision: {best['images_per_s']:,.0f} images/s at best (batch "
                f"{best['batch']}); {rows[0]['images_per_s']:,.0f} at batch {rows[0]['batch']}"] if best else
               [NOTHING_MEASURED])
    search: dict[str, Any] = {}
    if ctx.cuda:
        free_device_memory(ctx.device)
        deadline = time.perf_counter() + max(3.0, ctx.left_s() - 6)
        fits = cuda_fits(model, (3, size, size), 10, "adam")
        largest_fit = 0

        def bounded(b: int) -> bool:
            nonlocal largest_fit
            if time.perf_counter() > deadline:
                raise TimeoutError(f"the out-of-memory search ran out of its time budget at batch {b}")
            ok = fits(b)
            largest_fit = max(largest_fit, b) if ok else largest_fit
            return ok

        total = torch.cuda.get_device_properties(ctx.device).total_memory
        try:
            found = find_max_batch_size(bounded, start=256, limit=16384)
            search = {"max_batch_adam_fp32": found.max_batch_size, "trials": found.trials}
        except TimeoutError as e:
            search = {"max_batch_adam_fp32": None, "max_batch_at_least": largest_fit or None, "error": str(e)}
        breakdown = measure_breakdown(model, (3, size, size), 1, "adam", device=ctx.device)
        search |= {"total_memory_bytes": total,
                   "memory_model_max_batch_10pct_margin": find_max_batch_size(budget_fits(breakdown, total, 0.10),
                                                                              limit=1 << 20).max_batch_size,
                   "rule_of_thumb_max_batch": formula_max_batch_size(total, parameter_bytes(model),
                                                                     breakdown.activation_per_sample)}
        found_text = (search["max_batch_adam_fp32"] if search["max_batch_adam_fp32"] is not None
                      else f"at least {search.get('max_batch_at_least')} (search cut short)")
        summary.append(f"largest Adam fp32 batch on {torch.cuda.get_device_name(ctx.device)} "
                       f"({total / GiB:.0f} GiB): {found_text} by out-of-memory search, "
                       f"{search['memory_model_max_batch_10pct_margin']} by the memory model (10 % margin), "
                       f"{search['rule_of_thumb_max_batch']} by (total - parameters) / per-sample activations")
    else:
        summary.append("no catchable out-of-memory error on the CPU: the search runs only on CUDA")
    del model
    free_device_memory(ctx.device)
    return {"summary": summary, "rows": rows, "model": name, "image_px": size, "max_batch_search": search}


# ----------------------------------------------------------------------------------------------------------- 11
@recorder("day11", 15, "one random batch already on the GPU (no data loading, unlike the full-size runs): "
                       "ResNet50 at 224 px, batch 128: training step time and peak memory in fp32, TF32, bf16 and "
                       "fp16 (+ GradScaler); n x n matmul throughput per format")
def record_day11(ctx: Context) -> dict:
    name, size, batch = ctx.pick(("small_cnn", 16, 8), ("resnet50", 224, 128))
    variants = [("fp32", False, None), ("tf32", True, None), ("bf16 autocast", False, torch.bfloat16)]
    if ctx.cuda:
        variants.append(("fp16 autocast + GradScaler", False, torch.float16))
    x, y = _batch(batch, size, ctx.device)
    rows = []
    for label, use_tf32, amp in variants:
        torch.manual_seed(0)
        model = build_model(name, 10, image_size=size).to(ctx.device).train()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        scaler = torch.amp.GradScaler(ctx.device.type) if amp == torch.float16 else None
        with tf32(use_tf32):
            _peak_reset(ctx.device)
            t = time_fn(lambda: train_step(model, x, y, opt, amp_dtype=amp, scaler=scaler), device=ctx.device,
                        warmup=3, repeats=ctx.pick(2, 8))
            peak = _peak(ctx.device)          # the training steps' peak, before the extra forward below
            saved = saved_activation_bytes(model, x, autocast_dtype=amp)
        rows.append({"precision": label, "step_ms": t.median_s * 1e3, "images_per_s": t.per_second(batch),
                     "peak_memory_gib": peak / GiB if peak is not None else None,
                     "saved_activations_gib": saved / GiB})
        del model, opt
        free_device_memory(ctx.device)
        ctx.save({"summary": [f"precisions measured so far: {', '.join(r['precision'] for r in rows)}"],
                  "rows": rows})
    for r in rows:
        r["speedup_vs_fp32"] = rows[0]["step_ms"] / r["step_ms"]
    n = ctx.pick(128, 8192)
    matmul = []
    for label, dtype, use_tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                                   ("bf16", torch.bfloat16, False), ("fp16", torch.float16, False)):
        if dtype == torch.float16 and not ctx.cuda:
            continue
        a = torch.randn(n, n, device=ctx.device, dtype=dtype)
        b = torch.randn(n, n, device=ctx.device, dtype=dtype)
        with tf32(use_tf32):
            t = time_fn(lambda: a @ b, device=ctx.device, warmup=2, repeats=ctx.pick(2, 10))
        matmul.append({"format": label, "n": n, "tflop_per_s": 2 * n**3 / t.median_s / 1e12})
    summary = [f"{name} {size} px batch {batch}: " + ", ".join(f"{r['precision']} x{r['speedup_vs_fp32']:.2f}"
                                                              for r in rows) + " step speed vs fp32"]
    summary.append(f"{n}x{n} matmul TFLOP/s: " + ", ".join(f"{m['format']} {m['tflop_per_s']:.1f}" for m in matmul))
    return {"summary": summary, "rows": rows, "matmul": matmul, "model": name, "image_px": size, "batch": batch}


# ----------------------------------------------------------------------------------------------------------- 13
class _Checkpointed(nn.Module):
    """Runs ``inner`` under non-reentrant activation checkpointing: its activations are recomputed in backward."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch.utils.checkpoint import checkpoint

        return checkpoint(self.inner, x, use_reentrant=False)


@recorder("day13", 10, "one random batch already on the GPU (no data loading, unlike the full-size runs): "
                       "ResNet50 at 224 px, batch 64, fp32 weights (default flags): peak memory and step time "
                       "with layer3 (conv4_x) or all four stages checkpointed")
def record_day13(ctx: Context) -> dict:
    size, batch = ctx.pick((32, 1), (224, 64))
    x, y = _batch(batch, size, ctx.device)
    rows = []
    for label, stages in (("none", ()), ("layer3 (conv4_x)", ("layer3",)),
                          ("layer1-4", ("layer1", "layer2", "layer3", "layer4"))):
        free_device_memory(ctx.device)
        before = torch.cuda.memory_allocated(ctx.device) if ctx.cuda else 0
        torch.manual_seed(0)
        model = resnet50(10, small_input=size < 96).to(ctx.device).train()
        for stage in stages:
            setattr(model, stage, _Checkpointed(getattr(model, stage)))
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        train_step(model, x, y, opt)
        _peak_reset(ctx.device)
        t = time_fn(lambda: train_step(model, x, y, opt), device=ctx.device, warmup=ctx.pick(0, 1),
                    repeats=ctx.pick(1, 8))
        peak = _peak(ctx.device)
        rows.append({"checkpointed": label, "step_ms": t.median_s * 1e3,
                     "peak_memory_gib": (peak - before) / GiB if peak is not None else None})
        del model, opt
    base = rows[0]
    for r in rows:
        r["time_cost"] = r["step_ms"] / base["step_ms"] - 1
        r["memory_saved"] = (1 - r["peak_memory_gib"] / base["peak_memory_gib"]) if ctx.cuda else None
    summary = [f"{r['checkpointed']}: {r['time_cost']:+.1%} step time" + (f", {r['memory_saved']:+.1%} of the peak "
               "saved" if r["memory_saved"] is not None else "") for r in rows[1:]]
    free_device_memory(ctx.device)
    return {"summary": summary, "rows": rows, "image_px": size, "batch": batch}


# ----------------------------------------------------------------------------------------------------------- 22
@recorder("day22", 12, "torch.profiler over two ResNet50 training steps (224 px, batch 64, bf16 autocast): "
                       "key_averages and a trimmed Chrome trace")
def record_day22(ctx: Context) -> dict:
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    name, size, batch = ctx.pick(("small_cnn", 16, 4), ("resnet50", 224, 64))
    torch.manual_seed(0)
    model = build_model(name, 10, image_size=size).to(ctx.device).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = _batch(batch, size, ctx.device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if ctx.cuda else [])
    with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=2)) as prof:
        for _ in range(4):
            with record_function("train_step"):
                train_step(model, x, y, opt, amp_dtype=torch.bfloat16)
            prof.step()
    synchronize(ctx.device)
    key = "self_device_us" if ctx.cuda else "self_cpu_us"
    # Host rows only: a kernel's own CUDA row would count its time twice (once more as the self device time of the
    # aten op that launched it), and the GPU mirror of a range reports its whole span as "self" time.
    ops = sorted((r for r in profile_records(prof.key_averages()) if r["device_type"] == "CPU"
                  and r["name"] != "train_step" and not r["name"].startswith("ProfilerStep")), key=lambda r: -r[key])
    top_ops = [{k: v for k, v in r.items() if k not in ("stack", "input_shapes")} for r in ops[:25]]
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        trace = json.loads(raw.read_text())
    trace_file = ctx.out_dir / f"{ctx.slug}_trace.json.gz"
    max_events = ctx.pick(500, 20_000)
    while True:
        data = gzip.compress(json.dumps(trim_chrome_trace(trace, max_events)).encode(), compresslevel=9)
        if len(data) <= MAX_TRACE_BYTES or max_events <= 100:
            break
        max_events //= 2
    trace_file.parent.mkdir(parents=True, exist_ok=True)
    trace_file.write_bytes(data)
    steps = trace_events(trace, prefixes=["ProfilerStep"], cats=HOST_RANGE_CATS)   # not their GPU mirrors
    step_ms = statistics.median(e["dur_us"] for e in steps) / 1e3 if steps else None
    rows = [{"op": r["name"], "calls": r["calls"], "self_device_ms": r["self_device_us"] / 1e3,
             "self_cpu_ms": r["self_cpu_us"] / 1e3} for r in top_ops[:10]]
    summary = [f"{name} {size} px batch {batch} bf16: profiled step {step_ms or float('nan'):.1f} ms (host view); "
               f"the 10 host ops whose own {'kernels took' if ctx.cuda else 'work took'} the most "
               f"{'device' if ctx.cuda else 'CPU'} time are below",
               f"trace: {trace_file.name} ({len(data) / 2**20:.2f} MiB gzip, {max_events} longest events kept); open "
               "it in https://ui.perfetto.dev"]
    del model, opt
    free_device_memory(ctx.device)
    return {"summary": summary, "rows": rows, "top_ops": top_ops, "trace_file": trace_file.name,
            "profiled_step_ms": step_ms, "model": name, "image_px": size, "batch": batch}


# ----------------------------------------------------------------------------------------------------------- 27
@recorder("day27", 8, "small_cnn at 64 px, batch 256 (larger than the notebook's GPU run, so the leak is plain): "
                       "a leaking loop (losses kept with their graphs) vs a fixed one, memory_allocated per step, "
                       "and a trimmed CUDA memory snapshot of three Adam steps")
def record_day27(ctx: Context) -> dict:
    size, batch = ctx.pick((16, 8), (64, 256))
    x, y = _batch(batch, size, ctx.device)
    rows = []
    for label, leak in (("logged loss kept with its graph (leak)", True), ("logged with no_grad + .item()", False)):
        torch.manual_seed(0)
        model = small_cnn(10, width=32).to(ctx.device)
        opt = torch.optim.Adam(model.parameters())
        logged: list[Any] = []
        for step in range(1, 6):
            train_step(model, x, y, opt)
            if leak:      # a loss computed for logging outside no_grad keeps its whole graph alive
                logged.append(nn.functional.cross_entropy(model(x), y))
            else:
                with torch.no_grad():
                    logged.append(nn.functional.cross_entropy(model(x), y).item())
            synchronize(ctx.device)
            if ctx.cuda:
                rows.append({"loop": label, "step": step, "allocated_mib": torch.cuda.memory_allocated(ctx.device)
                             / 2**20})
        del model, opt, logged
        free_device_memory(ctx.device)
    payload: dict[str, Any] = {"rows": rows, "image_px": size, "batch": batch}
    if not ctx.cuda:
        payload["summary"] = ["memory_allocated and memory snapshots need CUDA: the dry run only runs the loops"]
        return payload
    leak = [r["allocated_mib"] for r in rows if r["loop"].endswith("(leak)")]
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    try:
        model = small_cnn(10, width=32).to(ctx.device)
        opt = torch.optim.Adam(model.parameters())
        for _ in range(3):
            train_step(model, x, y, opt)
        synchronize(ctx.device)
        snapshot = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    entries = 5_000
    while True:
        data = pickle.dumps(trim_memory_snapshot(snapshot, max_trace_entries=entries, max_frames=6))
        if len(data) <= MAX_SNAPSHOT_BYTES or entries <= 100:
            break
        entries //= 2
    snap_file = ctx.out_dir / f"{ctx.slug}_memory_snapshot.pickle"
    snap_file.parent.mkdir(parents=True, exist_ok=True)
    snap_file.write_bytes(data)
    totals = memory_snapshot_summary(snapshot)
    payload["summary"] = [
        f"leaking loop: memory_allocated grows {(leak[-1] - leak[0]) / 4:.1f} MiB per step; the fixed loop "
        "stays flat (table below)",
        f"snapshot of 3 Adam steps: {totals['segments']} segments, {totals['reserved_bytes'] / 2**20:.1f} MiB "
        f"reserved, {totals['allocated_bytes'] / 2**20:.1f} MiB allocated; {snap_file.name} opens in "
        "https://pytorch.org/memory_viz"]
    payload |= {"snapshot_file": snap_file.name, "snapshot_totals": totals, "snapshot_trace_entries_kept": entries}
    del model, opt
    free_device_memory(ctx.device)
    return payload


# ------------------------------------------------------------------------------------------------- running order
# The full-size recorders (Days 14, 24, 25, 30, 32) live in gpu_check.full_scale_recorders; importing it registers
# them. The kit runs the recorders in this order, after the benchmarks and Part A: the cheap per-day measurements
# first (seconds each, most valuable first), then the ResNet50 runs, the compile-heavy Day 24 last, so that a part
# that overruns costs the fewest others.
from gpu_check import full_scale_recorders  # noqa: E402,F401  (registers days 14, 24, 25, 30, 32)

CHEAP = ("day11", "day09", "day13", "day08", "day22", "day03", "day02", "day27")
RESNET50 = ("day14", "day25", "day32", "day30", "day24")
RUN_ORDER = CHEAP + RESNET50
for _day in sorted(RECORDERS, key=lambda d: RUN_ORDER.index(d) if d in RUN_ORDER else len(RUN_ORDER)):
    RECORDERS[_day] = RECORDERS.pop(_day)

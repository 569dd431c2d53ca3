#!/usr/bin/env python3
"""GPU reference benchmark: ResNet50 training throughput at 224 px on synthetic tensors already on the device.

Modes: fp32 (TF32 off: IEEE fp32), tf32, bf16 autocast, fp16 autocast + GradScaler, channels_last + bf16, and
torch.compile (channels_last + bf16). For each mode and batch size: images/s (the median step time after warm-up; on
CUDA every step between two CUDA events, the timed steps back to back with one synchronisation at the end), peak
memory (CUDA), and MFU = achieved FLOP/s / the device's peak, with FLOPs per step counted once per batch size by
torch.utils.flop_counter.FlopCounterMode (forward + backward). ``--cudnn-benchmark`` lets cuDNN time its convolution
algorithms in the warm-up steps (recorded in the result). Every row carries its own warm-up and step counts, command
and date: with ``--append`` the rows come from several commands, and the file's top level describes the last one.

    python benchmarks/gpu_reference.py --out benchmarks/results          # on a GPU: the full sweep
    python benchmarks/gpu_reference.py --modes fp32,compile_bf16 --append --out benchmarks/results   # add rows
    python benchmarks/gpu_reference.py --smoke                           # CPU, tiny sizes: keeps the script alive

Published anchors for context (not measured here): NVIDIA's ResNet50 v1.5 reference, A100 AMP, about 2,470 img/s;
MLPerf Training v4.0, H200, about 7,950 img/s per GPU (with DALI and CUDA graphs).
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

from common import provenance, write_result
from utils.device import pick_device, synchronize
from utils.models import build_model
from utils.precision import make_grad_scaler
from utils.step import train_step

# Dense peak TFLOP/s from NVIDIA datasheets (no sparsity: half the "with sparsity" figures). Keys are matched against
# the device name in this order, so the NVL and PCIe parts come before the SXM ones ("NVIDIA H100 80GB HBM3"), and as
# whole words, so that "L4" does not match an "NVIDIA L40S" (a card not listed gets no peak, and no MFU).
PEAK_TFLOPS = {
    "H200 NVL": {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5},
    "H200": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4},
    "H100 PCIe": {"fp32": 51.0, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0},
    "H100 NVL": {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5},
    "H100": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4},
    "A100": {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
    "L40S": {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05},
    "L4": {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0},
    "T4": {"fp32": 8.1, "tf32": None, "bf16": None, "fp16": 65.0},
    "V100": {"fp32": 15.7, "tf32": None, "bf16": None, "fp16": 125.0},
}
MODES = ("fp32", "tf32", "bf16", "fp16", "channels_last_bf16", "compile_bf16")


def peak_tflops(device: torch.device, precision: str) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, table in PEAK_TFLOPS.items():
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(key)}(?![A-Za-z0-9])", name):
            return table.get(precision)
    return None


def train_step_flops(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    loss_fn = nn.CrossEntropyLoss()
    with FlopCounterMode(display=False) as counter:
        loss_fn(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


_FLOPS: dict[tuple, int] = {}


def run_mode(mode: str, model_name: str, batch: int, size: int, device: torch.device, warmup: int,
             steps: int, cudnn_benchmark: bool = False) -> dict:
    precision = {"fp32": "fp32", "tf32": "tf32", "fp16": "fp16"}.get(mode, "bf16")
    if mode == "fp16" and device.type != "cuda":
        return {"mode": mode, "batch": batch, "skipped": "fp16 autocast with GradScaler needs CUDA"}
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    torch.backends.cudnn.allow_tf32 = mode == "tf32"
    torch.backends.cudnn.benchmark = cudnn_benchmark
    torch.manual_seed(0)
    model = build_model(model_name, 1000 if size >= 96 else 10, image_size=size).to(device)
    x = torch.randn(batch, 3, size, size, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    channels_last = "channels_last" in mode or "compile" in mode
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    key = (model_name, batch, size)
    if key not in _FLOPS:                    # the same count in every precision and layout
        _FLOPS[key] = train_step_flops(model, x, y)
    flops = _FLOPS[key]
    step_model = torch.compile(model) if "compile" in mode else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = make_grad_scaler(amp_dtype, device)

    def step() -> None:
        train_step(step_model, x, y, optimizer, amp_dtype=amp_dtype, scaler=scaler)  # the course loop's step

    compile_s = None
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    for _ in range(warmup):
        step()
    synchronize(device)
    if "compile" in mode:
        compile_s = time.perf_counter() - start  # the first step compiles
    if device.type == "cuda":                # events between steps: no host sync inside the timed steps
        events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        events[0].record()
        for k in range(steps):
            step()
            events[k + 1].record()
        events[-1].synchronize()
        times = [a.elapsed_time(b) / 1e3 for a, b in zip(events, events[1:])]
    else:
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            synchronize(device)
            times.append(time.perf_counter() - t0)
    median = statistics.median(times)
    peak = peak_tflops(device, precision)
    achieved = flops / median / 1e12
    return {"mode": mode, "batch": batch, "image_size": size, "median_step_s": median,
            "images_per_s": batch / median, "flops_per_step": flops, "achieved_tflops": achieved,
            "peak_tflops": peak, "mfu": achieved / peak if peak else None,
            "peak_memory_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
            "warmup_and_compile_s": compile_s, "cudnn_benchmark": cudnn_benchmark}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--smoke", action="store_true", help="CPU-sized: small model, 16 px, one batch size")
    ap.add_argument("--model", default=None)
    ap.add_argument("--batches", default=None, help="comma-separated batch sizes")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--warmup", type=int, default=None, help="untimed steps per mode and batch (default by size)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps per mode and batch (default by size)")
    ap.add_argument("--cudnn-benchmark", action="store_true", help="torch.backends.cudnn.benchmark = True")
    ap.add_argument("--append", action="store_true", help="keep the rows already in the result file (other modes)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    device = pick_device(args.device)
    if args.smoke:
        model, size, batches, warmup, steps = args.model or "small_cnn", 16, [4], 1, 2
    elif device.type == "cuda":
        model, size, batches, warmup, steps = args.model or "resnet50", 224, [32, 64, 128, 256], 10, 30
    else:
        model, size, batches, warmup, steps = args.model or "resnet50", 64, [8, 16], 2, 5
        print("No CUDA device: running a CPU-sized version (ResNet50 at 64 px). Its numbers are not GPU numbers.")
    if args.batches:
        batches = [int(b) for b in args.batches.split(",")]
    warmup = args.warmup if args.warmup is not None else warmup
    steps = args.steps if args.steps is not None else steps
    prov = provenance(device)
    earlier: list[dict] = []
    name = f"gpu_reference_{device.type}"
    if args.append and args.out and (Path(args.out) / f"{name}.json").exists():
        earlier = json.loads((Path(args.out) / f"{name}.json").read_text()).get("rows", [])
    cudnn_saved = torch.backends.cudnn.benchmark

    def save(rows: list[dict]) -> Path | None:
        # Written after every row: a run stopped by a time limit (tools/gpu_check.py) keeps the modes it finished.
        new = {(r["mode"], r["batch"]) for r in rows}
        payload = {"benchmark": "gpu_reference", "provenance": prov, "model": model, "image_size": size,
                   "warmup": warmup, "steps": steps, "cudnn_benchmark": args.cudnn_benchmark,
                   "rows": [r for r in earlier if (r["mode"], r["batch"]) not in new] + rows}
        return write_result(name, payload, args.out)

    rows: list[dict] = []
    path = None
    for mode in args.modes.split(","):
        for batch in batches:
            row = run_mode(mode, model, batch, size, device, warmup, steps, args.cudnn_benchmark)
            # Each row says how it was run: with --append, the file's top level describes the last command only.
            row |= {"warmup": warmup, "steps": steps, "source": prov["source"], "date": prov["date"]}
            rows.append(row)
            path = save(rows)
            if "skipped" in row:
                print(f"{mode:<20} batch {batch:<4} skipped: {row['skipped']}")
                continue
            mem = f"{row['peak_memory_bytes'] / 2**30:6.2f} GiB" if row["peak_memory_bytes"] else "     n/a"
            mfu = f"{row['mfu']:.1%}" if row["mfu"] is not None else "n/a"
            print(f"{mode:<20} batch {batch:<4} {row['images_per_s']:9,.1f} img/s  peak mem {mem}  "
                  f"{row['achieved_tflops']:8.3f} TFLOP/s  MFU {mfu}", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = True  # PyTorch's default
    torch.backends.cudnn.benchmark = cudnn_saved
    if path:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

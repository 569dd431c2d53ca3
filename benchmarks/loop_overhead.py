#!/usr/bin/env python3
"""The course's training loop (utils.training.train_one_epoch) against a bare PyTorch loop doing the same work.

The same model object, data, optimizer and precision for both loops; the loops alternate (interleaved, order reversed
every round) so that drift of the machine hits both; each epoch is timed with device synchronisation; the figure is
the ratio of median step times, course/bare. A second bare series gives the noise floor of the run (control/bare).
Host syncs per epoch (Tensor.item/.cpu/.tolist/__bool__/__float__, cuda.synchronize) are counted in both loops.

    python benchmarks/loop_overhead.py                      # small CNN and ResNet50 at 32 px
    python benchmarks/loop_overhead.py --smoke              # seconds, for the test suite
    python benchmarks/loop_overhead.py --model resnet50 --image-size 224 --amp bf16   # the GPU target (<= 1.03)
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from contextlib import contextmanager

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from common import provenance, write_result
from utils import step as course_step
from utils import training as course
from utils.device import pick_device, synchronize
from utils.precision import autocast_context, make_grad_scaler, resolve_amp
from utils.models import build_model

SYNC_METHODS = ("item", "cpu", "tolist", "__bool__", "__float__", "__int__")
BARE_FILE = __file__


def bare_train_one_epoch(model: nn.Module, loader, optimizer, device: torch.device, loss_fn,
                         amp_dtype: torch.dtype | None = None, scaler: torch.amp.GradScaler | None = None) -> None:
    """What a careful engineer writes by hand: no metrics, no logging, no syncs."""
    model.train()
    for images, targets in loader:
        images, targets = images.to(device, non_blocking=True), targets.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)         # before the forward, as utils.step does
        with autocast_context(device.type, amp_dtype):
            loss = loss_fn(model(images), targets)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()


@contextmanager
def count_host_syncs(files: tuple[str, ...]):
    """Count calls of host-syncing methods made from code in ``files`` (not from DataLoader internals)."""
    counts = {"n": 0}
    originals = {m: getattr(torch.Tensor, m) for m in SYNC_METHODS}
    original_sync = torch.cuda.synchronize

    def wrap(fn):
        def counted(*args, **kwargs):
            if sys._getframe(1).f_code.co_filename in files:
                counts["n"] += 1
            return fn(*args, **kwargs)
        return counted

    for m, fn in originals.items():
        setattr(torch.Tensor, m, wrap(fn))
    torch.cuda.synchronize = wrap(original_sync)
    try:
        yield counts
    finally:
        for m, fn in originals.items():
            setattr(torch.Tensor, m, fn)
        torch.cuda.synchronize = original_sync


def measure(model_name: str, image_size: int, batch_size: int, steps: int, repeats: int, device: torch.device,
            log_every: int, amp: str = "off") -> dict:
    torch.manual_seed(0)
    n = batch_size * steps
    data = TensorDataset(torch.randn(n, 3, image_size, image_size), torch.randint(0, 10, (n,)))
    loader = DataLoader(data, batch_size=batch_size, shuffle=False)
    loss_fn = nn.CrossEntropyLoss()
    # One model and optimizer for every series: two instances with equal weights still differ by a few percent in
    # step time (memory layout), which would swamp the loop's own overhead. A second bare series is the control:
    # its ratio to the first is this machine's noise floor in this run.
    model = build_model(model_name, 10, image_size=image_size).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    amp_dtype = resolve_amp(amp, device)
    scaler = make_grad_scaler(amp_dtype, device)  # fp16 only; one scaler object for both loops, like the model

    def run(kind: str) -> float:
        synchronize(device)
        start = time.perf_counter()
        if kind == "course":
            course.train_one_epoch(model, loader, optimizer, device, loss_fn=loss_fn, log_every=log_every,
                                   progress=False, amp=amp, scaler=scaler)
        else:
            bare_train_one_epoch(model, loader, optimizer, device, loss_fn, amp_dtype, scaler)
        synchronize(device)
        return (time.perf_counter() - start) / steps

    kinds = ("course", "bare", "bare_control")
    for kind in kinds:  # warm-up: allocator, thread pools, first-call costs
        run(kind)
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for r in range(repeats):
        for kind in (kinds if r % 2 == 0 else kinds[::-1]):
            times[kind].append(run(kind))
    syncs = {}
    for kind, files in (("course", (course.__file__, course_step.__file__)), ("bare", (BARE_FILE,))):
        with count_host_syncs(files) as c:
            run(kind)
        syncs[kind] = c["n"]
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"model": model_name, "image_size": image_size, "batch_size": batch_size, "steps": steps,
            "amp": str(amp_dtype).replace("torch.", "") if amp_dtype else "off",
            "repeats": repeats, "log_every": log_every, "median_step_s": med, "step_times_s": times,
            "ratio_course_over_bare": med["course"] / med["bare"],
            "noise_floor_bare_control_over_bare": med["bare_control"] / med["bare"], "host_syncs_per_epoch": syncs,
            "log_intervals_per_epoch": steps // log_every,
            "sync_target_met": syncs["course"] <= steps // log_every + 2}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (seconds), for the test suite")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--out", default=None, help="folder for the JSON result (default: print only)")
    ap.add_argument("--model", default=None, help="one configuration: small_cnn or resnet50 (default: both, 32 px)")
    ap.add_argument("--image-size", type=int, default=None, help="pixels per side with --model (default 32)")
    ap.add_argument("--batch-size", type=int, default=None, help="with --model (default 64 on CUDA, else 32)")
    ap.add_argument("--steps", type=int, default=None, help="steps per timed epoch with --model (default 20)")
    ap.add_argument("--amp", default="off", help="off, bf16, fp16 or auto (resolve_amp): the same for both loops")
    args = ap.parse_args(argv)
    device = pick_device(args.device)
    if args.smoke:
        configs = [(args.model or "small_cnn", args.image_size or 16, args.batch_size or 16, 6, 2, 3)]
    elif args.model:
        steps = args.steps or 20
        configs = [(args.model, args.image_size or 32, args.batch_size or (64 if device.type == "cuda" else 32),
                    steps, args.repeats or 5, max(1, steps // 2))]
    else:
        configs = [("small_cnn", 32, 64, 40, args.repeats or 9, 20), ("resnet50", 32, 32, 6, args.repeats or 5, 3)]
    results = []
    for model, size, bs, steps, repeats, log_every in configs:
        res = measure(model, size, bs, steps, args.repeats or repeats, device, log_every, args.amp)
        results.append(res)
        print(f"{model:<10} {size:>3}px bs={bs:<3} amp={res['amp']:<8} median step: course {res['median_step_s']['course'] * 1e3:8.2f} ms"
              f" | bare {res['median_step_s']['bare'] * 1e3:8.2f} ms | ratio course/bare "
              f"{res['ratio_course_over_bare']:.3f} (control bare/bare {res['noise_floor_bare_control_over_bare']:.3f}) | host syncs per epoch of {steps} steps: course "
              f"{res['host_syncs_per_epoch']['course']} (budget: {res['log_intervals_per_epoch']} log intervals + 2 at "
              f"the end; without a progress bar the loop reads only the 2), bare {res['host_syncs_per_epoch']['bare']}")
    payload = {"benchmark": "loop_overhead", "provenance": provenance(device), "results": results,
               "target": "ratio <= 1.03 and at most one host sync per logging interval (plus 2 at epoch end)"}
    path = write_result(f"loop_overhead_{device.type}", payload, args.out)
    if path:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

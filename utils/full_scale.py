"""Full-size training on a CUDA GPU: torchvision's ResNet50 at 224 px on Imagenette (or CIFAR-10 upscaled), with
one technique switched on, measured end to end: images/s (input included), peak memory and accuracy.

The days whose point is scale call :func:`full_scale_run` when ``run.on_gpu``; their CPU and smoke paths keep the
small data. Every batch goes through the course's one training step, :func:`utils.step.train_step`, and the
accuracy through :func:`utils.training.evaluate`. A technique is a named preset of settings
(:data:`utils.techniques.TECHNIQUES`); keyword overrides change single knobs. The global backend flags a run sets
(TF32, ``cudnn.benchmark``) are restored when it ends. On a CPU the function refuses unless ``allow_cpu=True``
(toy sizes, for tests).

The batches come through an input path (:mod:`utils.input_path`): by default a uint8 cache decoded once, with the
random crop, flip and normalisation done on the device, so that the run measures the technique and not the JPEG
decoder; ``input_path="dataloader"`` keeps the end-to-end ``DataLoader`` (JPEG decoding in worker processes) for the
days that measure the loader itself. Every run also measures its input path alone and records whether it was
input-bound (:func:`utils.input_path.input_bound`).
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from .data import DataSplits
from .datasets import load_cifar10, load_imagenette
from .device import DeviceUnavailableError, pick_device, synchronize
from .environment import hardware_label, usable_cpus
from .fast_path import fast_path_flags, restore_fast_path_flags
from .input_path import InputPath, input_bound, input_limit_text, make_input_path, measure_input_rate
from .models import build_model
from .precision import make_grad_scaler, resolve_amp
from .step import train_step
from .techniques import TECHNIQUES, checkpoint_stages, resolve_settings
from .tf32 import set_tf32
from .training import evaluate


def lr_factor(step: int, warmup: int, total: int) -> float:
    """Learning-rate multiplier at optimizer step ``step`` (from 0): linear warm-up to 1 over ``warmup`` steps, then
    a cosine decay that reaches 0 at ``total``."""
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))


def default_workers(device: torch.device) -> int:
    """DataLoader worker processes for a run on ``device``: the cores this process may use minus one, at most 8,
    on CUDA; 0 (load in the main process) elsewhere."""
    if device.type != "cuda":
        return 0
    cores = len(usable_cpus())
    return max(1, min(8, cores - 1))


def full_scale_data(dataset: str = "imagenette", image_size: int = 224, *, root: str | os.PathLike | None = None,
                    download: bool = False, seed: int = 0, stats_workers: int = 0, **loader_kwargs: Any) -> DataSplits:
    """Training data for :func:`full_scale_run`: the whole training set (no val split) with augmentation, and the
    official held-out set as ``test``. Imagenette is read from its 320 px download above 160 px, else the 160 px
    one; ``"cifar10"`` is upscaled to ``image_size``. Build it once and pass it as ``data=`` to several runs."""
    kw = dict(root=root, download=download, val_fraction=0.0, seed=seed, augment=True, stats_workers=stats_workers)
    if dataset == "imagenette":
        return load_imagenette(image_size=image_size, size="320px" if image_size > 160 else "160px", **kw,
                               **loader_kwargs)
    if dataset == "cifar10":
        return load_cifar10(image_size=image_size, **kw, **loader_kwargs)
    raise ValueError(f"dataset must be 'imagenette' or 'cifar10' (upscaled), got {dataset!r}")


@dataclass
class FullScaleResult:
    """What :func:`full_scale_run` measured. Times in seconds, memory in bytes, accuracy a fraction in [0, 1]."""

    technique: str
    settings: dict[str, Any]
    model: str
    dataset: str
    image_size: int
    batch_size: int                  # images per optimizer step (the logical batch)
    micro_batch_size: int            # images per forward/backward
    optimizer_steps: int
    images: int                      # training images seen, timed or not
    epochs: float
    timed_images: int                # after the first steps (compilation, autotuning, worker start-up)
    timed_s: float
    images_per_s: float              # timed_images / timed_s, the input path included
    data_wait_share: float           # share of timed_s the loop spent waiting for the next batch
    peak_memory_bytes: int | None    # this run's own tensors at their peak in the timed steps; None off CUDA
    train_loss: float                # mean over the timed steps
    accuracy: float | None           # on the held-out set (Imagenette's val split); None when not evaluated
    eval_images: int
    setup_s: float                   # data, model and workers before the first step
    eval_s: float
    hardware: str
    extras: dict[str, Any] = field(default_factory=dict)
    input_path: str = "cached"                 # utils.input_path.INPUT_PATHS
    loader_images_per_s: float | None = None   # the input path alone, measured in this run (None: not measured)
    input_bound: bool = False                  # utils.input_path.input_bound: the loader limited this run

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        mem = f"{self.peak_memory_bytes / 2**30:.2f} GiB peak" if self.peak_memory_bytes is not None else "no CUDA peak"
        acc = f"accuracy {self.accuracy:.1%} on {self.eval_images:,} held-out images" if self.accuracy is not None \
            else "not evaluated"
        loader = (f"; its {self.input_path} input path alone {self.loader_images_per_s:,.0f} images/s"
                  if self.loader_images_per_s else "")
        bound = " INPUT-BOUND: the loader, not the technique, set this speed." if self.input_bound else ""
        requested = self.extras.get("requested_batch_size")
        fitted = f" (fitted to free memory; {requested} requested)" if requested not in (None, self.batch_size) else ""
        return (f"{self.technique}: {self.model} {self.image_size} px batch {self.batch_size}{fitted} on {self.dataset}, "
                f"{self.optimizer_steps} steps ({self.epochs:.2f} epochs): {self.images_per_s:,.0f} images/s "
                f"({self.data_wait_share:.0%} waiting for data{loader}), {mem}, {acc} | {self.hardware}{bound}")

    def input_limit(self) -> str:
        """One sentence: the training and input-path speeds, and the thresholds of :func:`input_bound`."""
        return input_limit_text(self.technique, self.loader_images_per_s, self.images_per_s, self.data_wait_share)


def describe_full_scale(technique: str = "baseline", minutes: float = 2.0, *, model: str = "resnet50",
                        image_size: int = 224, dataset: str = "imagenette", batch_size: int = 64,
                        steps: int | None = None, input_path: str = "cached", fitted: bool = False) -> str:
    """One sentence saying what :func:`full_scale_run` would do on a CUDA GPU (for a notebook's CPU branch); with
    ``steps``, a run of that many optimizer steps instead of ``minutes``; with ``fitted``, a ``batch_size`` halved
    first until it fits the GPU's free memory (:func:`utils.full_scale_section.fit_full_scale_batch`)."""
    if technique not in TECHNIQUES:
        raise ValueError(f"Unknown technique {technique!r}: choose one of {', '.join(TECHNIQUES)}")
    names = {"resnet50": "ResNet50", "resnet18": "ResNet18", "imagenette": "Imagenette",
             "cifar10": "CIFAR-10 (upscaled)"}
    return (f"On a CUDA GPU this cell trains {names.get(model, model)} from scratch at {image_size} px on "
            f"{names.get(dataset, dataset)}, batch {batch_size}"
            + (" (halved until it fits the GPU's free memory, and then said so)" if fitted else "") + ", "
            f"{f'for {steps} optimizer steps' if steps else f'for about {minutes:g} min'} with "
            f"{TECHNIQUES[technique][1]}, then prints images/s, peak memory (torch.cuda.max_memory_allocated) and "
            "held-out accuracy. "
            + ("Its batches come from DataLoader workers that decode the JPEGs" if input_path == "dataloader" else
               "Its batches come from a cache of images decoded once, cropped and flipped on the GPU")
            + "; the input path's own images/s are measured beside, and a run the loader limited is flagged.")


def _allocated_bytes(device: torch.device) -> int:
    """Bytes of tensors alive on ``device`` now (0 off CUDA)."""
    if device.type != "cuda":
        return 0
    synchronize(device)
    return int(torch.cuda.memory_allocated(device))


def full_scale_run(technique: str = "baseline", *, minutes: float | None = 2.0, steps: int | None = None,
                   batch_size: int = 64, data: DataSplits | None = None, dataset: str = "imagenette",
                   root: str | os.PathLike | None = None, download: bool = False, image_size: int = 224,
                   model: str = "resnet50", lr: float | None = None, num_workers: int | None = None,
                   warmup_steps: int = 20, eval_batches: int | None = None, device: str | torch.device = "auto",
                   allow_cpu: bool = False, seed: int = 0, progress: bool = True,
                   input_path: str | InputPath = "cached", input_probe_batches: int | None = None,
                   cache_dir: str | os.PathLike | None = None, **overrides: Any) -> FullScaleResult:
    """Train ``model`` from scratch with ``technique`` (a key of :data:`TECHNIQUES`; ``overrides`` change single
    :class:`utils.techniques.RunSettings` knobs) and measure it. Returns a :class:`FullScaleResult`.

    Args:
        minutes: train for about this long, not counting setup, the first 3 steps (compilation, autotuning) and the
            evaluation; the number of steps is planned from the speed of the first ``warmup_steps``.
        steps: train exactly this many optimizer steps instead.
        batch_size: images per optimizer step; with accumulation, micro-batches of ``batch_size / accumulation``.
        data: a :func:`full_scale_data` result to reuse; else built from ``dataset``, ``root``, ``download``.
        lr: peak SGD learning rate (default 0.2 x batch_size / 256: twice the linear-scaling rule, for short runs),
            warmed up over ``warmup_steps`` (with ``steps``, at most a fifth of the run) and decayed by a cosine to 0 (:func:`lr_factor`).
        num_workers: DataLoader processes on the ``"dataloader"`` input path (default :func:`default_workers`).
        eval_batches: evaluate on this many held-out batches (default all; 0 skips evaluation).
        input_path: ``"cached"`` (decoded once, augmented on the device), ``"dataloader"`` (JPEGs decoded by
            DataLoader workers) or an :class:`utils.input_path.InputPath` (tests).
        input_probe_batches: batches timed to measure the input path alone before training (default: 8, or twice
            the workers; 0 skips the measurement and the run cannot say whether it was input-bound).
        cache_dir: where the decoded cache lives (:func:`utils.decoded_cache.cache_folder` by default).
        allow_cpu: run on a CPU too (toy sizes only: ResNet50 at 224 px trains a few images/s there).
    """
    dev = pick_device(device)
    if dev.type != "cuda" and not allow_cpu:
        raise DeviceUnavailableError(
            f"full_scale_run trains {model} at {image_size} px and needs a CUDA GPU; this run is on {dev}. Guard the "
            "call with `if run.on_gpu:`; for a toy run on a CPU pass allow_cpu=True with small sizes "
            "(model='small_cnn', image_size=32, steps=4).")
    if steps is None and (minutes is None or minutes <= 0):
        raise ValueError(f"give steps (optimizer steps) or minutes > 0 (training time), got minutes={minutes!r}")
    if steps is not None and steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if warmup_steps < (1 if steps is None else 0):
        raise ValueError(f"warmup_steps must be >= 1 when the run is given in minutes (its first steps are timed to "
                         f"plan the rest), got {warmup_steps}; for a run without warm-up give steps= instead")
    s = resolve_settings(technique, dev, **overrides)
    if batch_size % s.accumulation_steps:
        raise ValueError(f"batch_size {batch_size} is not divisible by accumulation_steps {s.accumulation_steps}")
    micro = batch_size // s.accumulation_steps
    workers = default_workers(dev) if num_workers is None else num_workers
    saved_flags = fast_path_flags()
    setup_start = time.perf_counter()
    bar = path = None
    try:
        if s.tf32 is not None:
            set_tf32(s.tf32)
        if s.cudnn_benchmark is not None:
            torch.backends.cudnn.benchmark = s.cudnn_benchmark
        if data is None:
            data = full_scale_data(dataset, image_size, root=root, download=download, seed=seed,
                                   stats_workers=workers)
        path = make_input_path(input_path, data, micro, workers=workers, pin_memory=s.pin_memory, seed=seed,
                               cache_dir=cache_dir, progress=progress)
        batches = path.train_batches()
        probe = max(8, 2 * path.workers) if input_probe_batches is None else input_probe_batches
        probe_start = time.perf_counter()
        loader_ips = (measure_input_rate(path, batches, dev, count=probe, non_blocking=s.pin_memory,
                                         channels_last=s.channels_last) if probe else None)
        probe_s = time.perf_counter() - probe_start
        # Tensors that earlier notebook cells left on the GPU are in torch.cuda's counters too: subtract them.
        preexisting = _allocated_bytes(dev)
        warmup_peak = None
        torch.manual_seed(seed)
        net = checkpoint_stages(build_model(model, data.num_classes, image_size=data.image_size), s.checkpoint_stages)
        net = net.to(dev, memory_format=torch.channels_last) if s.channels_last else net.to(dev)
        step_model = torch.compile(net, mode=s.compile) if s.compile else net
        impl = {"fused": dict(fused=True), "foreach": dict(foreach=True), "for-loop": dict(foreach=False)}
        peak_lr = lr if lr is not None else 0.2 * batch_size / 256
        opt = torch.optim.SGD(net.parameters(), lr=peak_lr, momentum=0.9, nesterov=True, weight_decay=5e-5,
                              **impl.get(s.optimizer_impl or "", {}))
        amp_dtype = resolve_amp(s.amp, dev)
        scaler = make_grad_scaler(amp_dtype, dev)
        loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
        # In minutes mode `total` is planned after the warm-up; the schedule's lambda reads the variable itself.
        total = steps if steps is not None else 10**9
        warmup = warmup_steps if steps is None else min(warmup_steps, max(1, steps // 5))
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: lr_factor(k, warmup, total))
        untimed = min(3, total - 1)
        first_plan = max(warmup, untimed + 1)                # minutes mode: the first step that plans the rest
        if progress:
            from tqdm.auto import tqdm
            bar = tqdm(total=steps, desc=technique, leave=False)
        if dev.type == "cuda":
            synchronize(dev)
            torch.cuda.reset_peak_memory_stats(dev)
        setup_s = time.perf_counter() - setup_start
        net.train()
        loss_sum = torch.zeros((), device=dev)
        images = timed_images = 0
        data_wait = 0.0
        t0 = time.perf_counter()
        step = 0
        while step < total:
            if step == untimed:                              # start the timed window
                synchronize(dev)
                t0, timed_images, data_wait = time.perf_counter(), 0, 0.0
                loss_sum.zero_()
                if dev.type == "cuda":    # the first steps' peak includes cudnn.benchmark's trial workspaces
                    warmup_peak = int(torch.cuda.max_memory_allocated(dev)) - preexisting
                    torch.cuda.reset_peak_memory_stats(dev)
            for k in range(s.accumulation_steps):
                wait_start = time.perf_counter()
                batch = next(batches)
                data_wait += time.perf_counter() - wait_start
                x, y = path.to_device(batch, dev, non_blocking=s.pin_memory, channels_last=s.channels_last)
                r = train_step(step_model, x, y, opt, loss_fn=loss_fn, amp_dtype=amp_dtype, scaler=scaler,
                               loss_divisor=s.accumulation_steps, zero_grad=k == 0,
                               step=k == s.accumulation_steps - 1)
                loss_sum += r.loss.float() * y.shape[0]
                images += y.shape[0]
                timed_images += y.shape[0]
            sched.step()
            step += 1
            if bar is not None:
                bar.update(1)
            if steps is None and step >= first_plan and (step - first_plan) % warmup == 0:
                # Plan the rest from the speed so far, and plan again every `warmup` steps: the first timed steps
                # can run ahead of the DataLoader on the batches its workers prefetched during the untimed ones.
                synchronize(dev)
                elapsed = time.perf_counter() - t0
                per_step = elapsed / (step - untimed)
                total = step + max(0, int((minutes * 60 - elapsed) / per_step))
                if bar is not None:
                    bar.total = total
                    bar.refresh()
        synchronize(dev)
        timed_s = time.perf_counter() - t0
        peak = int(torch.cuda.max_memory_allocated(dev)) - preexisting if dev.type == "cuda" else None
        eval_start = time.perf_counter()
        accuracy, eval_images = None, 0
        if eval_batches != 0:
            ev = evaluate(net, path.eval_batches(micro), dev, amp=s.amp or False, max_steps=eval_batches)
            accuracy, eval_images = ev.accuracy, ev.samples
        eval_s = time.perf_counter() - eval_start
    finally:
        if bar is not None:
            bar.close()
        if path is not None:
            path.close()
        restore_fast_path_flags(saved_flags)
    images_per_s, wait_share = timed_images / timed_s, data_wait / timed_s
    return FullScaleResult(
        technique=technique, settings=asdict(s), model=model, dataset=data.name, image_size=data.image_size,
        batch_size=batch_size, micro_batch_size=micro, optimizer_steps=step, images=images,
        epochs=images / len(data.train), timed_images=timed_images, timed_s=timed_s,
        images_per_s=images_per_s, data_wait_share=wait_share, peak_memory_bytes=peak,
        train_loss=(loss_sum / max(1, timed_images)).item(), accuracy=accuracy, eval_images=eval_images,
        setup_s=setup_s, eval_s=eval_s, hardware=hardware_label(dev),
        extras={"lr": peak_lr, "num_workers": path.workers, "warmup_peak_bytes": warmup_peak,
                "preexisting_bytes": preexisting if peak is not None else None, "input": path.describe(),
                "input_probe_batches": probe, "input_probe_s": probe_s},
        input_path=path.name, loader_images_per_s=loader_ips,
        input_bound=input_bound(loader_ips, images_per_s, wait_share))

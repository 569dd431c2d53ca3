"""The "at full scale" section of a day, in one call: :func:`full_scale_section`.

On a CUDA GPU it trains torchvision's ResNet50 at 224 px on Imagenette once per technique (through
:func:`utils.full_scale.full_scale_run`, the data loaded once and shared) and prints each run and a comparison with
the first. Anywhere else, or when the data cannot be had (an offline GPU machine without the download), it says what
the cell would do, why it did not, and shows the day's recorded GPU result (``results/dayNN/``) or says there is
none. It never raises for a missing GPU or dataset, nor for a GPU too small or a fresh process that fails: a
notebook must run top to bottom everywhere.

On CUDA the default batch (64) is first fitted to the free memory (:func:`fit_full_scale_batch`, through
:func:`utils.memory_guard.plan_batch_size`): on a card where it does not fit, every run of the section trains at
the largest half of it that does, and the section and each result say so (images/s and peak memory at another
batch are not comparable with a recording at 64). A run that still runs out of memory, or whose fresh process
fails, ends the section: it says why and shows the recorded results instead.

On CUDA a run that turns ``cudnn.benchmark`` on trains in a fresh process
(:func:`utils.fast_path.run_with_fresh_plans`): cuDNN keeps the plan of every convolution shape it has run for the
life of the process, whatever the flag says later, so in this process such a run would reuse the plans an earlier
run of the same shapes chose without autotuning, and could not differ from it.

Every run measures its input path alone (:mod:`utils.input_path`). The section prints a verdict on the techniques
(:func:`technique_verdicts`) only when no run was input-bound; otherwise it says which runs the loader limited and by
how much (:func:`input_limits`), because their ratios then measure the loader at least as much as the technique.
"""
from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Mapping, Sequence, Union

import torch

from .batch_size import free_device_memory, is_out_of_memory
from .course import smoke_mode
from .data import DataSplits
from .datasets import DatasetUnavailableError
from .device import pick_device
from .fast_path import needs_fresh_process, run_with_fresh_plans
from .full_scale import FullScaleResult, describe_full_scale, full_scale_data, full_scale_run
from .memory_guard import MemoryPlan, free_device_bytes, plan_batch_size
from .models import build_model
from .profiling import format_rows, load_recorded_results, recorded_report
from .techniques import TECHNIQUES, RunSettings

#: One run of a section: a technique name, or ``(label, technique, overrides)`` for a technique with some knobs
#: changed, e.g. ``("bf16+channels_last", "bf16", {"channels_last": True})``.
Variant = Union[str, tuple[str, str, Mapping[str, Any]]]


def _variant(entry: Variant) -> tuple[str, str, dict[str, Any]]:
    """``(label, technique, overrides)`` of one entry of :func:`full_scale_section`'s ``techniques``, checked."""
    if isinstance(entry, str):
        label, technique, overrides = entry, entry, {}
    elif isinstance(entry, tuple) and len(entry) == 3 and isinstance(entry[2], Mapping):
        label, technique, overrides = entry[0], entry[1], dict(entry[2])
    else:
        raise ValueError(f"each technique is a name such as 'bf16', or a (label, technique, overrides) tuple such as "
                         f"('bf16+channels_last', 'bf16', {{'channels_last': True}}); got {entry!r}")
    describe_full_scale(technique)                     # raises on an unknown name before anything runs
    unknown = set(overrides) - set(RunSettings.__dataclass_fields__)
    if unknown:
        raise ValueError(f"Unknown setting(s) {', '.join(sorted(unknown))} for {label!r}: the knobs are "
                         f"{', '.join(RunSettings.__dataclass_fields__)}")
    return str(label), technique, overrides


def benchmark_setting(technique: str, knobs: Mapping[str, Any]) -> bool | None:
    """The ``cudnn_benchmark`` a run of ``technique`` with ``knobs`` (its overrides and the section's ``run_kwargs``)
    sets: True, False, or None (it leaves the flag as it is)."""
    return {**TECHNIQUES[technique][0], **knobs}.get("cudnn_benchmark")


FRESH_PROCESS_NOTE = ("it turns cudnn.benchmark on, so it trains in a fresh process: cuDNN keeps the plan of every "
                      "convolution shape it has run in a process whatever the flag says later, so here it would "
                      "reuse the plans an earlier run chose without autotuning")


def compare_full_scale(results: Sequence[FullScaleResult]) -> str:
    """A text table of ``results``: images/s, peak memory (GiB), accuracy, and speed and memory relative to the
    first result (the baseline); then the share of time waiting for data and the input path's own images/s as a
    multiple of the training images/s, with ``*`` on the runs the input path limited."""
    if not results:
        raise ValueError("compare_full_scale needs at least one FullScaleResult")
    base = results[0]
    w = max(16, *(len(r.technique) for r in results))
    lines = [f"{'technique':<{w}} {'images/s':>9} {'x base':>7} {'peak GiB':>9} {'x base':>7} {'accuracy':>9} "
             f"{'wait':>5} {'input x':>8}"]
    for r in results:
        speed = r.images_per_s / base.images_per_s if base.images_per_s else float("nan")
        if r.peak_memory_bytes is not None and base.peak_memory_bytes:
            peak, mem = f"{r.peak_memory_bytes / 2**30:>9.2f}", f"{r.peak_memory_bytes / base.peak_memory_bytes:>7.2f}"
        else:
            peak, mem = f"{'-':>9}", f"{'-':>7}"
        acc = f"{r.accuracy:>9.1%}" if r.accuracy is not None else f"{'-':>9}"
        headroom = (f"{r.loader_images_per_s / r.images_per_s:>7.1f}" if r.loader_images_per_s and r.images_per_s
                    else f"{'-':>7}")
        lines.append(f"{r.technique:<{w}} {r.images_per_s:>9,.0f} {speed:>7.2f} {peak} {mem} {acc} "
                     f"{r.data_wait_share:>5.0%} {headroom}{'*' if r.input_bound else ' '}")
    if any(r.input_bound for r in results):
        lines.append("* input-bound: the input path, not the technique, set this run's speed")
    return "\n".join(lines)


#: Within this relative difference of the baseline's images/s, one run each cannot tell a change from noise.
SAME_SPEED = 0.05


def speed_word(ratio: float, band: float = SAME_SPEED, *, faster: str = "faster", same: str = "no clear change",
               slower: str = "slower") -> str:
    """``faster`` when ``ratio`` (new speed / old speed, unitless) exceeds ``1 + band``, ``slower`` below ``1 - band``,
    else ``same``: the one rule every verdict on a pair of single runs uses."""
    if not ratio > 0 or not band >= 0:
        raise ValueError(f"speed_word needs a positive ratio and a band >= 0, got ratio={ratio!r}, band={band!r}")
    return faster if ratio > 1 + band else slower if ratio < 1 - band else same


def input_limits(results: Sequence[FullScaleResult]) -> list[str]:
    """For every input-bound run, one sentence saying by how much its input path limited it; ``[]`` when none was."""
    return [r.input_limit() for r in results if r.input_bound]


def technique_verdicts(results: Sequence[FullScaleResult]) -> list[str]:
    """One line per run after the first: faster, slower or no clear change (within :data:`SAME_SPEED`) than the
    first, in images/s and peak memory. ``[]`` when any run was input-bound: a verdict would judge the loader."""
    if len(results) < 2 or any(r.input_bound for r in results):
        return []
    base, lines = results[0], []
    for r in results[1:]:
        ratio = r.images_per_s / base.images_per_s
        word = speed_word(ratio)
        mem = (f", x{r.peak_memory_bytes / base.peak_memory_bytes:.2f} the peak memory"
               if r.peak_memory_bytes and base.peak_memory_bytes else "")
        lines.append(f"{r.technique}: x{ratio:.2f} the images/s of {base.technique} ({word}; one run each, within "
                     f"{SAME_SPEED:.0%} counts as no change){mem}")
    return lines


SHARED_RECORDING_DAY = "day14"   # the GPU check kit records every technique once, under Day 14 (the week-2 project)


def recorded_techniques_report(techniques: Sequence[str], day: str = SHARED_RECORDING_DAY,
                               root: str | os.PathLike | None = None) -> str:
    """The rows of the kit's shared full-size recording (``results/day14/``: one run per technique with its own
    knobs, ResNet50 at 224 px) for ``techniques``, labelled with their hardware and date; ``""`` when nothing
    matching is recorded."""
    parts = []
    for record in load_recorded_results(day, root):
        rows = [row for row in record.get("rows", []) if row.get("technique") in techniques]
        if rows:
            cut_short = " (a partial recording: stopped before it finished, later rows missing)" \
                if record.get("partial") else ""
            parts.append(f"Recorded on {record['hardware']} ({record['date'][:10]}, {record['source']}), "
                         f"{record.get('what', '')}{cut_short}:\n{format_rows(rows)}")
    return "\n".join(parts)


def _show_recorded(day: str, techniques: Sequence[str], root: str | os.PathLike | None) -> None:
    print(recorded_report(day, root))
    if day != SHARED_RECORDING_DAY:
        shared = recorded_techniques_report(techniques, root=root)
        if shared:
            print("The same techniques in the GPU check kit's shared recording:\n" + shared)


#: The batch of a full-size run when the caller gives none: the one the GPU check kit's recordings use.
DEFAULT_BATCH = 64
#: The smallest batch :func:`fit_full_scale_batch` halves down to; below it the runs are skipped.
MIN_FITTED_BATCH = 8


def fit_full_scale_batch(model: str, num_classes: int, image_size: int, batch_size: int,
                         device: torch.device) -> MemoryPlan | None:
    """The batch of ``batch_size``, ``batch_size // 2``, ... (then :data:`MIN_FITTED_BATCH` itself, never below) that
    a full-size run of ``model`` (fp32, SGD with momentum: the most memory any technique of the section needs per
    image) is predicted to fit into the memory free on ``device`` now (:func:`utils.memory_guard.plan_batch_size`,
    which measures one image's saved activations there). ``None`` off CUDA: nothing to check."""
    free = free_device_bytes(device)                 # bytes; measured before the probe model takes its share
    if free is None:
        return None
    with torch.random.fork_rng(devices=[]):          # the probe's initialisation leaves the caller's CPU RNG as it was
        net = build_model(model, num_classes, image_size=image_size).to(device)
    plan = plan_batch_size(net, (3, image_size, image_size), preferred=batch_size, device=device,
                           optimizer_states=1, minimum=min(MIN_FITTED_BATCH, batch_size), free_bytes=free)
    del net
    free_device_memory(device)
    return plan


def _failure_text(label: str, batch_size: int, error: RuntimeError, fresh: bool) -> str | None:
    """What to print when the run ``label`` raised ``error``: an out-of-memory error (:func:`is_out_of_memory`), or
    any error of a run in a fresh process (the process died, ran past its time, or raised an error of its own; a GPU
    in exclusive-process compute mode never gets here: :func:`utils.fast_path.run_with_fresh_plans` runs that run in
    this process). ``None`` for any other error of a run in this process: a bug, raised as it is."""
    first_line = (str(error).strip().splitlines() or [""])[0][:200]
    if is_out_of_memory(error):
        return (f"{label}: out of memory at batch {batch_size} on this GPU ({type(error).__name__}: {first_line}). "
                "Close other programs using it, or pass a smaller batch_size; the full-size runs stop here and the "
                "recorded results follow.")
    if fresh:
        return (f"{label}: its fresh process failed ({type(error).__name__}: {first_line}), so this GPU cannot "
                "measure it here (the process died, ran past its time, or raised the error above). The full-size "
                "runs stop here and the recorded results follow.")
    return None


def full_scale_section(techniques: Sequence[Variant], *, day: str, minutes: float | None = 2.0,
                       dataset: str = "imagenette", image_size: int = 224, root: str | os.PathLike | None = None,
                       download: bool = True, device: str | torch.device = "auto", allow_cpu: bool = False,
                       results_root: str | None = None, smoke: bool = False, data: DataSplits | None = None,
                       fit_batch: bool | None = None, raise_out_of_memory: bool = False,
                       **run_kwargs: Any) -> list[FullScaleResult]:
    """Run ``techniques`` (keys of :data:`utils.techniques.TECHNIQUES`, the first is the baseline) at full size and
    print the results, or explain why not and print ``day``'s recorded GPU results. Returns the measured results
    (``[]`` when nothing ran, or when a run ran out of memory or its fresh process failed: then the section says so
    and shows the recorded results, and the runs before it are printed but not returned or compared).

    An entry may also be ``(label, technique, overrides)``: that technique with some
    :class:`utils.techniques.RunSettings` knobs changed, e.g. ``("bf16+channels_last", "bf16", {"channels_last":
    True})``; its result's ``technique`` is the label (its ``settings`` hold every knob), and its overrides win over
    those in ``run_kwargs``.

    Args:
        day: e.g. ``"day25"``: where the recorded results live (``results/day25/``).
        minutes: training time per technique, setup and evaluation not counted (see :func:`full_scale_run`).
        download: fetch the dataset into :func:`utils.datasets.data_root` on first use (341 MB for Imagenette
            at 320 px, which 224 px training reads); an offline machine falls back to the recorded results. The
            default input path then decodes it once into a uint8 cache beside it (2.6 GB at 256 px, train and
            val; :mod:`utils.decoded_cache`); ``input_path="dataloader"`` (in ``run_kwargs``) decodes every batch
            in DataLoader workers instead, as Days 03 and 10 measure it.
        allow_cpu: run off CUDA too (tests only, with toy ``run_kwargs`` such as ``model="small_cnn"``).
        data: a :func:`utils.full_scale.full_scale_data` result to reuse (building one computes the dataset's
            channel statistics: seconds to tens of seconds); else built from ``dataset``, ``root``, ``download``.
        smoke: a smoke run (pass ``run.smoke``; grading and ``BOOTCAMP_SMOKE=1`` count too,
            :func:`utils.course.smoke_mode`): only describe the runs and show the recorded results, on a GPU too.
        fit_batch: on CUDA, halve the batch until it fits the free memory (:func:`fit_full_scale_batch`) before
            anything trains. ``None`` (the default): only when ``run_kwargs`` gives no ``batch_size``; a batch you
            pass runs as given (a sweep that stops at the first out-of-memory error, a batch you planned).
        raise_out_of_memory: raise a run's out-of-memory error (:func:`utils.batch_size.is_out_of_memory`) instead
            of ending the section with the recording: for a batch-size sweep, where running out is the answer it
            looks for. The caller frees the memory (:func:`utils.batch_size.free_device_memory`) outside its
            ``except`` block.
        run_kwargs: passed to every :func:`full_scale_run` (``steps``, ``batch_size``, ``model``, knob overrides).
    """
    if not techniques:
        raise ValueError("full_scale_section needs at least one technique, e.g. ['baseline', 'bf16']")
    variants = [_variant(entry) for entry in techniques]
    # The shared recording ran each technique with its own knobs: a variant that changes them (Day 11's IEEE fp32
    # is "baseline" with TF32 off) is not that run, so only unchanged techniques are matched to its rows.
    techniques_run = [technique for _, technique, overrides in variants if not overrides]
    dev = pick_device(device)
    fit = "batch_size" not in run_kwargs if fit_batch is None else bool(fit_batch)
    batch_size = int(run_kwargs.pop("batch_size", DEFAULT_BATCH))     # images per optimizer step
    skip_why = ("This is a smoke run" if smoke_mode(smoke) else
                f"This run is on {dev}" if dev.type != "cuda" and not allow_cpu else None)
    if skip_why:
        print(f"{skip_why}, so the full-size runs are skipped.")
        described = set()
        for label, technique, overrides in variants:
            if overrides and technique in described:      # the sentence is above: say only what differs
                text = f"{label}: the {technique} run with " + ", ".join(f"{k}={v!r}" for k, v in overrides.items())
            else:
                text = describe_full_scale(technique, minutes or 0, image_size=image_size, dataset=dataset,
                                           model=run_kwargs.get("model", "resnet50"), batch_size=batch_size,
                                           steps=run_kwargs.get("steps"), fitted=fit,
                                           input_path=str(run_kwargs.get("input_path", "cached")))
                if overrides:
                    text = f"{label}: {text} Changed from {technique!r}: " + ", ".join(
                        f"{k}={v!r}" for k, v in overrides.items()) + "."
                else:
                    described.add(technique)
            if benchmark_setting(technique, {**run_kwargs, **overrides}):
                text += f" On a CUDA GPU {FRESH_PROCESS_NOTE}."
            print(" - " + text)
        _show_recorded(day, techniques_run, results_root)
        return []
    try:
        if data is None:
            data = full_scale_data(dataset, image_size, root=root, download=download)
    except DatasetUnavailableError as err:
        print(f"The full-size runs need the {dataset} dataset and could not get it:\n{err}")
        _show_recorded(day, techniques_run, results_root)
        return []
    requested = batch_size
    plan = fit_full_scale_batch(str(run_kwargs.get("model", "resnet50")), data.num_classes, data.image_size,
                                batch_size, dev) if fit else None
    if plan is not None:
        print(f"Memory check: {plan.explanation()}.")
        if plan.batch_size is None:                      # the explanation says the runs are skipped
            _show_recorded(day, techniques_run, results_root)
            return []
        batch_size = plan.batch_size                     # every run at the same batch, each labelled if it changed
    results, failure = [], None
    for label, technique, overrides in variants:
        kwargs = dict(minutes=minutes, data=data, image_size=image_size, device=dev, allow_cpu=allow_cpu,
                      **{"batch_size": batch_size, **run_kwargs, **overrides})     # a variant may change the batch
        benchmark = benchmark_setting(technique, kwargs)
        fresh = needs_fresh_process(dev, benchmark)
        if fresh:
            print(f"{label}: {FRESH_PROCESS_NOTE}.")
            kwargs["progress"] = False                   # a bar in another process would not show here
        try:
            arm = run_with_fresh_plans(full_scale_run, (technique,), kwargs, device=dev, benchmark=benchmark)
        except RuntimeError as err:                      # torch.OutOfMemoryError is one too
            if raise_out_of_memory and is_out_of_memory(err):
                raise
            # Only the text is kept: the traceback holds the failed run's frames, and with them its tensors.
            failure = _failure_text(label, kwargs["batch_size"], err, fresh)
            if failure is None:
                raise
        if failure:
            break
        if arm.note:                                     # the GPU admitted no second process: it trained here
            print(f"{label}: {arm.note}")
        result = replace(arm.value, extras={**arm.value.extras, "fresh_process": arm.fresh_process,
                                            "cudnn_plans": "reused" if arm.note else "-",
                                            "requested_batch_size": requested})
        if label != technique:
            result = replace(result, technique=label, extras={**result.extras, "technique": technique,
                                                              "overrides": overrides})
        print(result.summary())
        results.append(result)
    if failure:
        free_device_memory(dev)                          # out of the except block: the failed run's memory is free
        print(failure)
        if results:
            print(f"The {len(results)} run{'s' if len(results) > 1 else ''} above {'are' if len(results) > 1 else 'is'}"
                  " not compared: the section's runs are compared only when all of them ran.")
        _show_recorded(day, techniques_run, results_root)
        return []
    if len(results) > 1:
        print(compare_full_scale(results))
    limits = input_limits(results)
    if limits:
        print("No verdict on the technique" + ("s" if len(results) > 1 else "") + ": the input path limited "
              + ("this run" if len(results) == 1 else f"{len(limits)} of these {len(results)} runs") + ", so their "
              "speeds measure the loader at least as much as the technique:")
        for line in limits:
            print(" - " + line)
    else:
        for line in technique_verdicts(results):
            print(line)
        measured = [r for r in results if r.loader_images_per_s]
        if measured:
            least = min(measured, key=lambda r: r.loader_images_per_s / r.images_per_s)
            print(f"Not input-bound: the input path alone delivered at least "
                  f"{least.loader_images_per_s / least.images_per_s:.1f}x the images/s each run trained at.")
    return results

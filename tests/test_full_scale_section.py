"""utils.full_scale_section: a day's full-size section runs on a CPU at toy size, and without a GPU or without the
dataset it explains and shows the recorded results instead of raising (no network: the data folder is written here)."""
from __future__ import annotations

import json

import pytest
import torch
import torchvision.models  # noqa: F401  (its first import takes seconds: paid at collection, not in a test)

from utils.datasets import write_imagenette_like
from utils.full_scale import FullScaleResult
from utils.full_scale_section import compare_full_scale, full_scale_section
from utils.profiling import provenance, write_recorded

TOY = dict(model="small_cnn", image_size=32, batch_size=8, num_workers=0, progress=False, steps=2, eval_batches=1)


def test_without_a_gpu_it_describes_the_runs_and_says_nothing_is_recorded(tmp_path, capsys):
    assert full_scale_section(["baseline", "bf16"], day="day99", device="cpu", results_root=str(tmp_path)) == []
    out = capsys.readouterr().out
    assert "skipped" in out and out.count("On a CUDA GPU this cell trains ResNet50") == 2
    assert "bf16 autocast" in out and "No recorded GPU result yet" in out


def test_without_a_gpu_it_shows_the_recorded_result(tmp_path, capsys):
    write_recorded(tmp_path / "day99" / "h200.json", {"what": "ResNet50 bf16", "summary": ["2.5x faster"]},
                   provenance("cpu", "python tools/gpu_check.py --only day99"))
    full_scale_section(["baseline"], day="day99", device="cpu", results_root=str(tmp_path))
    out = capsys.readouterr().out
    assert "2.5x faster" in out and "gpu_check.py --only day99" in out


def test_an_unknown_technique_raises_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="Unknown technique 'bf17'"):
        full_scale_section(["baseline", "bf17"], day="day99", device="cpu", results_root=str(tmp_path))
    with pytest.raises(ValueError, match="at least one technique"):
        full_scale_section([], day="day99")


def test_missing_data_explains_and_falls_back_instead_of_raising(tmp_path, capsys):
    results = full_scale_section(["baseline"], day="day99", root=tmp_path / "empty", download=False,
                                 device="cpu", allow_cpu=True, results_root=str(tmp_path), **TOY)
    out = capsys.readouterr().out
    assert results == [] and "could not get it" in out and "download=True" in out
    assert "No recorded GPU result yet" in out


@pytest.mark.slow
def test_toy_runs_share_the_data_and_are_compared_with_the_first(tmp_path, capsys):
    write_imagenette_like(tmp_path, num_classes=3, train_per_class=8, val_per_class=2)
    results = full_scale_section(["baseline", "accumulation"], day="day99", root=tmp_path, download=False,
                                 device="cpu", allow_cpu=True, results_root=str(tmp_path), **TOY)
    assert [r.technique for r in results] == ["baseline", "accumulation"]
    assert all(isinstance(r, FullScaleResult) and r.optimizer_steps == 2 for r in results)
    assert results[1].micro_batch_size == 2            # 8 images in 4 micro-batches
    out = capsys.readouterr().out
    assert "x base" in out and out.count("small_cnn") == 2
    table = compare_full_scale(results).splitlines()
    assert table[1].split()[2] == "1.00"                # the baseline against itself
    assert json.dumps(results[0].as_dict())             # plain data, ready to record


@pytest.mark.slow
def test_a_technique_with_overrides_runs_under_its_label(tmp_path, capsys):
    write_imagenette_like(tmp_path, num_classes=3, train_per_class=8, val_per_class=2)
    results = full_scale_section(["bf16", ("bf16+channels_last", "bf16", {"channels_last": True})], day="day99",
                                 root=tmp_path, download=False, device="cpu", allow_cpu=True,
                                 results_root=str(tmp_path), **TOY)
    assert [r.technique for r in results] == ["bf16", "bf16+channels_last"]
    assert [r.settings["channels_last"] for r in results] == [False, True]
    assert all(r.settings["amp"] == "bf16" for r in results)
    assert results[1].extras["technique"] == "bf16" and results[1].extras["overrides"] == {"channels_last": True}
    assert "bf16+channels_last" in compare_full_scale(results)


def test_overrides_are_described_without_a_gpu_and_checked_before_anything_runs(tmp_path, capsys):
    full_scale_section(["bf16", ("bf16+fused", "bf16", {"optimizer_impl": "fused"})], day="day99", device="cpu",
                       results_root=str(tmp_path))
    out = capsys.readouterr().out
    assert "bf16+fused: the bf16 run with optimizer_impl='fused'" in out and "for about 2 min" in out
    full_scale_section([("bf16+fused", "bf16", {"optimizer_impl": "fused"})], day="day99", device="cpu",
                       results_root=str(tmp_path))
    out = capsys.readouterr().out                      # no sentence above it: described in full
    assert "bf16+fused: On a CUDA GPU" in out and "Changed from 'bf16': optimizer_impl='fused'." in out
    full_scale_section(["bf16"], day="day99", device="cpu", results_root=str(tmp_path), minutes=None, steps=300)
    assert "for 300 optimizer steps" in capsys.readouterr().out
    with pytest.raises(ValueError, match="Unknown setting"):
        full_scale_section([("bf16+cl", "bf16", {"channel_last": True})], day="day99", device="cpu")
    with pytest.raises(ValueError, match="Unknown technique 'bf17'"):
        full_scale_section([("x", "bf17", {})], day="day99", device="cpu")
    with pytest.raises(ValueError, match="label, technique, overrides"):
        full_scale_section([("bf16", {"channels_last": True})], day="day99", device="cpu")


def test_without_a_gpu_it_also_shows_the_kits_shared_rows_for_its_techniques(tmp_path, capsys):
    rows = [{"technique": t, "images_per_s": v} for t, v in (("baseline", 900.0), ("bf16", 2400.0), ("fast", 3100.0))]
    write_recorded(tmp_path / "day14" / "h200.json", {"what": "ResNet50 224 px, one run per technique", "rows": rows},
                   provenance("cpu", "python tools/gpu_check.py --only day14"))
    full_scale_section(["baseline", "bf16"], day="day99", device="cpu", results_root=str(tmp_path))
    out = capsys.readouterr().out
    assert "No recorded GPU result yet" in out                      # nothing of Day 99's own
    shared = out.split("shared recording:")[1]
    assert "900" in shared and "2400" in shared and "3100" not in shared, "only the section's own techniques"
    assert "gpu_check.py --only day14" in shared                     # provenance travels with the rows
    capsys.readouterr()
    full_scale_section(["baseline"], day="day14", device="cpu", results_root=str(tmp_path))
    assert "shared recording" not in capsys.readouterr().out         # Day 14 shows it once, as its own


def test_a_variant_with_changed_knobs_is_not_matched_to_the_shared_row_of_its_technique(tmp_path, capsys):
    # Day 11's IEEE fp32 is "baseline" with TF32 off; the kit's "baseline" row ran default flags (TF32 convolutions).
    rows = [{"technique": t, "images_per_s": v} for t, v in (("baseline", 900.0), ("bf16", 2400.0))]
    write_recorded(tmp_path / "day14" / "h200.json", {"what": "ResNet50 224 px, one run per technique", "rows": rows},
                   provenance("cpu", "python tools/gpu_check.py --only day14"))
    full_scale_section([("fp32", "baseline", {"tf32": False}), "bf16"], day="day99", device="cpu",
                       results_root=str(tmp_path))
    shared = capsys.readouterr().out.split("shared recording:")[1]
    assert "2400" in shared and "900" not in shared, "the default-flags baseline is not Day 11's IEEE fp32"
    full_scale_section([("bf16 + channels_last", "bf16", {"channels_last": True})], day="day99", device="cpu",
                       results_root=str(tmp_path))
    assert "shared recording" not in capsys.readouterr().out


def test_a_smoke_run_only_describes_even_where_it_could_train(tmp_path, capsys, monkeypatch):
    # A smoke run on a GPU (the kit's Part A, a learner's quick check) must not train ResNet50 for minutes.
    for var in ("NBGRADER_EXECUTION", "BOOTCAMP_SMOKE"):
        monkeypatch.delenv(var, raising=False)
    write_imagenette_like(tmp_path, num_classes=3, train_per_class=8, val_per_class=2)
    kw = dict(day="day99", root=tmp_path, download=False, device="cpu", allow_cpu=True, results_root=str(tmp_path),
              **TOY)
    assert full_scale_section(["baseline"], smoke=True, **kw) == []
    assert "This is a smoke run, so the full-size runs are skipped" in capsys.readouterr().out
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")            # grading counts as a smoke run too
    assert full_scale_section(["baseline"], **kw) == []
    monkeypatch.delenv("NBGRADER_EXECUTION")
    assert len(full_scale_section(["baseline"], **kw)) == 1


def test_a_dataset_built_once_is_reused(tmp_path, monkeypatch, capsys):
    import utils.full_scale_section as FSS
    from utils.full_scale import full_scale_data

    write_imagenette_like(tmp_path, num_classes=3, train_per_class=8, val_per_class=2)
    data = full_scale_data("imagenette", 32, root=tmp_path)
    monkeypatch.setattr(FSS, "full_scale_data", lambda *a, **k: pytest.fail("the data was built again"))
    results = full_scale_section(["baseline"], day="day99", data=data, device="cpu", allow_cpu=True,
                                 results_root=str(tmp_path), **TOY)
    assert len(results) == 1 and results[0].dataset == data.name


@pytest.mark.slow
def test_a_run_that_turns_cudnn_benchmark_on_trains_in_a_fresh_process(tmp_path, monkeypatch, capsys):
    # cuDNN keeps a plan per convolution shape for the life of a process, under a key without the benchmark flag:
    # in the same process, a benchmark run after a flag-off run of the same shapes would never autotune. Simulated
    # here by treating the CPU as a device that caches plans; the old section ran every variant in this process and
    # fails the pid check.
    import os

    import utils.fast_path as FP
    import utils.full_scale_section as FSS

    pretend_cuda = lambda device, benchmark: bool(torch.backends.cudnn.benchmark if benchmark is None else benchmark)
    monkeypatch.setattr(FP, "needs_fresh_process", pretend_cuda)
    monkeypatch.setattr(FSS, "needs_fresh_process", pretend_cuda)
    original = FSS.full_scale_run

    def run_and_say_where(*args, **kwargs):
        import os as os_
        from dataclasses import replace as replace_
        r = original(*args, **kwargs)
        return replace_(r, extras={**r.extras, "pid": os_.getpid()})

    monkeypatch.setattr(FSS, "full_scale_run", run_and_say_where)
    write_imagenette_like(tmp_path, num_classes=3, train_per_class=8, val_per_class=2)
    results = full_scale_section(["baseline", ("baseline+cudnn_benchmark", "baseline", {"cudnn_benchmark": True})],
                                 day="day99", root=tmp_path, download=False, device="cpu", allow_cpu=True,
                                 results_root=str(tmp_path), **TOY)
    assert [r.technique for r in results] == ["baseline", "baseline+cudnn_benchmark"]
    assert results[0].extras["pid"] == os.getpid() and not results[0].extras["fresh_process"]
    assert results[1].extras["pid"] != os.getpid() and results[1].extras["fresh_process"]
    assert results[1].settings["cudnn_benchmark"] is True and results[1].optimizer_steps == 2
    assert "trains in a fresh process" in capsys.readouterr().out


def test_without_a_gpu_a_benchmark_variant_is_described_with_its_fresh_process(tmp_path, capsys):
    full_scale_section(["bf16", ("bf16+cudnn_benchmark", "bf16", {"cudnn_benchmark": True}), "fast"], day="day99",
                       device="cpu", results_root=str(tmp_path))
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith(" - ")]
    assert ["fresh process" in line for line in lines] == [False, True, True]


# ------------------------------------------------- a small GPU: the batch is fitted, and failures fall back
# A CUDA card is simulated on the CPU at its seam: `free_device_bytes` (torch.cuda.mem_get_info plus the allocator's
# unused cache on a real card) returns a small number, and the runs are fakes that record the batch they were given
# and raise what a GPU would. The probe that measures one image's saved activations runs for real, on the CPU.
from types import SimpleNamespace

TOY_DATA = SimpleNamespace(num_classes=3, image_size=32, name="toy")
SMALL = dict(model="small_cnn", steps=2, device="cpu", allow_cpu=True, data=TOY_DATA)


def _fake_result(technique: str, batch_size: int) -> FullScaleResult:
    return FullScaleResult(
        technique=technique, settings={}, model="small_cnn", dataset="toy", image_size=32, batch_size=batch_size,
        micro_batch_size=batch_size, optimizer_steps=2, images=2 * batch_size, epochs=0.1, timed_images=batch_size,
        timed_s=1.0, images_per_s=float(batch_size), data_wait_share=0.0, peak_memory_bytes=2**30, train_loss=1.0,
        accuracy=0.5, eval_images=6, setup_s=0.0, eval_s=0.0, hardware="simulated 6 GB card",
        loader_images_per_s=10.0 * batch_size)


@pytest.fixture
def small_card(monkeypatch):
    """A card on which 20 images of small_cnn at 32 px fit (so batch 16 of a requested 64); the fake runs' calls."""
    import utils.full_scale_section as FSS
    from utils.memory_guard import USABLE_SHARE, plan_batch_size
    from utils.models import build_model

    probe = plan_batch_size(build_model("small_cnn", 3, image_size=32), (3, 32, 32), preferred=64, device="cpu",
                            free_bytes=10**12)
    free = int((probe.fixed_bytes + 20 * probe.per_sample_bytes) / USABLE_SHARE)
    monkeypatch.setattr(FSS, "free_device_bytes", lambda device: free)
    calls = []

    def fake_run(technique, **kwargs):
        calls.append((technique, kwargs["batch_size"]))
        return _fake_result(technique, kwargs["batch_size"])

    monkeypatch.setattr(FSS, "full_scale_run", fake_run)
    return SimpleNamespace(calls=calls, free=free, per_sample=probe.per_sample_bytes, fixed=probe.fixed_bytes)


def test_on_a_small_card_the_default_batch_is_fitted_and_every_run_says_so(tmp_path, capsys, small_card):
    # The old section trained at batch 64 whatever the card: ResNet50 at 224 px in fp32 needs > 5 GiB there.
    results = full_scale_section(["baseline", "bf16"], day="day99", results_root=str(tmp_path), **SMALL)
    assert small_card.calls == [("baseline", 16), ("bf16", 16)], "every run at the one batch that fits"
    out = capsys.readouterr().out
    assert "Memory check: batch 64 needs" in out and "batch 16 instead" in out and "not comparable" in out
    assert all(r.extras["requested_batch_size"] == 64 for r in results)
    assert out.count("batch 16 (fitted to free memory; 64 requested)") == 2      # each run's line carries it
    assert "x base" in out                                                       # compared with each other


def test_a_batch_the_caller_passes_runs_as_given_unless_fitting_is_asked(tmp_path, capsys, small_card):
    # Day 09's sweep passes its batch sizes and stops at the first out-of-memory error: no silent halving there.
    full_scale_section(["baseline"], day="day99", results_root=str(tmp_path), batch_size=32, **SMALL)
    assert small_card.calls == [("baseline", 32)] and "Memory check" not in capsys.readouterr().out
    full_scale_section(["baseline"], day="day99", results_root=str(tmp_path), batch_size=32, fit_batch=True, **SMALL)
    assert small_card.calls[-1] == ("baseline", 16)
    assert "batch 16 (fitted to free memory; 32 requested)" in capsys.readouterr().out


def test_where_not_even_the_smallest_batch_fits_nothing_trains_and_the_recording_is_shown(tmp_path, capsys,
                                                                                          monkeypatch, small_card):
    import utils.full_scale_section as FSS
    monkeypatch.setattr(FSS, "free_device_bytes", lambda device: small_card.fixed + 4 * small_card.per_sample)
    assert full_scale_section(["baseline"], day="day99", results_root=str(tmp_path), **SMALL) == []
    out = capsys.readouterr().out
    assert small_card.calls == [] and "not even the smallest batch fits" in out and "No recorded GPU result" in out


def test_an_out_of_memory_error_ends_the_section_with_the_recording_instead_of_raising(tmp_path, capsys,
                                                                                      monkeypatch, small_card):
    import utils.full_scale_section as FSS
    write_recorded(tmp_path / "day99" / "h200.json", {"what": "ResNet50 224 px batch 64", "summary": ["recorded"]},
                   provenance("cpu", "python tools/gpu_check.py --only day99"))

    def runs_out_on_the_second(technique, **kwargs):
        if technique == "checkpointing":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 392.00 MiB")
        return _fake_result(technique, kwargs["batch_size"])

    monkeypatch.setattr(FSS, "full_scale_run", runs_out_on_the_second)
    results = full_scale_section(["baseline", "checkpointing"], day="day99", results_root=str(tmp_path), **SMALL)
    out = capsys.readouterr().out
    assert results == [], "a partial list would be compared as if every run had happened"
    assert "checkpointing: out of memory at batch 16" in out and "OutOfMemoryError" in out
    assert "not compared" in out and "x base" not in out
    assert "Recorded (not measured in this run)" in out.split("recorded results follow")[1]
    # cuDNN reports a failed workspace allocation as a plain RuntimeError: the same fallback
    monkeypatch.setattr(FSS, "full_scale_run", lambda technique, **kw: (_ for _ in ()).throw(
        RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED")))
    assert full_scale_section(["baseline"], day="day99", results_root=str(tmp_path), **SMALL) == []
    assert "out of memory at batch 16" in capsys.readouterr().out


def test_a_sweep_that_asks_gets_the_out_of_memory_error_and_no_recording(tmp_path, capsys, monkeypatch, small_card):
    # Day 09's batch sweep stops at the first batch that runs out: that is its answer, not a failure to explain
    # with another GPU's recording and "pass a smaller batch_size".
    import utils.full_scale_section as FSS
    monkeypatch.setattr(FSS, "full_scale_run", lambda technique, **kw: (_ for _ in ()).throw(
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 392.00 MiB")))
    with pytest.raises(torch.OutOfMemoryError):
        full_scale_section(["baseline"], day="day99", results_root=str(tmp_path), batch_size=256,
                           raise_out_of_memory=True, **SMALL)
    out = capsys.readouterr().out
    assert "out of memory at batch" not in out and "recorded results follow" not in out
    monkeypatch.setattr(FSS, "full_scale_run", lambda technique, **kw: (_ for _ in ()).throw(
        RuntimeError("mat1 and mat2 shapes cannot be multiplied")))
    with pytest.raises(RuntimeError, match="mat1"):                        # other errors: raised as before
        full_scale_section(["baseline"], day="day99", results_root=str(tmp_path), batch_size=256,
                           raise_out_of_memory=True, **SMALL)


def test_a_fresh_process_that_fails_ends_the_section_with_the_recording_instead_of_raising(tmp_path, capsys,
                                                                                          monkeypatch, small_card):
    # utils.fast_path raises a RuntimeError for a fresh process that dies (a busy device in the middle of a run, a
    # crash); a device refused before the run is not an error (the run goes on in this process).
    import utils.full_scale_section as FSS
    pretend_cuda = lambda device, benchmark: bool(benchmark)
    monkeypatch.setattr(FSS, "needs_fresh_process", pretend_cuda)
    real_call = FSS.run_with_fresh_plans

    def dies_in_a_fresh_process(fn, args=(), kwargs=None, *, device, benchmark, **kw):
        if benchmark:
            raise RuntimeError("full_scale_run failed in its fresh process:\nCUDA error: CUDA-capable device(s) "
                               "is/are busy or unavailable")
        return real_call(fn, args, kwargs, device=device, benchmark=benchmark, **kw)

    monkeypatch.setattr(FSS, "run_with_fresh_plans", dies_in_a_fresh_process)
    results = full_scale_section(["baseline", ("baseline+cudnn_benchmark", "baseline", {"cudnn_benchmark": True})],
                                 day="day99", results_root=str(tmp_path), **SMALL)
    out = capsys.readouterr().out
    assert results == [] and "baseline+cudnn_benchmark: its fresh process failed" in out
    assert "the process died, ran past its time" in out and "No recorded GPU result" in out


def test_any_other_error_of_a_run_in_this_process_is_raised(tmp_path, monkeypatch, small_card):
    import utils.full_scale_section as FSS
    monkeypatch.setattr(FSS, "full_scale_run", lambda technique, **kw: (_ for _ in ()).throw(
        RuntimeError("mat1 and mat2 shapes cannot be multiplied")))
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        full_scale_section(["baseline"], day="day99", results_root=str(tmp_path), **SMALL)


def test_without_a_gpu_the_description_says_the_default_batch_is_fitted(tmp_path, capsys):
    full_scale_section(["baseline"], day="day99", device="cpu", results_root=str(tmp_path))
    assert "batch 64 (halved until it fits the GPU's free memory" in capsys.readouterr().out
    full_scale_section(["baseline"], day="day99", device="cpu", results_root=str(tmp_path), batch_size=32)
    out = capsys.readouterr().out
    assert "batch 32, " in out and "halved" not in out


@pytest.mark.slow
def test_a_real_toy_run_trains_at_the_fitted_batch(tmp_path, capsys, monkeypatch, small_card):
    import utils.full_scale_section as FSS
    from utils.full_scale import full_scale_run
    monkeypatch.setattr(FSS, "full_scale_run", full_scale_run)
    write_imagenette_like(tmp_path, num_classes=3, train_per_class=8, val_per_class=2)
    (r,) = full_scale_section(["baseline"], day="day99", root=tmp_path, download=False, device="cpu",
                              allow_cpu=True, results_root=str(tmp_path), model="small_cnn", image_size=32,
                              num_workers=0, progress=False, steps=2, eval_batches=1)
    assert r.batch_size == 16 and r.micro_batch_size == 16 and r.extras["requested_batch_size"] == 64


def test_a_run_the_gpu_kept_in_this_process_is_labelled_plans_reused(tmp_path, capsys, monkeypatch, small_card):
    # utils.fast_path runs a flag-on measurement here when the GPU admits no second process; the section must not
    # call it a fresh-process run, and must print the label next to it.
    import utils.full_scale_section as FSS
    from utils.fast_path import PLANS_REUSED, FreshPlansRun
    monkeypatch.setattr(FSS, "needs_fresh_process", lambda device, benchmark: bool(benchmark))

    def kept_here(fn, args=(), kwargs=None, *, device, benchmark, **kw):
        note = f"{PLANS_REUSED} (exclusive-process compute mode)" if benchmark else ""
        return FreshPlansRun(fn(*args, **(kwargs or {})), fresh_process=False, note=note)

    monkeypatch.setattr(FSS, "run_with_fresh_plans", kept_here)
    results = full_scale_section(["baseline", ("baseline+cudnn_benchmark", "baseline", {"cudnn_benchmark": True})],
                                 day="day99", results_root=str(tmp_path), **SMALL)
    out = capsys.readouterr().out
    assert f"baseline+cudnn_benchmark: {PLANS_REUSED}" in out
    flagged = next(r for r in results if r.technique == "baseline+cudnn_benchmark")
    assert flagged.extras["fresh_process"] is False and flagged.extras["cudnn_plans"] == "reused"
    assert next(r for r in results if r.technique == "baseline").extras["cudnn_plans"] == "-"


def test_recorded_techniques_report_shows_the_days_rows_and_says_when_a_recording_was_cut_short(tmp_path):
    from utils.full_scale_section import recorded_techniques_report

    assert recorded_techniques_report(["pinned"], root=tmp_path) == ""
    rows = [{"run": "baseline", "technique": "baseline", "images_per_s": 900.0},
            {"run": "pinned", "technique": "pinned", "images_per_s": 950.0}]
    prov = provenance("cpu", "python tools/gpu_check.py") | {"hardware": "cuda:0 NVIDIA H200"}
    write_recorded(tmp_path / "day14" / "gpu.json", {"what": "ResNet50", "rows": rows, "partial": False}, prov)
    text = recorded_techniques_report(["pinned"], root=tmp_path)
    assert "NVIDIA H200" in text and "950" in text and "900" not in text and "partial" not in text
    write_recorded(tmp_path / "day14" / "gpu.json", {"what": "ResNet50", "rows": rows, "partial": True}, prov)
    assert "a partial recording" in recorded_techniques_report(["pinned"], root=tmp_path)


def test_speed_word_is_one_band_rule_with_inclusive_edges_and_custom_words():
    from utils.full_scale_section import SAME_SPEED, speed_word

    assert speed_word(1.0) == "no clear change"
    assert speed_word(1 + SAME_SPEED) == speed_word(1 - SAME_SPEED) == "no clear change"   # the edges count as noise
    assert speed_word(1.06) == "faster" and speed_word(0.94) == "slower"
    assert speed_word(1.2, 0.25) == "no clear change" and speed_word(1.3, 0.25) == "faster"  # a wider band of noise
    assert speed_word(0.5, faster="helps", same="same", slower="hurts") == "hurts"
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="positive ratio"):
            speed_word(bad)

"""utils.checkpoint: exact resume (bit-identical on CPU), crash safety of atomic saves, clear errors."""
from __future__ import annotations

import dataclasses
import os

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from utils import checkpoint as C
from utils.data import load_dataset
from utils.models import small_cnn


def _setup(seed: int = 0):
    torch.manual_seed(seed)
    model = small_cnn(10, width=8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.5)
    return model, optimizer, scheduler


def _run(data, steps_total: int, ckpt_dir, stop_after: int | None = None, resume: bool = False):
    """A small exact-resume loop: dropout-free model, per-step scheduler, sampler position in the checkpoint."""
    model, optimizer, scheduler = _setup()
    sampler = C.ResumableSampler(len(data), seed=3)
    batch_size = 32
    step, epoch, consumed = 0, 0, 0
    if resume:
        pos = C.restore_training_state(C.load_checkpoint(ckpt_dir / "last.pt"), model, optimizer, scheduler)
        step, epoch, consumed = pos["step"], pos["epoch"], pos["samples_in_epoch"]
    losses = []
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    while step < steps_total:
        sampler.set_epoch(epoch)
        sampler.skip(consumed)
        # The loader gets its own generator: a DataLoader iterator otherwise draws its base seed from the global RNG,
        # and the resumed run creates one more iterator than the uninterrupted run.
        loader = DataLoader(data, batch_size=batch_size, sampler=sampler, generator=torch.Generator().manual_seed(0))
        for images, targets in loader:
            noise = torch.randn_like(images) * 0.05  # uses the RNG: resume must restore it
            loss = loss_fn(model(images + noise), targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            step += 1
            consumed += len(targets)
            if stop_after is not None and step == stop_after:
                C.atomic_save(C.training_state(model, optimizer, step=step, epoch=epoch, samples_in_epoch=consumed,
                                               scheduler=scheduler), ckpt_dir / "last.pt")
                return losses, model
            if step >= steps_total:
                break
        else:
            epoch, consumed = epoch + 1, 0
    return losses, model


def test_interrupted_and_resumed_run_is_bit_identical(tmp_path):
    splits = load_dataset("digits", image_size=8, max_train_samples=200)
    data = splits.train
    full_losses, full_model = _run(data, 16, tmp_path)
    first, _ = _run(data, 16, tmp_path, stop_after=9)  # 200/32 -> 7 batches an epoch: stops mid-epoch 2
    rest, resumed_model = _run(data, 16, tmp_path, resume=True)
    assert first + rest == full_losses
    for (name, a), b in zip(full_model.state_dict().items(), resumed_model.state_dict().values()):
        assert torch.equal(a, b), name


def test_sampler_skip_continues_the_same_order():
    s = C.ResumableSampler(10, seed=1)
    s.set_epoch(2)
    full = list(s)
    s.skip(4)
    assert list(s) == full[4:] and len(s) == 6
    s.set_epoch(3)
    assert list(s) != full and len(s) == 10
    with pytest.raises(ValueError):
        s.skip(11)


def test_crash_while_writing_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    C.atomic_save({"model": {"w": torch.ones(3)}}, path)

    def crash(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 half a zip file")
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        C.atomic_save({"model": {"w": torch.zeros(3)}}, path)
    monkeypatch.undo()
    assert torch.equal(C.load_checkpoint(path)["model"]["w"], torch.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"], "the temporary file must be cleaned up"


def test_file_is_flushed_before_the_rename_and_the_folder_after_it(tmp_path, monkeypatch):
    """The file's bytes reach the disk before os.replace, and on POSIX the folder (the new name) after it."""
    import stat

    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync folder" if stat.S_ISDIR(os.fstat(fd).st_mode)
                                                               else "fsync file"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append("replace"), real_replace(a, b))[1])
    C.atomic_save({"model": {"v": torch.tensor(1)}}, tmp_path / "ckpt.pt", keep_previous=False)
    expected = ["fsync file", "replace"] + (["fsync folder"] if os.name == "posix" else [])
    assert events == expected


def test_fsync_directory_is_a_no_op_where_folders_cannot_be_opened(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "name", "nt")
    assert C.fsync_directory(tmp_path) is False


def test_os_replace_refuses_to_cross_file_systems(tmp_path, monkeypatch):
    """Why the temporary file lives next to the target: across file systems os.replace raises EXDEV (it never
    copies; shutil.move is what falls back to a copy). Simulated, since the test machine may have one file system."""
    import errno

    def cross_device(src, dst):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), str(src), None, str(dst))

    monkeypatch.setattr(os, "replace", cross_device)
    path = tmp_path / "ckpt.pt"
    with pytest.raises(OSError) as info:
        C.atomic_save({"model": {}}, path)
    assert info.value.errno == errno.EXDEV
    assert list(tmp_path.iterdir()) == [], "the temporary file is removed when the rename fails"


def test_previous_checkpoint_is_kept(tmp_path):
    path = tmp_path / "ckpt.pt"
    C.atomic_save({"model": {"v": torch.tensor(1)}}, path)
    C.atomic_save({"model": {"v": torch.tensor(2)}}, path)
    assert int(C.load_checkpoint(path)["model"]["v"]) == 2
    assert int(C.load_checkpoint(tmp_path / "ckpt.pt.prev")["model"]["v"]) == 1


def test_corrupt_checkpoint_gives_a_clear_error(tmp_path):
    path = tmp_path / "ckpt.pt"
    C.atomic_save({"model": {"v": torch.tensor(1)}}, path)
    C.atomic_save({"model": {"v": torch.tensor(2)}}, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(C.CheckpointError, match="corrupt.*prev"):
        C.load_checkpoint(path)
    with pytest.raises(C.CheckpointError, match="no checkpoint"):
        C.load_checkpoint(tmp_path / "missing.pt")
    torch.save([1, 2], tmp_path / "list.pt")
    with pytest.raises(C.CheckpointError, match="not a training checkpoint"):
        C.load_checkpoint(tmp_path / "list.pt")
    (tmp_path / "dcp").mkdir()                     # a folder (a torch.distributed.checkpoint save) is not corrupt
    with pytest.raises(C.CheckpointError, match="could not be read"):
        C.load_checkpoint(tmp_path / "dcp")


def test_mismatched_checkpoint_names_the_problem(tmp_path):
    ten, five = small_cnn(10), small_cnn(5)
    with pytest.raises(C.CheckpointError, match="another shape.*fc.weight.*number of classes"):
        C.load_model_state(five, ten.state_dict())
    with pytest.raises(C.CheckpointError, match="missing"):
        C.load_model_state(nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2)), nn.Sequential(nn.Linear(2, 2)).state_dict())


def _draw():
    import random

    import numpy as np

    return random.random(), float(np.random.rand()), float(np.random.randn()), torch.rand(2)


def _same(a, b) -> bool:
    return a[:3] == b[:3] and torch.equal(a[3], b[3])


def test_rng_state_round_trip_through_a_weights_only_file(tmp_path):
    import numpy as np

    np.random.randn()  # leave a cached Gaussian in NumPy's state: part of what must be restored
    C.atomic_save({"model": {}, "rng": C.capture_rng_state()}, tmp_path / "rng.pt")
    first = _draw()
    C.restore_rng_state(C.load_checkpoint(tmp_path / "rng.pt")["rng"])
    assert _same(first, _draw())


def test_rng_state_is_restored_from_cpu_bytes_whatever_the_map_location(tmp_path):
    C.atomic_save({"model": {}, "rng": C.capture_rng_state()}, tmp_path / "rng.pt")
    first = _draw()
    state = C.load_checkpoint(tmp_path / "rng.pt")["rng"]
    # What map_location="cuda" does on a GPU machine, simulated: the state is no longer a CPU ByteTensor, which
    # torch.set_rng_state rejects with a TypeError.
    state["torch"] = state["torch"].to(torch.int16)
    C.restore_rng_state(state)
    assert _same(first, _draw())


def test_cuda_rng_states_are_restored_as_cpu_bytes_on_the_devices_present(monkeypatch):
    restored = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda t, device="cuda": restored.append((t, device)))
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [torch.arange(16, dtype=torch.uint8)] * 2)
    state = C.capture_rng_state()
    state["cuda"] = [t.to(torch.float64) for t in state["cuda"]]  # as if map_location had moved them
    C.restore_rng_state(state)
    assert len(restored) == 1, "saved on two GPUs, restored on the one present"
    t, device = restored[0]
    assert device == 0 and t.device.type == "cpu" and t.dtype == torch.uint8
    assert torch.equal(t, torch.arange(16, dtype=torch.uint8))


SIDE_EFFECTS: list[str] = []


def _record(message: str) -> str:
    SIDE_EFFECTS.append(message)
    return message


class _Payload:
    """Unpickling this calls a function: with weights_only=False it would run (it could be any code)."""

    def __reduce__(self):
        return (_record, ("code ran while loading",))


def test_loading_refuses_pickled_code(tmp_path):
    path = tmp_path / "untrusted.pt"
    torch.save({"model": {}, "extra": _Payload()}, path)
    with pytest.raises(C.CheckpointError, match="arbitrary code"):
        C.load_checkpoint(path)
    assert SIDE_EFFECTS == []


@dataclasses.dataclass
class _Config:
    lr: float = 0.1


def test_a_trusted_class_can_be_allowed_for_one_load(tmp_path):
    path = tmp_path / "config.pt"
    torch.save({"model": {}, "extra": {"config": _Config(0.5)}}, path)
    with pytest.raises(C.CheckpointError, match="safe_globals") as refused:
        C.load_checkpoint(path)
    assert "_Config" in str(refused.value), "the error names the class to allow"
    assert C.load_checkpoint(path, safe_globals=[_Config])["extra"]["config"] == _Config(0.5)
    with pytest.raises(C.CheckpointError):
        C.load_checkpoint(path)  # allowed for that load only


def test_format_version_is_checked(tmp_path):
    model, optimizer, _ = _setup()
    state = C.training_state(model, optimizer, step=1, epoch=0, samples_in_epoch=0)
    state["format_version"] = 99
    with pytest.raises(C.CheckpointError, match="format"):
        C.restore_training_state(state, model, optimizer)


def test_the_mps_rng_state_is_saved_and_restored_where_mps_is_present(monkeypatch):
    # On a Mac, dropout on the MPS device draws from the MPS generator: a resumed run needs it back.
    restored = []
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.mps, "get_rng_state", lambda: torch.arange(8, dtype=torch.uint8))
    monkeypatch.setattr(torch.mps, "set_rng_state", lambda t: restored.append(t))
    state = C.capture_rng_state()
    assert torch.equal(state["mps"], torch.arange(8, dtype=torch.uint8))
    C.restore_rng_state(state)
    assert len(restored) == 1 and restored[0].dtype == torch.uint8 and torch.equal(restored[0], state["mps"])
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert "mps" not in C.capture_rng_state()
    C.restore_rng_state(state)   # saved on a Mac, resumed elsewhere: the MPS state is left out
    assert len(restored) == 1


def test_a_good_file_that_cannot_go_to_the_asked_device_is_not_called_corrupt(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("the failure needs a machine without CUDA")
    path = tmp_path / "ckpt.pt"
    torch.save({"model": {"w": torch.ones(2)}}, path)
    (tmp_path / "ckpt.pt.prev").write_bytes(path.read_bytes())
    for where in ("cuda", "cuda:3", "mps"):
        with pytest.raises(C.CheckpointError, match="could not be loaded onto the device map_location names") as err:
            C.load_checkpoint(path, map_location=where)
        assert "corrupt" not in str(err.value) and "map_location='cpu'" in str(err.value)
    # Saved on a GPU (its storages tagged cuda:0), loaded with map_location=None on a machine without one.
    gpu_saved = tmp_path / "gpu.pt"
    real_tag = torch.serialization.location_tag
    torch.serialization.location_tag = lambda storage: "cuda:0"
    try:
        torch.save({"model": {"w": torch.ones(2)}}, gpu_saved)
    finally:
        torch.serialization.location_tag = real_tag
    with pytest.raises(C.CheckpointError, match="could not be loaded onto the device map_location names"):
        C.load_checkpoint(gpu_saved, map_location=None)
    path.write_bytes(path.read_bytes()[:40])                                  # truncated: corrupt wherever it goes
    with pytest.raises(C.CheckpointError, match="corrupt or truncated"):
        C.load_checkpoint(path, map_location="cuda")

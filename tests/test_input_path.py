"""The full-size runs' input path: the batched device-side augmentation (utils.batch_augment), the decoded cache
(utils.decoded_cache), the two input paths and the input-bound flag (utils.input_path), on generated JPEG trees."""
from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision.models  # noqa: F401  (its first import takes seconds: paid at collection, not in a test)
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as TF

import utils.full_scale as FS
from utils.batch_augment import center_crop, crop_resize_flip, flip_draws, normalize_, random_resized_crop_boxes
from utils.datasets import write_imagenette_like
from utils.decoded_cache import cache_folder, cache_size, decoded_cache
from utils.full_scale_section import full_scale_section, input_limits, technique_verdicts
from utils.input_path import MAX_WAIT_SHARE, MIN_HEADROOM, CachedInput, InputPath, input_bound

TOY = dict(model="small_cnn", image_size=32, batch_size=8, num_workers=0, allow_cpu=True, progress=False)


@pytest.fixture(scope="module")
def nette(tmp_path_factory):
    root = tmp_path_factory.mktemp("nette")
    write_imagenette_like(root, num_classes=3, train_per_class=8, val_per_class=2)
    return root


@pytest.fixture(scope="module")
def toy_data(nette):
    return FS.full_scale_data("imagenette", 32, root=nette)


# ------------------------------------------------------------------------------------------ batched augmentation
def test_identity_box_returns_the_image_and_a_flip_mirrors_it():
    x = torch.randint(0, 256, (2, 3, 12, 12), dtype=torch.uint8)
    full = torch.tensor([[0.0, 0, 12, 12]] * 2)
    out = crop_resize_flip(x, full, None, 12)
    torch.testing.assert_close(out, x.float() / 255)
    flipped = crop_resize_flip(x, full, torch.tensor([True, False]), 12)
    torch.testing.assert_close(flipped[0], x[0].flip(-1).float() / 255)
    torch.testing.assert_close(flipped[1], x[1].float() / 255)
    nhwc = crop_resize_flip(x.permute(0, 2, 3, 1).contiguous(), full, None, 12)   # the cache's layout
    torch.testing.assert_close(nhwc, out)


def test_each_box_is_resized_like_torchvision_resized_crop():
    torch.manual_seed(0)
    x = torch.rand(3, 3, 40, 40)                      # float images are resampled as they are (no / 255)
    boxes = torch.tensor([[3.0, 5, 20, 30], [0, 0, 40, 40], [10, 2, 25, 17]])
    out = crop_resize_flip(x, boxes, None, 16)
    for k, (top, left, h, w) in enumerate(boxes.int().tolist()):
        ref = TF.resized_crop(x[k], top, left, h, w, [16, 16], antialias=False)
        # grid_sample reads the pixel beside a box where interpolate clamps to the box's own edge: compare inside
        torch.testing.assert_close(out[k, :, 1:-1, 1:-1], ref[:, 1:-1, 1:-1], atol=1e-4, rtol=0)


def test_center_crop_and_normalisation():
    x = torch.randint(0, 256, (2, 9, 9, 3), dtype=torch.uint8)
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    out = center_crop(x, 5, mean=mean, std=std)
    ref = (x.permute(0, 3, 1, 2)[:, :, 2:7, 2:7].float() / 255 - torch.tensor(mean).view(1, 3, 1, 1)) \
        / torch.tensor(std).view(1, 3, 1, 1)
    torch.testing.assert_close(out, ref)
    assert normalize_(torch.full((1, 3, 1, 1), 255.0), None, None).eq(1).all()
    with pytest.raises(ValueError, match="at least 10 px"):
        center_crop(x, 10)


def test_center_crop_never_normalises_the_callers_batch_in_place():
    # A float batch that already has the crop's size: the crop is the whole tensor, and must still be a new one.
    batch = torch.rand(2, 3, 5, 5)
    before = batch.clone()
    out = center_crop(batch, 5, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    assert torch.equal(batch, before), "center_crop changed its input"
    torch.testing.assert_close(out, (before - 0.5) / 0.25)


def test_crop_boxes_follow_random_resized_crop_one_draw_per_image():
    g = torch.Generator().manual_seed(0)
    boxes = random_resized_crop_boxes(4000, 256, 256, scale=(0.35, 1.0), generator=g)
    top, left, h, w = boxes.unbind(1)
    assert (top >= 0).all() and (left >= 0).all() and (top + h <= 256).all() and (left + w <= 256).all()
    area, aspect = h * w / 256**2, w / h
    assert area.min() >= 0.33 and area.max() <= 1.0
    assert aspect.min() >= 0.74 and aspect.max() <= 1.35
    assert len({tuple(b) for b in boxes[:64].tolist()}) == 64, "one set of parameters per image, not per batch"
    torch.manual_seed(0)          # torchvision's own draws (one image at a time) have the same distribution
    rrc = v2.RandomResizedCrop(224, scale=(0.35, 1.0))
    ref = [rrc.make_params([torch.empty(3, 256, 256)]) for _ in range(4000)]
    ref_area = np.mean([p["height"] * p["width"] / 256**2 for p in ref])
    assert abs(area.mean().item() - ref_area) < 0.02
    again = random_resized_crop_boxes(4000, 256, 256, generator=torch.Generator().manual_seed(0))
    assert torch.equal(boxes, again), "seeded: the same crops again"
    wide = random_resized_crop_boxes(50, 10, 100, generator=g)    # no try fits: the central fallback
    assert (wide[:, 2] == 10).all() and (wide[:, 3] <= 14).all()
    flips = flip_draws(4000, torch.Generator().manual_seed(1))
    assert 0.45 < flips.float().mean() < 0.55


def test_a_batch_of_one_image_gets_different_crops():
    image = torch.randint(0, 256, (1, 32, 32, 3), dtype=torch.uint8).expand(8, -1, -1, -1)
    g = torch.Generator().manual_seed(3)
    out = crop_resize_flip(image, random_resized_crop_boxes(8, 32, 32, generator=g), flip_draws(8, g), 24)
    assert len({out[k].sum().item() for k in range(8)}) == 8


# ------------------------------------------------------------------------------------------ the decoded cache
def test_cache_holds_the_central_square_and_is_rebuilt_when_a_source_changes(nette, tmp_path):
    from PIL import Image
    from torchvision.datasets import Imagenette

    base = Imagenette(str(nette), split="train", size="160px")
    idx = [0, 5, 9]
    labels = [base._samples[i][1] for i in idx]
    first = decoded_cache(base, idx, labels, 64, name="t", cache_dir=tmp_path, progress=False)
    assert first.build_s is not None and first.images.shape == (3, 64, 64, 3) and first.images.dtype == torch.uint8
    assert first.labels.tolist() == labels
    with Image.open(base._samples[5][0]) as im:          # Resize(64) + CenterCrop(64), as Pillow does it
        ref = np.asarray(v2.CenterCrop(64)(v2.Resize(64, antialias=True)(im.convert("RGB"))))
    assert np.abs(first.images[1].numpy().astype(int) - ref.astype(int)).mean() < 3
    again = decoded_cache(base, idx, labels, 64, name="t", cache_dir=tmp_path, progress=False)
    assert again.build_s is None and torch.equal(again.images, first.images), "reused, not rebuilt"
    path = Path(base._samples[9][0])
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))   # the source changed
    rebuilt = decoded_cache(base, idx, labels, 64, name="t", cache_dir=tmp_path, progress=False)
    assert rebuilt.build_s is not None and rebuilt.path != first.path
    assert not first.path.exists(), "the stale cache of the same split and size is deleted"
    assert len(list(tmp_path.glob("*.manifest.json"))) == 1


def test_cache_folder_is_beside_the_data_and_never_in_the_repo(tmp_path, monkeypatch, repo_root):
    monkeypatch.delenv("BOOTCAMP_CACHE", raising=False)

    class Data:
        root = str(tmp_path)

    assert cache_folder(None, Data()) == tmp_path / "decoded"
    Data.root = str(repo_root / "data")
    assert cache_folder(None, Data()) == Path("~/.cache/gpu-bootcamp/decoded").expanduser()
    monkeypatch.setenv("BOOTCAMP_CACHE", str(tmp_path / "c"))
    assert cache_folder(None, Data()) == tmp_path / "c"
    assert cache_size(224) == 256


# ------------------------------------------------------------------------------------------ the two input paths
@pytest.mark.slow
def test_an_imagefolder_cache_goes_beside_its_class_tree_so_the_tree_still_loads(tmp_path, monkeypatch):
    # Every folder in an ImageFolder's root is a class: a decoded/ inside it would be an empty class that
    # torchvision refuses at the next load.
    from PIL import Image

    from utils import load_dataset
    from utils.data import dataset_labels
    monkeypatch.delenv("BOOTCAMP_CACHE", raising=False)
    tree = tmp_path / "pets"
    for name in ("cat", "dog"):
        (tree / name).mkdir(parents=True)
        for i in range(4):
            Image.fromarray(np.full((12, 14, 3), 40 * i, np.uint8)).save(tree / name / f"{i}.png")
    data = load_dataset("imagefolder", root=tree, image_size=8, val_fraction=0.25, test_fraction=0.25)
    cache = decoded_cache(data.train.base, data.train.indices, dataset_labels(data.train), 9, name="pets-train",
                          progress=False)
    assert cache.path.parent == tmp_path / "decoded", cache.path
    assert load_dataset("imagefolder", root=tree, image_size=8, val_fraction=0.25, test_fraction=0.25).classes \
        == ["cat", "dog"]


def test_both_input_paths_train_and_the_dataloader_one_stays_selectable(toy_data):
    cached = FS.full_scale_run("baseline", steps=4, data=toy_data, **TOY)
    plain = FS.full_scale_run("baseline", steps=4, data=toy_data, input_path="dataloader", **TOY)
    assert (cached.input_path, plain.input_path) == ("cached", "dataloader")
    assert cached.loader_images_per_s > 0 and plain.loader_images_per_s > 0
    assert "decoded cache" in cached.extras["input"] and "DataLoader" in plain.extras["input"]
    assert cached.eval_images == plain.eval_images == 6
    with pytest.raises(ValueError, match="input_path must be one of cached, dataloader"):
        FS.full_scale_run("baseline", steps=1, data=toy_data, input_path="dali", **TOY)


def test_cached_batches_are_augmented_per_image_and_evaluated_on_the_centre(toy_data):
    path = CachedInput(toy_data, 8, pin_memory=False, seed=0, progress=False)
    try:
        x, y = path.to_device(next(path.train_batches()), torch.device("cpu"), channels_last=True)
        assert x.shape == (8, 3, 32, 32) and x.is_contiguous(memory_format=torch.channels_last)
        assert x.dtype == torch.float32 and y.dtype == torch.int64
        assert abs(x.mean().item()) < 1.5, "normalised with the training split's statistics"
        xe, ye = next(iter(path.eval_batches(4)))
        ref = toy_data.test[0][0]                         # the DataLoader path's evaluation transform
        assert xe.shape == (4, 3, 32, 32) and ye.tolist()[:1] == [toy_data.test[0][1]]
        assert (xe[0] - ref).abs().mean() < 0.25
    finally:
        path.close()


# ------------------------------------------------------------------------------------------ the input-bound flag
def test_input_bound_thresholds():
    assert not input_bound(1000.0, 700.0, 0.0)
    assert input_bound(MIN_HEADROOM * 700 - 1, 700.0, 0.0)
    assert input_bound(None, 700.0, MAX_WAIT_SHARE + 0.01)
    assert not input_bound(None, 700.0, 0.0)


class FakeInput(InputPath):
    """Random batches already decoded, each costing ``delay_s`` on the fake clock: a slow or a fast loader."""

    name = "fake"

    def __init__(self, clock: dict, delay_s: float, batch: int = 8):
        self.clock, self.delay_s, self.batch = clock, delay_s, batch

    def train_batches(self):
        g = torch.Generator().manual_seed(0)
        while True:
            self.clock["now"] += self.delay_s
            yield torch.randn(self.batch, 3, 32, 32, generator=g), torch.randint(0, 3, (self.batch,), generator=g)

    def to_device(self, batch, device, *, non_blocking=False, channels_last=False):
        return batch

    def eval_batches(self, batch_size):
        return iter([])


@pytest.fixture
def clock(monkeypatch):
    """A fake clock for the run and its input probe: each training step takes 30 ms of it, each batch what its
    loader says; no real waiting, so that a loaded machine's scheduling cannot move the shares."""
    import utils.input_path as IP

    now = {"now": 0.0}

    class FakeTime:
        @staticmethod
        def perf_counter() -> float:
            return now["now"]

    real = FS.train_step

    def step(*args, **kwargs):
        now["now"] += 0.03
        return real(*args, **kwargs)

    monkeypatch.setattr(FS, "time", FakeTime)
    monkeypatch.setattr(IP, "time", FakeTime)
    monkeypatch.setattr(FS, "train_step", step)
    return now


def test_a_slow_loader_is_flagged_and_a_fast_one_is_not(toy_data, clock):
    kw = dict(steps=5, data=toy_data, eval_batches=0, input_probe_batches=2, **TOY)
    slow = FS.full_scale_run("baseline", input_path=FakeInput(clock, 0.04), **kw)
    # a loader in the main process cannot run ahead of the steps: the time it costs shows as waiting for data
    assert slow.input_bound and slow.data_wait_share == pytest.approx(0.04 / 0.07)
    assert slow.loader_images_per_s == pytest.approx(8 / 0.04)
    assert "INPUT-BOUND" in slow.summary() and "waited for data 57% of its time" in slow.input_limit()
    fast = FS.full_scale_run("baseline", input_path=FakeInput(clock, 0.001), **kw)
    assert not fast.input_bound and fast.data_wait_share == pytest.approx(0.001 / 0.031)
    assert fast.loader_images_per_s == pytest.approx(8 / 0.001) and "INPUT-BOUND" not in fast.summary()
    barely = FS.full_scale_run("baseline", input_path=FakeInput(clock, 0.0025), **kw)
    assert barely.input_bound, "waiting 8 % of the time: over the 5 % a technique verdict allows"


@pytest.mark.slow
def test_the_section_gives_a_verdict_only_when_no_run_was_input_bound(toy_data, clock, tmp_path, capsys):
    kw = dict(day="day99", data=toy_data, device="cpu", allow_cpu=True, results_root=str(tmp_path), steps=6,
              input_probe_batches=4, eval_batches=0, model="small_cnn", image_size=32, batch_size=8, num_workers=0,
              progress=False)
    fast = full_scale_section(["baseline", "channels_last"], input_path=FakeInput(clock, 0.0), **kw)
    out = capsys.readouterr().out
    assert technique_verdicts(fast) and "channels_last: x1.00 the images/s of baseline (no clear change" in out
    assert "Not input-bound" in out and not input_limits(fast)
    slow = full_scale_section(["baseline", "channels_last"], input_path=FakeInput(clock, 0.04), **kw)
    out = capsys.readouterr().out
    assert all(r.input_bound for r in slow) and technique_verdicts(slow) == []
    assert "No verdict on the techniques: the input path limited 2 of these 2 runs" in out
    assert "the images/s of baseline" not in out and "* input-bound" in out
    assert math.isfinite(slow[0].loader_images_per_s)


class _InMemoryImages(torch.utils.data.Dataset):
    """CIFAR-10's layout: ``data`` (N, H, W, 3) uint8 in memory, ``targets``, PIL images out."""

    def __init__(self, n: int, side: int, seed: int):
        rng = np.random.default_rng(seed)          # smooth images: resizing them two ways gives near the same pixels
        ramp = np.add.outer(np.arange(side), np.arange(side)) / (2 * side - 2)            # 0 .. 1 across the image
        colour = rng.uniform(0.2, 1.0, (n, 1, 1, 3))
        self.data = (255 * ramp[None, :, :, None] * colour).astype(np.uint8)
        self.targets = [k % 2 for k in range(n)]

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, k):
        from PIL import Image
        return Image.fromarray(self.data[k]), self.targets[k]


@pytest.mark.parametrize("image_size, cached", [(16, 8), (6, 7)])
def test_in_memory_data_is_evaluated_whole_and_resized_as_the_dataloader_path_does(tmp_path, image_size, cached):
    # CIFAR-10's layout (8 px here): cached at most at its own size. Above it, a centre crop would need larger
    # images (it raised); below it, a crop of the 8/7 cache would differ from the DataLoader path, which resizes the
    # whole image (Resize((size, size))) for in-memory data.
    from utils.datasets import _build_splits
    data = _build_splits("cifar-like", _InMemoryImages(24, 8, 0), _InMemoryImages(6, 8, 1), ["a", "b"], image_size,
                         val_fraction=0.25, test_fraction=0.0, seed=0, augment=True, max_train_samples=None,
                         resize_from_larger=False)
    path = CachedInput(data, 4, pin_memory=False, seed=0, cache_dir=str(tmp_path), progress=False)
    try:
        assert path.size == cached
        xe, ye = next(iter(path.eval_batches(6)))
        assert xe.shape == (6, 3, image_size, image_size) and ye.tolist() == [k % 2 for k in range(6)]
        ref = torch.stack([data.test[k][0] for k in range(6)])      # the DataLoader path's evaluation transform
        assert (xe - ref).abs().mean() < 0.1
    finally:
        path.close()

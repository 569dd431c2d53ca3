"""utils.data: the offline digits default, stratified splits, and the torchvision loaders on tiny files made here."""
from __future__ import annotations

import pickle
import urllib.error
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from utils import data as D
from utils import datasets as DS

CIFAR_FILES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]


# --------------------------------------------------------------------------------------------------- splits
def test_stratified_split_is_disjoint_complete_and_balanced():
    labels = np.repeat(np.arange(5), 40)
    tr, va, te = D.stratified_split(labels, 0.2, 0.2, seed=1)
    assert set(tr).isdisjoint(va) and set(tr).isdisjoint(te) and set(va).isdisjoint(te)
    assert sorted(np.concatenate([tr, va, te]).tolist()) == list(range(200))
    assert len(va) == 40 and len(te) == 40
    for part in (tr, va, te):
        counts = np.bincount(labels[part], minlength=5)
        assert counts.max() - counts.min() <= 1, counts


def test_stratified_split_is_seeded():
    labels = np.repeat(np.arange(3), 30)
    a = D.stratified_split(labels, 0.2, 0.2, seed=4)
    b = D.stratified_split(labels, 0.2, 0.2, seed=4)
    c = D.stratified_split(labels, 0.2, 0.2, seed=5)
    assert all((x == y).all() for x, y in zip(a, b))
    assert not all((x == y).all() for x, y in zip(a, c))


@pytest.mark.parametrize("val,test", [(-0.1, 0.1), (0.5, 0.5), (1.0, 0.0)])
def test_stratified_split_rejects_bad_fractions(val, test):
    with pytest.raises(ValueError, match="fraction"):
        D.stratified_split(np.repeat(np.arange(2), 10), val, test)


def test_stratified_split_too_small_for_the_classes_says_what_to_do():
    with pytest.raises(ValueError, match="as many samples as there are classes.*larger fractions, or a fraction of 0"):
        D.stratified_split(np.repeat(np.arange(5), 4), 0.1, 0.0)


# --------------------------------------------------------------------------------------------------- digits
def test_digits_shapes_splits_and_normalisation():
    s = D.load_dataset("digits", image_size=16)
    assert s.sizes() == {"train": 1257, "val": 270, "test": 270}
    assert s.num_classes == 10 and s.image_size == 16
    x, y = s.train.tensors
    assert x.shape == (1257, 3, 16, 16) and x.dtype == torch.float32 and y.dtype == torch.long
    # normalised with the *training* statistics: the training split has mean 0 and std 1 per channel
    assert x.mean(dim=(0, 2, 3)).abs().max() < 1e-4
    assert (x.std(dim=(0, 2, 3)) - 1).abs().max() < 1e-3
    # real data, not noise: every class present in every split
    for part in (s.train, s.val, s.test):
        assert set(part.tensors[1].tolist()) == set(range(10))
    assert "digits" in s.summary()


def test_digits_splits_share_no_image():
    s = D.load_dataset("digits", image_size=8)
    keys = [{tuple(img.flatten().tolist()) for img in part.tensors[0]} for part in (s.train, s.val, s.test)]
    # a few digits scans are exact duplicates in the raw data; the split must not add more overlap than that
    assert len(keys[0] & keys[1]) + len(keys[0] & keys[2]) + len(keys[1] & keys[2]) <= 3


def test_digits_max_train_samples_keeps_classes():
    s = D.load_dataset("digits", image_size=8, max_train_samples=200)
    assert len(s.train) == 200
    assert np.bincount(s.train.tensors[1].numpy(), minlength=10).min() >= 15


def test_loaders_batch_and_shuffle_reproducibly():
    s = D.load_dataset("digits", image_size=8)
    tr1, va, _ = s.loaders(64, seed=3)
    tr2, _, _ = s.loaders(64, seed=3)
    x1, y1 = next(iter(tr1))
    x2, y2 = next(iter(tr2))
    assert x1.shape == (64, 3, 8, 8) and torch.equal(y1, y2)
    assert sum(len(b[1]) for b in va) == 270


@pytest.mark.parametrize("bad", [0, -4, 2.5, None, "32", True])
def test_bad_batch_size_says_what_is_allowed(bad):
    s = D.load_dataset("digits", image_size=8)
    with pytest.raises(ValueError, match="positive integer"):
        s.loaders(bad)


def test_bad_image_size_and_unknown_dataset():
    with pytest.raises(ValueError, match="image_size"):
        D.load_dataset("digits", image_size=4)
    with pytest.raises(ValueError, match="digits"):
        D.load_dataset("mnist-fashion")


def test_synthetic_batch_is_for_speed_only():
    x, y = D.synthetic_batch(4, 16, num_classes=3)
    assert x.shape == (4, 3, 16, 16) and int(y.max()) < 3
    with pytest.raises(ValueError):
        D.synthetic_batch(0, 16)


# --------------------------------------------------------------------------------------------------- CIFAR-10
def write_tiny_cifar(root: Path, per_batch: int = 20) -> Path:
    """The CIFAR-10 python layout with ``per_batch`` real-format images per file."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in CIFAR_FILES:
        labels = [i % 10 for i in range(per_batch)]
        data = rng.integers(0, 256, size=(per_batch, 3 * 32 * 32), dtype=np.uint8)
        with open(folder / name, "wb") as f:
            pickle.dump({"data": data, "labels": labels}, f)
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump({"label_names": ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                                     "ship", "truck"]}, f)
    return root


def test_cifar10_loads_tiny_files(tmp_path):
    root = write_tiny_cifar(tmp_path)
    s = D.load_dataset("cifar10", root=root, image_size=32, verify_checksums=False)
    assert s.sizes() == {"train": 90, "val": 10, "test": 20}
    assert s.classes[0] == "airplane"
    x, y = s.train[0]
    assert x.shape == (3, 32, 32) and x.dtype == torch.float32 and isinstance(y, int)
    xb, yb = next(iter(s.loaders(8)[0]))
    assert xb.shape == (8, 3, 32, 32)


def test_cifar10_with_checksums_rejects_tiny_files_clearly(tmp_path):
    root = write_tiny_cifar(tmp_path)
    with pytest.raises(D.DatasetUnavailableError, match="digits"):
        D.load_dataset("cifar10", root=root)


def test_cifar10_missing_names_the_offline_alternative(tmp_path):
    with pytest.raises(D.DatasetUnavailableError, match="download=True.*digits"):
        D.load_dataset("cifar10", root=tmp_path)


def test_no_network_gives_a_clear_error_not_a_urllib_trace(tmp_path, monkeypatch):
    import torchvision.datasets.cifar as cifar_mod

    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(cifar_mod, "download_and_extract_archive", offline)
    with pytest.raises(D.DatasetUnavailableError, match="no network.*digits"):
        D.load_dataset("cifar10", root=tmp_path, download=True)


# --------------------------------------------------------------------------------------------------- folders
def write_image_tree(root: Path, classes=("cat", "dog", "fish"), per_class: int = 10, ext: str = ".png") -> Path:
    rng = np.random.default_rng(0)
    for c in classes:
        (root / c).mkdir(parents=True)
        for i in range(per_class):
            arr = rng.integers(0, 256, size=(20, 24, 3), dtype=np.uint8)
            Image.fromarray(arr).save(root / c / f"{i}{ext}")
    return root


def test_imagefolder_splits_three_ways(tmp_path):
    root = write_image_tree(tmp_path / "pets")
    s = D.load_dataset("imagefolder", root=root, image_size=16)
    assert s.classes == ["cat", "dog", "fish"]
    assert sum(s.sizes().values()) == 30 and s.sizes()["test"] >= 3
    x, y = s.val[0]
    assert x.shape == (3, 16, 16)
    assert abs(float(torch.stack([s.train[i][0] for i in range(len(s.train))]).mean())) < 0.2


def test_imagefolder_uses_given_train_and_test(tmp_path):
    write_image_tree(tmp_path / "ds" / "train", per_class=6)
    write_image_tree(tmp_path / "ds" / "test", per_class=2)
    s = D.load_dataset("imagefolder", root=tmp_path / "ds", image_size=16, augment=True)
    assert s.sizes()["test"] == 6
    assert s.sizes()["train"] + s.sizes()["val"] == 18


def test_imagefolder_missing_root(tmp_path):
    with pytest.raises(D.DatasetUnavailableError, match="digits"):
        D.load_dataset("imagefolder", root=tmp_path / "nope")
    with pytest.raises(ValueError, match="nothing to download"):
        D.load_dataset("imagefolder", root=tmp_path, download=True)
    with pytest.raises(ValueError, match="root="):
        D.load_dataset("imagefolder")


# --------------------------------------------------------------------------------------------------- Imagenette
def test_imagenette_loads_an_imagenette_shaped_folder(tmp_path):
    folder = DS.write_imagenette_like(tmp_path, num_classes=2, train_per_class=8, val_per_class=2)
    assert folder == tmp_path / "imagenette2-160"
    s = D.load_dataset("imagenette", root=tmp_path, image_size=16)
    assert s.classes == ["tench", "English springer"]
    assert s.sizes()["test"] == 4 and s.sizes()["train"] + s.sizes()["val"] == 16
    assert s.test[0][0].shape == (3, 16, 16)
    assert DS.verify_imagenette(folder) == {"train": 16, "val": 4}


def test_imagenette_interrupted_extraction_is_caught_and_says_how_to_repair(tmp_path):
    folder = DS.write_imagenette_like(tmp_path, num_classes=2, train_per_class=10, val_per_class=2)
    next((folder / "val").rglob("*.JPEG")).unlink()
    with pytest.raises(D.DatasetUnavailableError, match=r"incomplete: 1 of the 4 val images.*download=True"):
        D.load_dataset("imagenette", root=tmp_path, image_size=16)
    s = D.load_dataset("imagenette", root=tmp_path, image_size=16, verify=False)   # the learner's choice
    assert s.sizes()["test"] == 3
    (folder / DS.IMAGENETTE_LISTING).unlink()
    with pytest.raises(D.DatasetUnavailableError, match="noisy_imagenette.csv"):
        D.load_dataset("imagenette", root=tmp_path, image_size=16)


def test_imagenette_missing_names_the_folder_and_what_to_do(tmp_path):
    with pytest.raises(D.DatasetUnavailableError, match=r"imagenette2-160.*download=True.*BOOTCAMP_DATA.*digits"):
        D.load_dataset("imagenette", root=tmp_path)
    with pytest.raises(D.DatasetUnavailableError, match="imagenette2-320"):
        D.load_dataset("imagenette", root=tmp_path, size="320px")
    with pytest.raises(ValueError, match="320px"):
        D.load_dataset("imagenette", root=tmp_path, size="224px")


def _serve_archive(monkeypatch, payload: bytes) -> list[str]:
    """Replace torchvision's network fetch with one that writes ``payload``; returns the URLs it was asked for."""
    import torchvision.datasets.utils as tv_utils

    fetched: list[str] = []

    def fake_urlretrieve(url, filename, chunk_size=0):
        fetched.append(url)
        Path(filename).write_bytes(payload)

    monkeypatch.setattr(tv_utils, "_get_redirect_url", lambda url, max_hops=3: url)
    monkeypatch.setattr(tv_utils, "_urlretrieve", fake_urlretrieve)
    return fetched


def test_imagenette_download_is_md5_checked_extracted_and_reused(tmp_path, monkeypatch):
    import hashlib
    import tarfile

    from torchvision.datasets import Imagenette

    DS.write_imagenette_like(tmp_path / "src", num_classes=2, train_per_class=10, val_per_class=2)
    with tarfile.open(tmp_path / "archive.tgz", "w:gz") as tar:
        tar.add(tmp_path / "src" / "imagenette2-160", arcname="imagenette2-160")
    archive = (tmp_path / "archive.tgz").read_bytes()
    url, _ = Imagenette._ARCHIVES["160px"]
    monkeypatch.setitem(Imagenette._ARCHIVES, "160px", (url, hashlib.md5(archive).hexdigest()))
    fetched = _serve_archive(monkeypatch, archive)
    root = tmp_path / "data"
    with pytest.raises(D.DatasetUnavailableError, match="download=True"):
        D.load_dataset("imagenette", root=root, image_size=16)            # no download unless allowed
    assert fetched == []
    s = D.load_dataset("imagenette", root=root, image_size=16, download=True)
    assert fetched == [url] and s.sizes()["test"] == 4 and (root / "imagenette2-160.tgz").is_file()
    D.load_dataset("imagenette", root=root, image_size=16, download=True)  # reused: nothing fetched again
    assert fetched == [url]


def test_imagenette_download_that_fails_its_md5_check_says_so(tmp_path, monkeypatch):
    _serve_archive(monkeypatch, b"<html>captive portal</html>")
    with pytest.raises(D.DatasetUnavailableError, match="md5 check.*Delete the archive"):
        D.load_dataset("imagenette", root=tmp_path, download=True)


def test_imagenette_offline_download_names_the_offline_alternative(tmp_path, monkeypatch):
    import torchvision.datasets.imagenette as imagenette_mod

    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(imagenette_mod, "download_and_extract_archive", offline)
    with pytest.raises(D.DatasetUnavailableError, match="no network.*digits"):
        D.load_dataset("imagenette", root=tmp_path, download=True)


# --------------------------------------------------------------------------------------------------- data folder
def test_data_root_order_argument_then_environment_then_cache(tmp_path, monkeypatch):
    monkeypatch.delenv(DS.DATA_ENV_VAR, raising=False)
    assert DS.data_root() == Path.home() / ".cache" / "gpu-bootcamp" / "data"
    monkeypatch.setenv(DS.DATA_ENV_VAR, str(tmp_path / "env"))
    assert DS.data_root() == tmp_path / "env"
    assert DS.data_root(tmp_path / "given") == tmp_path / "given"
    assert DS.data_root("~/x") == Path.home() / "x"


def test_load_dataset_finds_files_under_the_environment_folder(tmp_path, monkeypatch):
    DS.write_imagenette_like(tmp_path, num_classes=2, train_per_class=10, val_per_class=1)
    monkeypatch.setenv(DS.DATA_ENV_VAR, str(tmp_path))
    assert D.load_dataset("imagenette", image_size=16).sizes()["test"] == 2


def test_compute_mean_std_matches_numpy():
    imgs = torch.rand(12, 3, 5, 5)
    ds = torch.utils.data.TensorDataset(imgs, torch.zeros(12, dtype=torch.long))
    mean, std = D.compute_mean_std(ds)
    ref = imgs.permute(1, 0, 2, 3).reshape(3, -1)
    assert np.allclose(mean, ref.mean(1).numpy(), atol=1e-6)
    assert np.allclose(std, ref.std(1, unbiased=False).numpy(), atol=1e-5)


def test_compute_mean_std_counts_the_images_channels_and_refuses_no_samples():
    gray = torch.rand(6, 1, 4, 4)
    mean, std = D.compute_mean_std(torch.utils.data.TensorDataset(gray, torch.zeros(6, dtype=torch.long)))
    assert len(mean) == len(std) == 1 and abs(mean[0] - gray.mean().item()) < 1e-6
    with pytest.raises(ValueError, match="max_samples"):
        D.compute_mean_std(torch.utils.data.TensorDataset(gray, torch.zeros(6, dtype=torch.long)), max_samples=0)

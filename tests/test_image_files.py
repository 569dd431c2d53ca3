"""Unit tests of utils.image_files: PNG files written from the digits, decoded back, loaded in a DataLoader."""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader

from utils.image_files import ImageFiles, decode_png, write_digit_pngs


def test_write_and_decode(tmp_path):
    samples = write_digit_pngs(tmp_path, n=12, image_size=16, seed=1)
    assert len(samples) == 12
    assert all(p.exists() and p.parent.name == str(y) for p, y in samples)
    img = decode_png(samples[0][0])
    assert img.dtype == torch.uint8 and img.shape == (3, 16, 16)
    assert img.max() > 100 and img.min() < 50, "a real digit: dark background, bright strokes"
    again = write_digit_pngs(tmp_path, n=12, image_size=16, seed=1)
    assert [p for p, _ in again] == [p for p, _ in samples], "same seed, same files (reused)"


def test_dataset_and_loader(tmp_path):
    samples = write_digit_pngs(tmp_path, n=10, image_size=8, seed=0)
    ds = ImageFiles(samples, transform=lambda t: t.float() / 255)
    x, y = ds[3]
    assert x.dtype == torch.float32 and 0 <= x.min() and x.max() <= 1
    assert y == samples[3][1]
    xb, yb = next(iter(DataLoader(ds, batch_size=4)))
    assert xb.shape == (4, 3, 8, 8) and yb.tolist() == [s[1] for s in samples[:4]]

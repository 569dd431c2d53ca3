"""utils.estimates: FLOPs counted on the meta device, and the expected-time sentence built from them."""
from __future__ import annotations

import re

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from utils.estimates import GPU_CLASSES, estimate_training_time, expected_time_line, training_flops_per_image
from utils.models import build_model


def test_meta_device_count_equals_a_real_training_step():
    torch.manual_seed(0)
    net = build_model("small_cnn", 10, image_size=32)
    x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.cross_entropy(net(x), y).backward()
    assert training_flops_per_image("small_cnn", 32) == pytest.approx(counter.get_total_flops() / 4)


@pytest.mark.slow   # ResNet50 counted three times: about 6 s
def test_resnet50_step_is_about_three_forwards_and_scales_with_pixels():
    step = training_flops_per_image("resnet50", 224)
    with torch.device("meta"):
        net = build_model("resnet50", 10, image_size=224)
        x = torch.randn(1, 3, 224, 224)
    with FlopCounterMode(display=False) as counter:
        net(x)
    forward = counter.get_total_flops()
    assert 7.5e9 < forward < 8.5e9                      # 4.1 G multiply-adds
    assert 2.8 < step / forward < 3.0                   # backward ~2x forward, minus the input gradient of conv1
    # a quarter of the pixels, a little more than a quarter of the FLOPs (padding: layer4 is 4x4, not 3.5x3.5)
    assert training_flops_per_image("resnet50", 112) == pytest.approx(step / 4, rel=0.06)


@pytest.mark.slow   # counts ResNet50 at 224 px: about 3 s
def test_stated_assumptions_match_the_images_per_second_they_imply():
    for cls in GPU_CLASSES.values():
        stated = [float(n.replace(",", "")) for n in re.findall(r"about ([\d,]+) and ([\d,]+) images/s",
                                                                   cls.basis)[0]]
        implied = [estimate_training_time(1000, precision=p)[list(GPU_CLASSES).index(cls.name)].images_per_s
                   for p in ("fp32", "amp")]
        assert implied == pytest.approx(stated, rel=0.1), cls.name


def test_expected_time_line_is_labelled_as_an_estimate():
    small = dict(model="small_cnn", image_size=32)
    line = expected_time_line(9469, "one Imagenette epoch", **small)
    rows = estimate_training_time(9469, **small)
    assert "estimate from FLOPs" in line and "not a recording" in line
    assert "a T4-class GPU" in line and "an A100-class GPU" in line and "9,469 images" in line
    assert rows[0].seconds > rows[1].seconds                      # the T4 class is the slower one
    assert estimate_training_time(9469, precision="fp32", **small)[0].seconds > rows[0].seconds
    with pytest.raises(ValueError, match="positive integer"):
        estimate_training_time(0)
    with pytest.raises(ValueError, match="amp"):
        estimate_training_time(10, precision="bf16")

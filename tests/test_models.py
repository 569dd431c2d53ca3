"""utils.models: ResNet50 as torchvision builds it, the small-image stem, the small CNN, clear errors."""
from __future__ import annotations

import pytest
import torch

from utils import models as M


def test_resnet50_has_25_6_million_parameters_and_50_weighted_layers():
    model = M.resnet50(num_classes=1000)
    assert M.count_parameters(model) == 25_557_032
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    projections = [c for c in convs if c.kernel_size == (1, 1) and c.stride != (1, 1) or c.out_channels == 256
                   and c.in_channels == 64 and c.kernel_size == (1, 1)]
    # 49 convs + 1 fc = 50 on the main path once the 4 projection shortcuts are set aside
    assert len(convs) == 53 and len(linears) == 1
    assert len(convs) - 4 + len(linears) == 50
    assert projections  # the 1x1 projection shortcuts exist


def test_small_stem_keeps_resolution_for_small_images():
    model = M.resnet50(num_classes=10, small_input=True, image_size=32).eval()
    assert model.conv1.stride == (1, 1) and isinstance(model.maxpool, torch.nn.Identity)
    with torch.no_grad():
        assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_too_small_images_are_refused_with_advice():
    with pytest.raises(ValueError, match="small_input=True"):
        M.resnet50(10, image_size=16)
    with pytest.raises(ValueError, match="at least 8"):
        M.resnet50(10, small_input=True, image_size=4)
    # Below the small stem's 8 px, small_input=True alone would not help: the advice names both ways out.
    with pytest.raises(ValueError, match="at least 8 px with small_input=True .at least 32 px without"):
        M.resnet50(10, image_size=4)
    with pytest.raises(ValueError, match="too small"):
        M.small_cnn(10, image_size=2)


def test_build_model_chooses_the_stem_from_the_image_size():
    assert isinstance(M.build_model("resnet18", 10, image_size=32).maxpool, torch.nn.Identity)
    assert isinstance(M.build_model("resnet18", 10, image_size=224).maxpool, torch.nn.MaxPool2d)
    with pytest.raises(ValueError, match="small_cnn"):
        M.build_model("vgg16")
    with pytest.raises(ValueError, match="num_classes"):
        M.build_model("small_cnn", num_classes=1)


def test_small_cnn_is_small_and_works_at_several_sizes():
    model = M.small_cnn(10).eval()
    assert 50_000 < M.count_parameters(model) < 150_000
    with torch.no_grad():
        for size in (8, 16, 32):
            assert model(torch.randn(3, 3, size, size)).shape == (3, 10)


def test_count_trainable_only():
    model = M.small_cnn(10)
    for p in model.features.parameters():
        p.requires_grad_(False)
    assert M.count_parameters(model, trainable_only=True) == model.fc.weight.numel() + model.fc.bias.numel()


def test_a_numpy_integer_is_a_class_count():
    import numpy as np
    assert M.build_model("small_cnn", np.int64(10)).fc.out_features == 10

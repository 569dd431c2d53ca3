"""Models: torchvision's ResNet50 (optionally with a small-image stem) and a small fast CNN for quick demos."""
from __future__ import annotations

import numbers

import torch
from torch import nn

MODELS = ("resnet50", "resnet18", "small_cnn")

# Total downsampling before global pooling. The standard stem (7x7/2 conv + 3x3/2 max-pool) and stages 2-4 divide
# the side by 32; the small-image stem (3x3/1 conv, no pool) by 8.
STANDARD_STRIDE = 32
SMALL_STEM_STRIDE = 8


def _check_classes(num_classes: int) -> int:
    if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral) or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
    return int(num_classes)


def check_resnet_input_size(image_size: int, small_input: bool, model: str = "resnet50") -> None:
    """Raise a ValueError when ``image_size`` pixels per side is too small for the ResNet's downsampling."""
    need = SMALL_STEM_STRIDE if small_input else STANDARD_STRIDE
    if image_size < need:
        if small_input:
            advice = f"use images of at least {SMALL_STEM_STRIDE} px"
        elif image_size >= SMALL_STEM_STRIDE:
            advice = "use small_input=True (a 3x3 stride-1 stem without max-pool, for 8-64 px images)"
        else:
            advice = (f"use images of at least {SMALL_STEM_STRIDE} px with small_input=True "
                      f"(at least {STANDARD_STRIDE} px without it)")
        raise ValueError(f"image_size={image_size} px is too small for {model}: it downsamples by {need}, so even "
                         f"at {need} px its last stage sees a 1x1 map, and a smaller image shrinks the earlier stages' "
                         f"maps too (the padded stride-2 layers round up), leaving little spatial layout. "
                         f"{advice[0].upper() + advice[1:]}.")


def _small_stem(model: nn.Module) -> nn.Module:
    """CIFAR-style stem: the network then downsamples by 8, not 32, so 8-64 px images keep a spatial map in the last
    stages (32 px: 4x4 at the last stage instead of 1x1)."""
    model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


def resnet50(num_classes: int = 10, small_input: bool = False, image_size: int | None = None) -> nn.Module:
    """torchvision's ResNet50 (50 weighted layers, 25.6 M parameters with 1000 classes), randomly initialised.

    ``small_input=True`` swaps the stem for a 3x3 stride-1 conv without max-pool, for 8-64 px images.
    Give ``image_size`` (pixels per side) to have it checked against the model's downsampling.
    """
    from torchvision.models import resnet50 as tv_resnet50

    model = tv_resnet50(weights=None, num_classes=_check_classes(num_classes))
    if image_size is not None:
        check_resnet_input_size(image_size, small_input, "resnet50")
    return _small_stem(model) if small_input else model


def resnet18(num_classes: int = 10, small_input: bool = False, image_size: int | None = None) -> nn.Module:
    """torchvision's ResNet18 (11.7 M parameters with 1000 classes, 11.2 M with 10), the same stem options as :func:`resnet50`."""
    from torchvision.models import resnet18 as tv_resnet18

    model = tv_resnet18(weights=None, num_classes=_check_classes(num_classes))
    if image_size is not None:
        check_resnet_input_size(image_size, small_input, "resnet18")
    return _small_stem(model) if small_input else model


class SmallCNN(nn.Module):
    """Three conv-BN-ReLU blocks, global average pooling and a linear head (~0.1 M parameters at width 32).

    Fast enough to train on a laptop CPU in seconds; used wherever a demo needs a model, not ResNet50's cost.
    """

    def __init__(self, num_classes: int = 10, width: int = 32, in_channels: int = 3):
        super().__init__()
        _check_classes(num_classes)
        if width < 1:
            raise ValueError(f"width must be >= 1, got {width}")

        def block(cin: int, cout: int, pool: bool) -> nn.Sequential:
            layers: list[nn.Module] = [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                                       nn.ReLU(inplace=True)]
            if pool:
                layers.append(nn.MaxPool2d(2))
            return nn.Sequential(*layers)

        self.features = nn.Sequential(block(in_channels, width, True), block(width, 2 * width, True),
                                      block(2 * width, 4 * width, False))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4 * width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


def small_cnn(num_classes: int = 10, width: int = 32, image_size: int | None = None) -> nn.Module:
    """A :class:`SmallCNN`. It pools twice, so images need at least 4 px per side."""
    if image_size is not None and image_size < 4:
        raise ValueError(f"image_size={image_size} px is too small for small_cnn (it pools twice): use >= 4 px.")
    return SmallCNN(num_classes=num_classes, width=width)


def build_model(name: str, num_classes: int = 10, image_size: int | None = None,
                small_input: bool | None = None) -> nn.Module:
    """Build one of :data:`MODELS` by name. For the ResNets, ``small_input=None`` picks the small-image stem
    automatically when ``image_size`` is below 96 px."""
    key = str(name).strip().lower()
    if key in ("resnet50", "resnet18"):
        if small_input is None:
            small_input = image_size is not None and image_size < 96
        factory = resnet50 if key == "resnet50" else resnet18
        return factory(num_classes, small_input=small_input, image_size=image_size)
    if key in ("small_cnn", "smallcnn"):
        return small_cnn(num_classes, image_size=image_size)
    raise ValueError(f"Unknown model {name!r}. Choose one of {', '.join(MODELS)}.")


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of parameters (elements, not bytes)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)

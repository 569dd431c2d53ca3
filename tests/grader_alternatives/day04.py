"""Day 04: correct answers to Bottleneck, conv2d_flops and flops_by_layer, written other ways."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    # --- Exercise 1: Bottleneck
    Alternative(cell="day04_bottleneck",
                why="F.relu instead of a ReLU module, nn.Identity (no parameters) as the shortcut of identity blocks, "
                    "the addition in place",
                source='''class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_channels: int, planes: int, stride: int = 1):
        super().__init__()
        width, out = planes, planes * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        needs_projection = stride > 1 or in_channels != out
        self.downsample = (nn.Sequential(nn.Conv2d(in_channels, out, 1, stride, bias=False), nn.BatchNorm2d(out))
                           if needs_projection else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F

        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        y += self.downsample(x)
        return F.relu(y)
'''),
    Alternative(cell="day04_bottleneck",
                why="one ReLU module per use, the shortcut built from an OrderedDict named like a Sequential, "
                    "the shortcut computed after the main path",
                source='''class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_channels: int, planes: int, stride: int = 1):
        super().__init__()
        from collections import OrderedDict

        expanded = self.expansion * planes
        self.conv1, self.bn1 = nn.Conv2d(in_channels, planes, (1, 1), bias=False), nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, (3, 3), stride=(stride, stride), padding=(1, 1), bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3, self.bn3 = nn.Conv2d(planes, expanded, (1, 1), bias=False), nn.BatchNorm2d(expanded)
        self.relu1, self.relu2, self.relu_out = nn.ReLU(), nn.ReLU(), nn.ReLU()
        if (in_channels, stride) != (expanded, 1):
            self.downsample = nn.Sequential(OrderedDict([
                ("0", nn.Conv2d(in_channels, expanded, (1, 1), stride=(stride, stride), bias=False)),
                ("1", nn.BatchNorm2d(expanded))]))
        else:
            self.downsample = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        main = self.relu1(self.bn1(self.conv1(x)))
        main = self.relu2(self.bn2(self.conv2(main)))
        main = self.bn3(self.conv3(main))
        shortcut = self.downsample(x) if self.downsample is not None else x
        return self.relu_out(main + shortcut)
'''),
    # --- Exercise 2: conv2d_flops
    Alternative(cell="day04_conv2d_flops",
                why="math.floor of the textbook formula per dimension, math.prod for the MACs",
                source='''def conv2d_flops(conv: nn.Conv2d, input_hw: tuple[int, int]) -> int:
    import math

    out_hw = [math.floor((n + 2 * p - d * (k - 1) - 1) / s + 1)
              for n, k, s, p, d in zip(input_hw, conv.kernel_size, conv.stride, conv.padding, conv.dilation)]
    weights_per_output = conv.in_channels // conv.groups * math.prod(conv.kernel_size)
    return 2 * weights_per_output * conv.out_channels * math.prod(out_hw)
'''),
    Alternative(cell="day04_conv2d_flops",
                why="the weight tensor's element count (out x in/groups x kh x kw) times the output pixels",
                source='''def conv2d_flops(conv: nn.Conv2d, input_hw: tuple[int, int]) -> int:
    (h, w), (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (input_hw, conv.kernel_size, conv.stride, conv.padding,
                                                       conv.dilation)
    h_out = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    w_out = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    return 2 * conv.weight.numel() * h_out * w_out
'''),
    # --- Exercise 3: flops_by_layer
    Alternative(cell="day04_flops_by_layer",
                why="torch.no_grad as a decorator on the counting pass, and the counter's keys walked, each module's "
                    "inclusive count minus its direct children's",
                source='''def layer_type(name: str, module: nn.Module) -> str:
    # The default grouping: the module's class name.
    return type(module).__name__


@torch.no_grad()
def _count(model: nn.Module, x: torch.Tensor) -> dict:
    with FlopCounterMode(display=False) as counter:
        model(x)
    return counter.get_flop_counts()


def flops_by_layer(model: nn.Module, x: torch.Tensor, key=layer_type) -> dict[str, int]:
    counts = _count(model, x)
    root = type(model).__name__
    modules = dict(model.named_modules())
    inclusive = {path: sum(ops.values()) for path, ops in counts.items() if path != "Global"}
    result: dict[str, int] = {}
    for path, flops in inclusive.items():
        name = path[len(root) + 1:] if path != root else ""
        if name not in modules:
            continue
        prefix = path + "."
        own = flops - sum(v for p, v in inclusive.items()
                          if p.startswith(prefix) and "." not in p[len(prefix):])
        if own:
            group = key(name, modules[name])
            result[group] = result.get(group, 0) + own
    return result
'''),
    Alternative(cell="day04_flops_by_layer",
                why="the children's FLOPs subtracted through named_children of each module, a Counter, int() casts",
                source='''def layer_type(name: str, module: nn.Module) -> str:
    # The default grouping: the module's class name.
    return type(module).__name__


def flops_by_layer(model: nn.Module, x: torch.Tensor, key=layer_type) -> dict[str, int]:
    from collections import Counter

    counter = FlopCounterMode(display=False)
    with torch.no_grad():
        with counter:
            model(x)
    counts = counter.get_flop_counts()
    total_of = lambda path: int(sum(counts.get(path, {}).values()))
    groups = Counter()
    for name, module in model.named_modules():
        path = type(model).__name__ + ("." + name if name else "")
        own = total_of(path) - sum(total_of(f"{path}.{child}") for child, _ in module.named_children())
        if own > 0:
            groups[key(name, module)] += own
    return {group: int(flops) for group, flops in groups.items()}
'''),
]

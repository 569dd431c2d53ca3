"""Day 16: correct answers to the no-decay groups, clipping by the total norm and LARS's scaling, written as other
learners would."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    Alternative(
        cell="day16_param_groups_no_decay",
        why="two list comprehensions over model.parameters() (the same order as named_parameters), p.dim()",
        source='''def param_groups_no_decay(model: nn.Module, weight_decay: float) -> list[dict]:
    trainable = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in trainable if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in trainable if p.dim() < 2], "weight_decay": 0.0},
    ]
'''),
    Alternative(
        cell="day16_param_groups_no_decay",
        why="decides by the layer that owns the parameter (normalisation layers and biases), walking named_modules "
            "with recurse=False, which visits parameters in named_parameters' order",
        source='''NORM_LAYERS = (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm)

def param_groups_no_decay(model: nn.Module, weight_decay: float) -> list[dict]:
    decay, no_decay, seen = [], [], set()
    for _, module in model.named_modules():
        for name, param in module.named_parameters(recurse=False):
            if not param.requires_grad or id(param) in seen:
                continue
            seen.add(id(param))
            if isinstance(module, NORM_LAYERS) or name == "bias":
                no_decay.append(param)
            else:
                decay.append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
'''),
    Alternative(
        cell="day16_clip_by_total_norm",
        why="torch._foreach_norm for the per-tensor norms (float32) and torch._foreach_mul_ for the scaling",
        source='''def clip_by_total_norm(grads: list[torch.Tensor], max_norm: float) -> float:
    grads = list(grads)
    per_tensor = torch._foreach_norm(grads)
    total = torch.linalg.vector_norm(torch.stack(per_tensor)).item()
    if total > max_norm:
        torch._foreach_mul_(grads, max_norm / (total + 1e-6))
    return total
'''),
    Alternative(
        cell="day16_clip_by_total_norm",
        why="one flat vector of every gradient (torch.cat), its norm read once; sums of squares in float64",
        source='''def clip_by_total_norm(grads: list[torch.Tensor], max_norm: float) -> float:
    flat = torch.cat([g.detach().reshape(-1).double() for g in grads])
    total = flat.pow(2).sum().sqrt().item()
    coef = max_norm / (total + 1e-6)
    if coef < 1.0:
        for g in grads:
            g.mul_(coef)
    return total
'''),
    Alternative(
        cell="day16_lars_scale",
        why="torch.where with a Python scalar for the fallback, the update written as copy_ of a new tensor, "
            "p.dim() and p.grad.data",
        source='''def lars_scale_(params, *, eta: float = 1e-3, weight_decay: float = 0.0) -> None:
    for p in params:
        if p.grad is None or p.dim() < 2:
            continue
        w, g = p.data, p.grad.data
        w_norm, g_norm = w.norm(), g.norm()
        both = (w_norm > 0) & (g_norm > 0)
        trust = torch.where(both, eta * w_norm / (g_norm + weight_decay * w_norm), 1.0)
        g.copy_(trust * (g + weight_decay * w))
'''),
    Alternative(
        cell="day16_lars_scale",
        why="collects the layers first, computes the norms with torch._foreach_norm in one call, guards the "
            "division with clamp_min and masks the fallback arithmetically",
        source='''def lars_scale_(params, *, eta: float = 1e-3, weight_decay: float = 0.0) -> None:
    layers = [p for p in params if p.grad is not None and p.ndim >= 2]
    if not layers:
        return
    w_norms = torch._foreach_norm([p.detach() for p in layers])
    g_norms = torch._foreach_norm([p.grad for p in layers])
    for p, w_norm, g_norm in zip(layers, w_norms, g_norms):
        usable = ((w_norm > 0) & (g_norm > 0)).to(w_norm.dtype)
        ratio = eta * w_norm / (g_norm + weight_decay * w_norm).clamp_min(1e-30)
        trust = usable * ratio + (1 - usable)
        p.grad.add_(p.detach(), alpha=weight_decay)
        p.grad.mul_(trust)
'''),
    Alternative(cell="day16_clip_by_total_norm",
                why="torch.nn.utils.get_total_norm for the norm, clip_grad_norm_'s own clamped factor on the device "
                    "(1.0 below the threshold leaves the values unchanged), _foreach_mul_, one .item()",
                source='''def clip_by_total_norm(grads: list[torch.Tensor], max_norm: float) -> float:
    total = torch.nn.utils.get_total_norm(grads, norm_type=2.0)
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    torch._foreach_mul_(grads, coef.to(grads[0].dtype))
    return total.item()
'''),
    Alternative(cell="day16_param_groups_no_decay",
                why="filter() over model.parameters() and a dict keyed by 'has 2 or more dimensions', groups built with dict()",
                source='''def param_groups_no_decay(model: nn.Module, weight_decay: float) -> list[dict]:
    groups = {True: [], False: []}
    for p in filter(lambda q: q.requires_grad, model.parameters()):
        groups[p.ndim >= 2].append(p)
    return [dict(params=groups[True], weight_decay=weight_decay), dict(params=groups[False], weight_decay=0.0)]
'''),
]

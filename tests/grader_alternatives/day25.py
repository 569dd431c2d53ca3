"""Day 25 · Fast-path knobs: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    # Exercise 1 · sgd_step
    Alternative(cell="day25_sgd_step",
                why="torch.add/torch.sub with alpha= instead of operators, buffer copied with torch.clone",
                source='''def sgd_step(param, grad, momentum_buffer, lr, momentum=0.0, weight_decay=0.0):
    if grad is None:
        return param, momentum_buffer
    d = torch.add(grad, param, alpha=weight_decay)
    buf = momentum_buffer
    if momentum != 0:
        if momentum_buffer is None:
            buf = torch.clone(d).detach()
        else:
            buf = torch.add(torch.mul(momentum_buffer, momentum), d)
        d = buf
    return torch.sub(param, d, alpha=lr), buf
'''),
    Alternative(cell="day25_sgd_step",
                why="an early return for plain SGD, weight decay added only when it is non-zero, in float64",
                source='''def sgd_step(param, grad, momentum_buffer, lr, momentum=0.0, weight_decay=0.0):
    if grad is None:
        return param, momentum_buffer
    p64, d = param.double(), grad.double()
    if weight_decay:
        d = d + weight_decay * p64
    if momentum == 0:
        return (p64 - lr * d).to(param.dtype), momentum_buffer
    if momentum_buffer is None:
        new_buf = d.to(param.dtype).clone()
    else:
        new_buf = (momentum * momentum_buffer.double() + d).to(param.dtype)
    return (p64 - lr * new_buf.double()).to(param.dtype), new_buf
'''),
    # Exercise 2 · foreach_sgd_step
    Alternative(cell="day25_foreach_sgd_step",
                why="copies the gradients with _foreach_mul(gs, 1.0), scales the update with _foreach_mul and "
                    "subtracts it",
                source='''def foreach_sgd_step(params, grads, momentum_buffers, lr, momentum=0.0, weight_decay=0.0):
    bufs = list(momentum_buffers)
    keep = [i for i in range(len(params)) if grads[i] is not None]
    if not keep:
        return bufs
    ps, gs = [params[i] for i in keep], [grads[i] for i in keep]
    with torch.no_grad():
        d = torch._foreach_mul(gs, 1.0)                       # fresh tensors, never the gradients
        if weight_decay != 0:
            torch._foreach_add_(d, ps, alpha=weight_decay)
        if momentum != 0:
            missing = [i for i in keep if bufs[i] is None]
            if missing:
                for i, d_k in zip(keep, d):
                    bufs[i] = d_k.clone() if bufs[i] is None else bufs[i].mul_(momentum).add_(d_k)
            else:
                b = [bufs[i] for i in keep]
                torch._foreach_mul_(b, momentum)
                torch._foreach_add_(b, d)
            d = [bufs[i] for i in keep]
        torch._foreach_sub_(ps, torch._foreach_mul(d, lr))
    return bufs
'''),
    Alternative(cell="day25_foreach_sgd_step",
                why="updates the existing buffers with one foreach call even when some are still missing, and "
                    "creates the missing ones apart",
                source='''def foreach_sgd_step(params, grads, momentum_buffers, lr, momentum=0.0, weight_decay=0.0):
    out = list(momentum_buffers)
    live = [k for k, g in enumerate(grads) if g is not None]
    if not live:
        return out
    with torch.no_grad():
        upd = torch._foreach_add([grads[k] for k in live], [params[k] for k in live], alpha=weight_decay)
        if momentum != 0:
            old = [(k, u) for k, u in zip(live, upd) if out[k] is not None]
            if old:
                old_bufs = [out[k] for k, _ in old]
                torch._foreach_mul_(old_bufs, momentum)
                torch._foreach_add_(old_bufs, [u for _, u in old])
            for k, u in zip(live, upd):
                if out[k] is None:
                    out[k] = u.clone()
            upd = [out[k] for k in live]
        torch._foreach_add_([params[k] for k in live], upd, alpha=-lr)
    return out
'''),
    # Exercise 3 · channels_last_model
    Alternative(cell="day25_channels_last_model",
                why="converts every layer's 4-D output with forward hooks, and the batch with one pre-hook on the "
                    "model, instead of pre-hooks on the convolutions",
                source='''def channels_last_model(model):
    model.to(memory_format=torch.channels_last)

    def nhwc(t):
        if isinstance(t, torch.Tensor) and t.dim() == 4:
            return t.contiguous(memory_format=torch.channels_last)
        return t

    model.register_forward_pre_hook(lambda mod, args: (nhwc(args[0]),) + tuple(args[1:]))
    for m in model.modules():
        m.register_forward_hook(lambda mod, args, out: nhwc(out))
    return model
'''),
    Alternative(cell="day25_channels_last_model",
                why="replaces every Conv2d by a small wrapper module whose forward converts its input first",
                source='''class _NHWCInput(nn.Module):
    def __init__(self, conv):
        super().__init__()
        self.conv = conv

    def forward(self, x):
        if not x.is_contiguous(memory_format=torch.channels_last):
            x = x.to(memory_format=torch.channels_last)
        return self.conv(x)


def channels_last_model(model):
    def wrap(parent):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Conv2d):
                setattr(parent, name, _NHWCInput(child))
            else:
                wrap(child)
    wrap(model)
    return model.to(memory_format=torch.channels_last)
'''),
]

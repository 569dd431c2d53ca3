"""Day 15: correct answers to the LR range test and to moving a recipe, written as other learners would."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    Alternative(
        cell="day15_lr_range_test",
        why="precomputes the sweep with numpy.geomspace, snapshots the model with cloned tensors, restarts the "
            "loader from a generator of its own, reads the loss with float()",
        source='''import copy

import numpy as np


def lr_range_test(model: nn.Module, optimizer: torch.optim.Optimizer, loader, *, start_lr: float, end_lr: float,
                  steps: int, beta: float = 0.9, diverge: float = 4.0,
                  loss_fn=nn.functional.cross_entropy) -> tuple[list[float], list[float], float]:
    saved_model = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    saved_optimizer = copy.deepcopy(optimizer.state_dict())
    mode = model.training
    where = next(model.parameters()).device

    def endless():
        while True:
            yield from loader

    schedule = np.geomspace(start_lr, end_lr, steps) if steps > 1 else np.array([start_lr])
    lrs, smoothed = [], []
    running, lowest = 0.0, float("inf")
    model.train()
    for i, (x, y) in zip(range(steps), endless()):
        lr = float(schedule[i])
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad()
        loss = loss_fn(model(x.to(where)), y.to(where))
        value = float(loss)
        if not math.isfinite(value):
            break
        loss.backward()
        optimizer.step()
        running = beta * running + (1 - beta) * value
        point = running / (1 - beta ** (i + 1))
        lrs.append(lr)
        smoothed.append(point)
        if point > diverge * lowest:
            break
        lowest = min(lowest, point)
    model.load_state_dict(saved_model)
    optimizer.load_state_dict(saved_optimizer)
    model.train(mode)
    if not smoothed:                       # the first loss was not finite
        return [], [], math.nan
    best = min(range(len(smoothed)), key=smoothed.__getitem__)
    return lrs, smoothed, lrs[best] / 10
'''),
    Alternative(
        cell="day15_lr_range_test",
        why="a while loop over an iterator it restarts, the sweep in log space (math.exp of a linear ramp), the "
            "bias correction kept as a running power of beta, the whole model deep-copied and loaded back",
        source='''import copy


def lr_range_test(model: nn.Module, optimizer: torch.optim.Optimizer, loader, *, start_lr: float, end_lr: float,
                  steps: int, beta: float = 0.9, diverge: float = 4.0,
                  loss_fn=nn.functional.cross_entropy) -> tuple[list[float], list[float], float]:
    backup = copy.deepcopy(model)
    opt_backup = copy.deepcopy(optimizer.state_dict())
    was_training = model.training
    device = next(model.parameters()).device
    log_start, log_end = math.log(start_lr), math.log(end_lr)
    lrs, losses = [], []
    avg, beta_power, best = 0.0, 1.0, math.inf
    it = iter(loader)
    model.train()
    i = 0
    while i < steps:
        try:
            x, y = next(it)
        except StopIteration:
            it = iter(loader)
            continue
        lr = math.exp(log_start + (log_end - log_start) * i / max(steps - 1, 1))
        for group in optimizer.param_groups:
            group["lr"] = lr
        out = model(x.to(device))
        loss = loss_fn(out, y.to(device))
        if not torch.isfinite(loss):
            break
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        avg = beta * avg + (1 - beta) * loss.item()
        beta_power *= beta
        losses.append(avg / (1 - beta_power))
        lrs.append(lr)
        best = min(best, losses[-1])
        i += 1
        if losses[-1] > diverge * best:
            break
    model.load_state_dict(backup.state_dict())
    optimizer.load_state_dict(opt_backup)
    model.train(was_training)
    if len(losses) == 0:
        return lrs, losses, float("nan")
    k = losses.index(min(losses))
    return lrs, losses, lrs[k] / 10
'''),
    Alternative(
        cell="day15_scale_and_schedule",
        why="writes the warm-up + cosine factor itself, scales with a comprehension, computes the ceiling with "
            "floor division of negatives",
        source='''from utils.schedules import warmup_cosine

def scale_and_schedule(optimizer: torch.optim.Optimizer, *, base_batch: int, per_device_batch: int,
                       accumulation_steps: int, world_size: int, batches_per_epoch: int, epochs: int,
                       warmup_epochs: int, floor: float = 0.01) -> torch.optim.lr_scheduler.LambdaLR:
    scale = per_device_batch * accumulation_steps * world_size / base_batch
    for group in optimizer.param_groups:
        group["lr"] = group["lr"] * scale
    per_epoch = -(-batches_per_epoch // accumulation_steps)
    warm, total = warmup_epochs * per_epoch, epochs * per_epoch

    def factor(t: int) -> float:
        if t < warm:
            return (t + 1) / warm
        progress = min(t - warm, total - warm) / max(total - warm, 1)
        return floor + (1 - floor) * (1 + math.cos(math.pi * progress)) / 2

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
'''),
    Alternative(
        cell="day15_scale_and_schedule",
        why="one lambda per parameter group (LambdaLR accepts a list), the optimizer steps per epoch counted with "
            "range()",
        source='''from utils.schedules import warmup_cosine

def scale_and_schedule(optimizer: torch.optim.Optimizer, *, base_batch: int, per_device_batch: int,
                       accumulation_steps: int, world_size: int, batches_per_epoch: int, epochs: int,
                       warmup_epochs: int, floor: float = 0.01) -> torch.optim.lr_scheduler.LambdaLR:
    global_batch = per_device_batch * world_size * accumulation_steps
    for group in optimizer.param_groups:
        group["lr"] *= global_batch / base_batch
    optimizer_steps = len(range(0, batches_per_epoch, accumulation_steps))
    schedule = warmup_cosine(warmup_epochs * optimizer_steps, epochs * optimizer_steps, floor=floor)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, [schedule] * len(optimizer.param_groups))
'''),
    Alternative(cell="day15_scale_and_schedule",
                why="group.update(lr=...) for the scaling, optimizer steps per epoch as len(range(0, n, k)), the "
                    "course's warmup_cosine wrapped in a lambda",
                source='''from utils.schedules import warmup_cosine

def scale_and_schedule(optimizer: torch.optim.Optimizer, *, base_batch: int, per_device_batch: int,
                       accumulation_steps: int, world_size: int, batches_per_epoch: int, epochs: int,
                       warmup_epochs: int, floor: float = 0.01) -> torch.optim.lr_scheduler.LambdaLR:
    scale = per_device_batch * accumulation_steps * world_size / base_batch
    for group in optimizer.param_groups:
        group.update(lr=group["lr"] * scale)
    updates = len(range(0, batches_per_epoch, accumulation_steps))
    shape = warmup_cosine(warmup_epochs * updates, epochs * updates, floor)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=lambda step: shape(step))
'''),
]

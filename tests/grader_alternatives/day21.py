"""Day 21: the plan, the schedule, the micro-batch reader and the DDP worker, written other ways."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    # Exercise 1: plan_training.
    Alternative(cell="day21_plan_training", why="integer floor division for the memory bound, itertools.count "
                "for the accumulation search, the scaling rule as a ratio", source='''import itertools

def plan_training(*, nodes: int, gpus_per_node: int, gpu_mem_bytes: int, target_global_batch: int, num_params: int,
                  act_bytes_per_sample: int, base_lr: float, base_batch: int, dataset_size: int, warmup_epochs: int,
                  bytes_per_param: int = 16, mem_fraction: float = 0.9) -> dict:
    world = nodes * gpus_per_node
    room = mem_fraction * gpu_mem_bytes - bytes_per_param * num_params
    max_micro = int(room // act_bytes_per_sample)
    if max_micro < 1:
        raise ValueError("no room for a single sample: shard the training state")
    accum = None
    for k in itertools.count(1):
        if world * k > target_global_batch:
            break
        if target_global_batch % (world * k) == 0 and target_global_batch // (world * k) <= max_micro:
            accum = k
            break
    if accum is None:
        raise ValueError("the target global batch cannot be split evenly")
    micro = target_global_batch // (world * accum)
    global_batch = world * accum * micro
    steps = dataset_size // global_batch
    return dict(world_size=world, max_micro_batch=max_micro, accum_steps=accum, micro_batch=micro,
                global_batch=global_batch, lr=base_lr * (global_batch / base_batch), steps_per_epoch=steps,
                warmup_steps=steps * warmup_epochs)
'''),
    Alternative(cell="day21_plan_training", why="searches the largest micro-batch that divides the target "
                "(the fewest accumulation steps) from the top down", source='''def plan_training(*, nodes: int, gpus_per_node: int, gpu_mem_bytes: int, target_global_batch: int, num_params: int,
                  act_bytes_per_sample: int, base_lr: float, base_batch: int, dataset_size: int, warmup_epochs: int,
                  bytes_per_param: int = 16, mem_fraction: float = 0.9) -> dict:
    gpus = nodes * gpus_per_node
    max_micro = math.floor((mem_fraction * gpu_mem_bytes - bytes_per_param * num_params) / act_bytes_per_sample)
    if max_micro < 1:
        raise ValueError("the model does not fit")
    for micro in range(min(max_micro, target_global_batch // gpus), 0, -1):
        if target_global_batch % (gpus * micro) == 0:
            break
    else:
        raise ValueError("no micro-batch reaches the global batch exactly")
    accum = target_global_batch // (gpus * micro)
    per_epoch = dataset_size // target_global_batch
    return {"world_size": gpus, "max_micro_batch": max_micro, "accum_steps": accum, "micro_batch": micro,
            "global_batch": target_global_batch, "lr": base_lr * target_global_batch / base_batch,
            "steps_per_epoch": per_epoch, "warmup_steps": warmup_epochs * per_epoch}
'''),
    # Exercise 2: lr_factor.
    Alternative(cell="day21_lr_factor", why="the ramp as an interpolation, the cosine's progress clamped to [0, 1]",
                source='''def lr_factor(step: int, *, warmup_steps: int, total_steps: int, scale: float) -> float:
    if warmup_steps > 0 and step < warmup_steps:
        t = step / warmup_steps
        return float((1.0 / scale) * (1.0 - t) + t)
    span = max(1, total_steps - warmup_steps)
    progress = min(1.0, max(0.0, (step - warmup_steps) / span))
    return float(0.5 * (1.0 + math.cos(math.pi * progress)))
'''),
    Alternative(cell="day21_lr_factor", why="numpy's interp for the warm-up, the decay written with cos squared",
                source='''import numpy as np

def lr_factor(step: int, *, warmup_steps: int, total_steps: int, scale: float) -> float:
    if step >= total_steps:
        return 0.0
    if step < warmup_steps:
        return float(np.interp(step, [0, warmup_steps], [1 / scale, 1.0]))
    phase = (step - warmup_steps) / (total_steps - warmup_steps)
    return float(math.cos(math.pi * phase / 2) ** 2)           # = (1 + cos(pi * phase)) / 2
'''),
    # Exercise 3: micro_batch.
    Alternative(cell="day21_micro_batch", why="the global batch viewed as rows of micro samples, read one index at "
                "a time and stacked", source='''def micro_batch(step: int, rank: int, world_size: int, k: int, micro: int = MICRO_BATCH,
                dataset: torch.utils.data.Dataset = train_set) -> tuple[torch.Tensor, torch.Tensor]:
    order = global_batch_indices(step)
    rows = order[: len(order) // micro * micro].view(-1, micro)
    samples = [dataset[int(i)] for i in rows[k * world_size + rank]]
    return torch.stack([x for x, _ in samples]), torch.stack([y for _, y in samples])
'''),
    Alternative(cell="day21_micro_batch", why="a Subset of the dataset and a DataLoader that reads it in one batch",
                source='''from torch.utils.data import DataLoader, Subset

def micro_batch(step: int, rank: int, world_size: int, k: int, micro: int = MICRO_BATCH,
                dataset: torch.utils.data.Dataset = train_set) -> tuple[torch.Tensor, torch.Tensor]:
    start = (k * world_size + rank) * micro
    mine = global_batch_indices(step)[start:start + micro].tolist()
    images, labels = next(iter(DataLoader(Subset(dataset, mine), batch_size=micro, shuffle=False)))
    return images, labels
'''),
    # Exercise 4: ddp_accum_worker.
    Alternative(cell="day21_ddp_accum_worker", why="an ExitStack for no_sync, Python-float loss sums all-reduced "
                "as one tensor, a lambda around schedule", source='''import torch.distributed as dist

def ddp_accum_worker(rank: int, world_size: int, steps: int) -> tuple[torch.Tensor, list[float]]:
    device = worker_device()
    net = make_model().to(device)
    model = DDP(net, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda=lambda s: schedule(s))
    losses = []
    for step in range(steps):
        running = 0.0
        for k in range(ACCUM_STEPS):
            x, y = (t.to(device) for t in micro_batch(step, rank, world_size, k))
            with contextlib.ExitStack() as stack:
                if k != ACCUM_STEPS - 1:
                    stack.enter_context(model.no_sync())
                loss = nn.functional.cross_entropy(model(x), y)
                (loss / ACCUM_STEPS).backward()
            running += loss.item()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        mean = torch.tensor([running / ACCUM_STEPS], device=device)
        dist.all_reduce(mean, op=dist.ReduceOp.SUM)
        losses.append(mean.item() / world_size)
    return flat(net).cpu(), losses
'''),
    Alternative(cell="day21_ddp_accum_worker", why="the micro-batches split into no_sync ones and the last, losses "
                "kept as tensors and stacked", source='''import torch.distributed as dist

def ddp_accum_worker(rank: int, world_size: int, steps: int) -> tuple[torch.Tensor, list[float]]:
    device = worker_device()
    model = DDP(make_model().to(device), device_ids=None if device.type != "cuda" else [device.index])
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    history = []
    for step in range(steps):
        parts = [micro_batch(step, rank, world_size, k) for k in range(ACCUM_STEPS)]
        step_losses = []
        with model.no_sync():
            for x, y in parts[:-1]:
                loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
                (loss / ACCUM_STEPS).backward()
                step_losses.append(loss.detach())
        x, y = parts[-1]
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        (loss / ACCUM_STEPS).backward()
        step_losses.append(loss.detach())
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        mean = torch.stack(step_losses).mean()
        dist.all_reduce(mean)
        history.append(float(mean) / world_size)
    return flat(model.module).cpu(), history
'''),
    Alternative(
        cell='day21_ddp_accum_worker',
        why='the loss total made on the CPU and moved with .to(device)',
        find='        total = torch.zeros((), device=device)\n',
        replace='        total = torch.zeros(()).to(device)\n'),
    Alternative(
        cell='day21_ddp_accum_worker',
        why='the loss total starts as a Python 0.0 and becomes a device tensor at the first add',
        find='        total = torch.zeros((), device=device)\n',
        replace='        total = 0.0\n'),
]

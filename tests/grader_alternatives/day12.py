"""Day 12 · Gradient accumulation: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    Alternative(cell="day12_accumulate_gradients",
                why="adds float(loss), which warns on stderr because the loss requires grad",
                find="mean_loss += loss.item()", replace="mean_loss += float(loss)"),
    # Exercise 1 · accumulate_gradients
    Alternative(cell="day12_accumulate_gradients",
                why="clears .grad by hand, weights each loss by len(y) / n inside backward and averages the "
                    "returned loss from per-batch means times sizes",
                source='''def accumulate_gradients(model: nn.Module, loss_fn, micro_batches: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    for p in model.parameters():
        p.grad = None
    n_total = sum(len(y) for _, y in micro_batches)
    weighted_sum = 0.0
    for x, y in micro_batches:
        loss = loss_fn(model(x), y)
        (loss * (len(y) / n_total)).backward()
        weighted_sum += loss.item() * len(y)
    return weighted_sum / n_total
'''),
    Alternative(cell="day12_accumulate_gradients",
                why="weights as a float64 tensor of sample fractions, the returned mean accumulated in float64",
                source='''def accumulate_gradients(model, loss_fn, micro_batches):
    model.zero_grad()
    sizes = torch.tensor([y.numel() for _, y in micro_batches], dtype=torch.float64)
    weights = sizes / sizes.sum()
    mean = torch.zeros((), dtype=torch.float64)
    for (x, y), w in zip(micro_batches, weights):
        loss = loss_fn(model(x), y)
        loss.mul(float(w)).backward()
        mean += loss.detach().double() * w
    return mean.item()
'''),
    # Exercise 2 · accumulation_plan
    Alternative(cell="day12_accumulation_plan",
                why="builds the plan group by group with range(0, n, k)",
                source='''def accumulation_plan(num_batches: int, k: int) -> list[tuple[int, bool]]:
    plan = []
    for start in range(0, num_batches, k):
        size = min(k, num_batches - start)
        plan += [(size, j == size - 1) for j in range(size)]
    return plan
'''),
    Alternative(cell="day12_accumulation_plan",
                why="divmod into full groups and a rest, then one comprehension",
                source='''def accumulation_plan(num_batches, k):
    full, rest = divmod(num_batches, k)
    groups = [k] * full + ([rest] if rest else [])
    return [(size, i == size - 1) for size in groups for i in range(size)]
'''),
    # Exercise 3 · train_epoch_accumulated
    Alternative(cell="day12_train_epoch_accumulated",
                why="zeroes at the start of each group instead of after the step, computes the groups itself, and "
                    "clips the scaled gradients at max_norm x S instead of calling unscale_",
                source='''def train_epoch_accumulated(model: nn.Module, loader, optimizer: torch.optim.Optimizer, k: int,
                            amp_dtype: torch.dtype, scaler: torch.amp.GradScaler, max_norm: float = 5.0) -> int:
    dev = next(model.parameters()).device
    model.train()
    n = len(loader)
    steps = 0
    for i, (x, y) in enumerate(loader):
        start = (i // k) * k
        group = min(k, n - start)
        if i == start:
            optimizer.zero_grad(set_to_none=True)
        x, y = x.to(dev), y.to(dev)
        with torch.autocast(dev.type, dtype=amp_dtype):
            loss = nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss / group).backward()
        if i == start + group - 1:
            s = scaler.get_scale() if scaler.is_enabled() else 1.0
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm * s)
            scaler.step(optimizer)
            scaler.update()
            steps += 1
    return steps
'''),
    Alternative(cell="day12_train_epoch_accumulated",
                why="indexes the plan inside an enumerate loop, multiplies by 1/divisor, model.zero_grad() at the start "
                    "and after each step, non_blocking copies",
                source='''def train_epoch_accumulated(model, loader, optimizer, k, amp_dtype, scaler, max_norm=5.0):
    device_ = next(model.parameters()).device
    plan = accumulation_plan(len(loader), k)
    model.train()
    model.zero_grad()
    asked = 0
    for i, (x, y) in enumerate(loader):
        divisor, last_of_group = plan[i]
        x = x.to(device_, non_blocking=True)
        y = y.to(device_, non_blocking=True)
        with torch.autocast(device_type=x.device.type, dtype=amp_dtype):
            loss = nn.functional.cross_entropy(model(x), y) * (1.0 / divisor)
        scaler.scale(loss).backward()
        if not last_of_group:
            continue
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, error_if_nonfinite=False)
        scaler.step(optimizer)
        scaler.update()
        model.zero_grad()
        asked += 1
    return asked
'''),
    Alternative(cell="day12_train_epoch_accumulated",
                why="nll_loss of log_softmax inside the block: the same cross-entropy (log_softmax alone runs in bf16 "
                    "on the CPU, nll_loss in fp32)",
                find="            loss = nn.functional.cross_entropy(model(x), y) / divisor\n",
                replace="            loss = nn.functional.nll_loss(nn.functional.log_softmax(model(x), dim=1), y) / divisor\n"),
    Alternative(cell='day12_train_epoch_accumulated',
                why="saves model.training, trains in training mode and restores the caller's mode at the end; requirement 5 says 'the model trains in training mode', but the hidden test asserts _model.training after the call",
                find='    device_ = next(model.parameters()).device\n    model.train()\n    plan = accumulation_plan(len(loader), k)\n    optimizer.zero_grad(set_to_none=True)\n    steps = 0\n    for (x, y), (divisor, step_after) in zip(loader, plan):\n        x, y = x.to(device_), y.to(device_)\n        with torch.autocast(device_type=x.device.type, dtype=amp_dtype):\n            loss = nn.functional.cross_entropy(model(x), y) / divisor\n        scaler.scale(loss).backward()\n        if step_after:\n            scaler.unscale_(optimizer)\n            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n            scaler.step(optimizer)\n            scaler.update()\n            optimizer.zero_grad(set_to_none=True)\n            steps += 1\n    return steps\n', replace='    device_ = next(model.parameters()).device\n    was_training = model.training\n    model.train()\n    plan = accumulation_plan(len(loader), k)\n    optimizer.zero_grad(set_to_none=True)\n    steps = 0\n    for (x, y), (divisor, step_after) in zip(loader, plan):\n        x, y = x.to(device_), y.to(device_)\n        with torch.autocast(device_type=x.device.type, dtype=amp_dtype):\n            loss = nn.functional.cross_entropy(model(x), y) / divisor\n        scaler.scale(loss).backward()\n        if step_after:\n            scaler.unscale_(optimizer)\n            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n            scaler.step(optimizer)\n            scaler.update()\n            optimizer.zero_grad(set_to_none=True)\n            steps += 1\n    model.train(was_training)\n    return steps\n'),
]

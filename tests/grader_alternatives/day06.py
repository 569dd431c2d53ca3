"""Day 06 · The baseline training loop: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    Alternative(cell="day06_train_one_epoch",
                why="reads the loss with float(loss), which warns on stderr because the loss requires grad",
                find="total_loss += loss.item() * n", replace="total_loss += float(loss) * n"),
    # ------------------------------------------------------------------ Exercise 1 · train_one_epoch
    Alternative(
        cell="day06_train_one_epoch",
        why="zeroes after every step (PyTorch's tutorial order), plus once before the loop so that stale gradients "
            "from earlier code cannot reach the first step",
        source='''def train_one_epoch(model, loader, optimizer, loss_fn, device) -> tuple[float, float]:
    model.train()
    optimizer.zero_grad(set_to_none=True)          # whatever earlier code left in .grad
    loss_sum, n_correct, n_seen = 0.0, 0, 0
    for x, y in loader:
        x = x.to(device)
        y = y.to(device)
        logits = model(x)
        loss = loss_fn(logits, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)      # free the gradients before the next forward
        loss_sum += loss.item() * len(y)
        n_correct += int((logits.argmax(1) == y).sum())
        n_seen += len(y)
    return loss_sum / n_seen, n_correct / n_seen
'''),
    Alternative(
        cell="day06_train_one_epoch",
        why="keeps the running sums on the device in float64 and reads them once at the end (no host sync per "
            "step); zeroes with model.zero_grad() right before backward",
        source='''def train_one_epoch(model, loader, optimizer, loss_fn, device) -> tuple[float, float]:
    model.train()
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    samples = 0
    for batch_index, (images, targets) in enumerate(loader):
        images = images.to(device)
        targets = targets.to(device)
        outputs = model(images)
        loss = loss_fn(outputs, targets)
        model.zero_grad()                          # set_to_none=True is the default
        loss.backward()
        optimizer.step()
        loss_sum += loss.detach().double() * targets.numel()
        correct += (outputs.detach().argmax(dim=-1) == targets).sum()
        samples += targets.numel()
    return float(loss_sum / samples), float(correct) / samples
'''),
    # ------------------------------------------------------------------ Exercise 2 · evaluate
    Alternative(
        cell="day06_evaluate",
        why="no_grad instead of inference_mode, and the modes restored by module name in a finally block",
        source='''def evaluate(model, loader, loss_fn, device) -> tuple[float, float]:
    saved = {name: m.training for name, m in model.named_modules()}
    model.eval()
    try:
        loss_sum, right, count = 0.0, 0, 0
        with torch.no_grad():
            for xb, yb in loader:
                xb, yb = xb.to(device), yb.to(device)
                logits = model(xb)
                loss_sum += loss_fn(logits, yb).item() * yb.size(0)
                right += (logits.argmax(1) == yb).sum().item()
                count += yb.size(0)
    finally:
        for name, m in model.named_modules():
            m.training = saved[name]
    return loss_sum / count, right / count
'''),
    Alternative(
        cell="day06_evaluate",
        why="restores each submodule with m.train(flag) in modules() order (parents first, so each child's own "
            "flag wins), and counts on the device, read once at the end",
        source='''def evaluate(model, loader, loss_fn, device) -> tuple[float, float]:
    flags = [(m, m.training) for m in model.modules()]
    model.eval()
    total = torch.zeros((), dtype=torch.float64, device=device)
    hits = torch.zeros((), dtype=torch.int64, device=device)
    n = 0
    with torch.inference_mode():
        for images, targets in loader:
            images, targets = images.to(device), targets.to(device)
            out = model(images)
            total += loss_fn(out, targets).double() * len(targets)
            hits += (out.argmax(dim=1) == targets).sum()
            n += len(targets)
    for m, flag in flags:
        m.train(flag)
    return total.item() / n, hits.item() / n
'''),
]

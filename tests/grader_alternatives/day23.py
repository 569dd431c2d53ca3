"""Day 23 · Finding the bottleneck: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    # Exercise 1 · classify_bottleneck
    Alternative(cell="day23_classify_bottleneck",
                why="an if/elif chain of explicit comparisons instead of max over a dict",
                source='''def classify_bottleneck(m: dict, util_threshold: float = 0.8) -> str:
    step = m["step_s"]
    if not step > 0:
        raise ValueError("step_s must be positive")
    utilisation = m["device_s"] / step
    if utilisation >= util_threshold:
        return "compute"
    data, sync, host = m["data_s"], m["sync_s"], m["host_s"]
    if data >= sync and data >= host:
        return "data"
    if sync >= host:
        return "sync"
    return "host"
'''),
    Alternative(cell="day23_classify_bottleneck",
                why="ranks (time, priority, cause) tuples, and also counts a queue wait as evidence of a busy device",
                source='''def classify_bottleneck(m: dict, util_threshold: float = 0.8) -> str:
    if m["step_s"] <= 0:
        raise ValueError(f"bad step time {m['step_s']}")
    if m["device_s"] >= util_threshold * m["step_s"] - 1e-12 * m["step_s"]:
        return "compute"
    ranked = [(m["data_s"], 3, "data"), (m["sync_s"], 2, "sync"), (m["host_s"], 1, "host"),
              (m.get("queue_s", 0.0), 0, "compute")]
    return max(ranked)[2]
'''),
    # Exercise 2 · quiet_train_loop
    Alternative(cell="day23_quiet_train_loop",
                why="keeps each step's tensors in lists and stacks them once per interval (one .tolist())",
                source='''def quiet_train_loop(model, batches, optimizer, log_every):
    log = []
    losses, corrects, bad, sizes = [], [], [], []
    for step, (x, y) in enumerate(batches, start=1):
        logits = model(x)
        loss = loss_fn(logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach() * y.shape[0])
        corrects.append((logits.argmax(dim=1) == y).sum().to(losses[-1].dtype))
        bad.append(torch.isfinite(loss.detach()).logical_not().to(losses[-1].dtype))
        sizes.append(y.shape[0])
        if step % log_every == 0:
            loss_total, correct_total, bad_total = torch.stack(
                [torch.stack(losses).sum(), torch.stack(corrects).sum(), torch.stack(bad).sum()]).tolist()
            if bad_total > 0:
                raise FloatingPointError(f"non-finite loss in steps {step - log_every + 1}..{step}")
            n = sum(sizes)
            log.append({"step": step, "loss": loss_total / n, "accuracy": correct_total / n})
            losses, corrects, bad, sizes = [], [], [], []
    return log
'''),
    Alternative(cell="day23_quiet_train_loop",
                why="one float64 accumulator tensor of three sums on the device, read with a single .tolist()",
                source='''def quiet_train_loop(model, batches, optimizer, log_every):
    log = []
    acc = None
    seen = 0
    for step, (x, y) in enumerate(batches, start=1):
        out = model(x)
        loss = loss_fn(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            row = torch.stack([loss.double() * len(y), (out.argmax(1) == y).sum().double(),
                               (~torch.isfinite(loss)).double()])
            acc = row if acc is None else acc + row
        seen += len(y)
        if step % log_every == 0:
            loss_sum, correct, n_bad = acc.tolist()
            if n_bad > 0:
                raise FloatingPointError("loss was not finite in the last interval")
            log.append({"step": step, "loss": float(loss_sum / seen), "accuracy": float(correct / seen)})
            acc, seen = None, 0
    return log
'''),
    # Exercise 3 · masked_loss
    Alternative(cell="day23_masked_loss",
                why="cross_entropy's own ignore_index with a sum, divided by the clamped count of labels",
                source='''def masked_loss(logits, y):
    n_labelled = (y != -1).sum().clamp_min(1)
    return nn.functional.cross_entropy(logits, y, ignore_index=-1, reduction="sum") / n_labelled
'''),
    Alternative(cell="day23_masked_loss",
                why="log_softmax and gather by hand, weighed by a float mask",
                source='''def masked_loss(logits, y):
    mask = (y >= 0).to(logits.dtype)
    log_probs = torch.log_softmax(logits, dim=1)
    picked = log_probs.gather(1, y.clamp(min=0).unsqueeze(1)).squeeze(1)
    return -(picked * mask).sum() / torch.clamp(mask.sum(), min=1.0)
'''),
    Alternative(cell="day23_quiet_train_loop",
                why="one copy of the stacked sums to the host with .cpu(), then .tolist() of that host tensor",
                find="            total_loss, total_correct, n_bad = torch.stack([loss_sum, correct, nonfinite]).tolist()   # one sync\n",
                replace="            totals = torch.stack([loss_sum, correct, nonfinite]).cpu()    # one copy to the host: the one sync\n"
                        "            total_loss, total_correct, n_bad = totals.tolist()             # a host tensor: nothing to wait for\n"),
    Alternative(cell="day23_masked_loss",
                why="cross_entropy's own ignore_index with the default mean, its 0/0 = nan for an unlabelled batch "
                    "turned into 0 by nan_to_num (whose backward also gives 0 gradients)",
                source='''def masked_loss(logits, y):
    return torch.nan_to_num(nn.functional.cross_entropy(logits, y, ignore_index=-1), nan=0.0)
'''),
    Alternative(cell="day23_masked_loss",
                why="a one-hot target given its num_classes: sync-free on CUDA (the device asserts the range); the "
                    "CPU's range check inside one_hot is not counted as the answer's sync",
                source='''def masked_loss(logits, y):
    labelled = (y != -1).to(logits.dtype)
    target = nn.functional.one_hot(y.clamp_min(0), num_classes=logits.shape[1]).to(logits.dtype)
    per_sample = -(target * logits.log_softmax(dim=1)).sum(dim=1)
    return (per_sample * labelled).sum() / labelled.sum().clamp_min(1)
'''),
]

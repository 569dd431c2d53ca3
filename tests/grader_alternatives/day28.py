"""Day 28 · Evaluation: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    Alternative(
        cell="day28_average_f1",
        why="F1 as 2TP / (support + predicted) with nan_to_num for 0/0, micro as pooled 2PR/(P+R), macro as a "
            "masked sum over the classes that occur (no boolean indexing), all in float32",
        source='''def average_f1(cm: torch.Tensor, average: str) -> float:
    if average not in {"macro", "micro", "weighted"}:
        raise ValueError(f"unknown average {average!r}")
    cm = torch.as_tensor(cm).float()
    n = cm.sum()
    if not n > 0:
        raise ValueError("empty confusion matrix")
    tp = torch.diagonal(cm)
    support, predicted = cm.sum(1), cm.sum(0)
    f1 = torch.nan_to_num(2 * tp / (support + predicted), nan=0.0)
    if average == "micro":
        p = tp.sum() / predicted.sum()
        r = tp.sum() / support.sum()
        return float(2 * p * r / (p + r)) if float(p + r) > 0 else 0.0
    if average == "weighted":
        return float((f1 * support / n).sum())
    occurs = ((support + predicted) > 0).float()
    return float((f1 * occurs).sum() / occurs.sum())
'''),
    Alternative(
        cell="day28_average_f1",
        why="precision, recall and F1 from classification_report, the averages as torch.dot and a where-weighted "
            "mean, in float64",
        source='''def average_f1(cm: torch.Tensor, average: str) -> float:
    cm = torch.as_tensor(cm, dtype=torch.float64)
    if average not in ("macro", "micro", "weighted"):
        raise ValueError(average)
    total = cm.sum()
    if total == 0:
        raise ValueError("no samples to average")
    report = classification_report(cm)
    if average == "micro":
        return report.micro["f1"]
    support = cm.sum(dim=1)
    if average == "weighted":
        return float(torch.dot(report.f1, support) / total)
    weight = torch.where((support > 0) | (cm.sum(dim=0) > 0), 1.0, 0.0).to(torch.float64)
    return float(torch.dot(report.f1, weight) / weight.sum())
'''),
    Alternative(
        cell="day28_evaluate",
        why="a 2-D matrix filled with index_put_(accumulate=True), torch.no_grad() instead of inference_mode, the "
            "device taken from the first parameter of model.parameters() in a loop",
        source='''def evaluate(model: torch.nn.Module, loader, num_classes: int) -> tuple[torch.Tensor, float]:
    for p in model.parameters():
        device = p.device
        break
    mode = model.training
    model.eval()
    cm = torch.zeros(num_classes, num_classes, dtype=torch.long, device=device)
    total_loss = torch.zeros((), device=device)
    n = 0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device).long()
            out = model(x)
            total_loss = total_loss + F.cross_entropy(out.float(), y, reduction="sum")
            cm.index_put_((y, out.argmax(1)), torch.ones_like(y), accumulate=True)
            n += y.numel()
    model.train(mode)
    if n == 0:
        raise ValueError("empty loader")
    return cm.cpu(), total_loss.item() / n
'''),
    Alternative(
        cell="day28_evaluate",
        why="utils.metrics.confusion_matrix on every batch (it reads nothing back), a float64 loss sum on the "
            "device, the totals read together with torch.stack",
        source='''def evaluate(model: torch.nn.Module, loader, num_classes: int) -> tuple[torch.Tensor, float]:
    device = next(iter(model.parameters())).device
    was_training = model.training
    model.eval()
    cm = torch.zeros(num_classes, num_classes, dtype=torch.int64, device=device)
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    count = 0
    try:
        with torch.inference_mode():
            for images, labels in loader:
                images = images.to(device)
                labels = labels.to(device).long()
                logits = model(images).float()
                loss_sum += F.cross_entropy(logits, labels, reduction="sum").double()
                cm += confusion_matrix(logits.argmax(dim=1), labels, num_classes)
                count += labels.shape[0]
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError("nothing to evaluate")
    return cm.cpu(), float(loss_sum.cpu()) / count
'''),
]

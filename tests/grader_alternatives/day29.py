"""Day 29 · Looking inside: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    Alternative(
        cell="day29_penultimate_features",
        why="a forward *pre*-hook on fc (it sees fc's input directly), torch.no_grad() instead of inference_mode, a "
            "dict to hold the result",
        source='''def penultimate_features(model: torch.nn.Module, images: torch.Tensor) -> torch.Tensor:
    store = {}

    def grab(module, args):
        store["x"] = args[0].detach().clone()

    device = next(model.parameters()).device
    mode = model.training
    handle = model.fc.register_forward_pre_hook(grab)
    try:
        model.eval()
        with torch.no_grad():
            model(images.to(device))
    finally:
        handle.remove()
        model.train(mode)
    return store["x"].reshape(len(images), -1).to("cpu")
'''),
    Alternative(
        cell="day29_penultimate_features",
        why="the hook as a small class with __call__, the handle used as a context manager (RemovableHandle "
            "supports `with`), the features moved to the CPU inside the hook",
        source='''class _Grab:
    def __init__(self):
        self.features = None

    def __call__(self, module, inputs, output):
        self.features = inputs[0].detach().flatten(start_dim=1).cpu()


def penultimate_features(model: torch.nn.Module, images: torch.Tensor) -> torch.Tensor:
    grab = _Grab()
    was_training = model.training
    model.eval()
    try:
        with model.fc.register_forward_hook(grab), torch.inference_mode():
            model(images.to(next(model.parameters()).device))
    finally:
        model.train(was_training)
    return grab.features
'''),
    Alternative(
        cell="day29_confident_mistakes",
        why="keeps the k best mistakes in a heap of (confidence, index) pairs while streaming, read back batch by "
            "batch with tolist()",
        source='''import heapq

def confident_mistakes(model: torch.nn.Module, loader, k: int) -> list[int]:
    if k <= 0:
        return []
    device = next(model.parameters()).device
    training = model.training
    model.eval()
    best = []                                     # a min-heap of the k largest (confidence, -order, index)
    order = 0
    try:
        with torch.no_grad():
            for images, labels, indices in loader:
                probs = torch.softmax(model(images.to(device)).float(), dim=-1)
                conf, guess = probs.max(dim=-1)
                for c, g, y, i in zip(conf.tolist(), guess.tolist(), labels.tolist(), indices.tolist()):
                    if g != int(y):
                        item = (c, -order, int(i))
                        order += 1
                        if len(best) < k:
                            heapq.heappush(best, item)
                        elif item > best[0]:
                            heapq.heapreplace(best, item)
    finally:
        model.train(training)
    return [i for _, _, i in sorted(best, reverse=True)]
'''),
    Alternative(
        cell="day29_confident_mistakes",
        why="collects every logit, label and index first, then ranks the mistakes with torch.topk",
        source='''def confident_mistakes(model: torch.nn.Module, loader, k: int) -> list[int]:
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    all_logits, all_labels, all_indices = [], [], []
    try:
        with torch.inference_mode():
            for images, labels, indices in loader:
                all_logits.append(model(images.to(device)).float().cpu())
                all_labels.append(torch.as_tensor(labels))
                all_indices.append(torch.as_tensor(indices))
    finally:
        model.train(was_training)
    logits, labels, indices = torch.cat(all_logits), torch.cat(all_labels), torch.cat(all_indices)
    confidence, predicted = logits.softmax(1).max(1)
    mistakes = torch.nonzero(predicted != labels).flatten()
    top = torch.topk(confidence[mistakes], min(k, len(mistakes))).indices
    return indices[mistakes[top]].tolist()
'''),
    Alternative(
        cell="day29_confident_mistakes",
        why="moves the predictions to the labels' device (the CPU) instead of the labels to the model's device",
        find="                wrong = (predicted != labels.to(device)).cpu()\n",
        replace="                wrong = predicted.to(labels.device) != labels\n"),
    Alternative(
        cell="day29_confident_mistakes",
        why="moves the indices to the mask's device before indexing them",
        find="                positions.append(torch.as_tensor(indices)[wrong])\n",
        replace="                positions.append(torch.as_tensor(indices).to(wrong.device)[wrong])\n"),
]

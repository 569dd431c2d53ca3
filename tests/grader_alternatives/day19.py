"""Day 19: correct gradient accumulation, stop agreement and failure classification, written other ways."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    # Exercise 1: accumulation_step.
    Alternative(cell="day19_accumulation_step", why="an ExitStack for no_sync, the loss summed as a tensor and read "
                "once at the end, zero_grad(set_to_none=True)", source='''def accumulation_step(model: DDP, optimizer: torch.optim.Optimizer, micro_batches: list, loss_fn) -> float:
    n_samples = sum(y.shape[0] for _, y in micro_batches)
    summed = torch.zeros(())
    for i, (x, y) in enumerate(micro_batches):
        with contextlib.ExitStack() as stack:
            if i < len(micro_batches) - 1:
                stack.enter_context(model.no_sync())
            loss = loss_fn(model(x), y)
            (loss * (y.shape[0] / n_samples)).backward()
        summed += loss.detach() * y.shape[0]
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(summed / n_samples)
'''),
    Alternative(cell="day19_accumulation_step", why="the last micro-batch handled after the loop, losses summed in "
                "float64 Python numbers", source='''def accumulation_step(model: DDP, optimizer: torch.optim.Optimizer, micro_batches: list, loss_fn) -> float:
    total = sum(len(y) for _, y in micro_batches)
    *head, (x_last, y_last) = micro_batches
    weighted = 0.0
    with model.no_sync():
        for x, y in head:
            loss = loss_fn(model(x), y)
            (loss * len(y) / total).backward()
            weighted += loss.item() * len(y)
    loss = loss_fn(model(x_last), y_last)
    (loss * len(y_last) / total).backward()          # outside no_sync: the one all-reduce
    weighted += loss.item() * len(y_last)
    optimizer.step()
    optimizer.zero_grad()
    return weighted / total
'''),
    # Exercise 2: agree_to_stop.
    Alternative(cell="day19_agree_to_stop", why="an integer SUM of the flags, compared with 0",
                source='''from utils.distributed import worker_device

def agree_to_stop(stop_here: bool) -> bool:
    votes = torch.tensor([int(stop_here)], dtype=torch.int64, device=worker_device())
    dist.all_reduce(votes, op=dist.ReduceOp.SUM)
    return votes.item() > 0
'''),
    Alternative(cell="day19_agree_to_stop", why="a uint8 flag reduced with MAX, converted with bool()",
                source='''from utils.distributed import worker_device

def agree_to_stop(stop_here: bool) -> bool:
    flag = torch.full((1,), 1 if stop_here else 0, dtype=torch.uint8, device=worker_device())
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag[0])
'''),
    Alternative(cell="day19_agree_to_stop",
                why="imports all_reduce and ReduceOp by name from torch.distributed (the spy must count a collective "
                    "called through that name) and returns the comparison's bool",
                source='''from torch.distributed import ReduceOp, all_reduce
from utils.distributed import worker_device

def agree_to_stop(stop_here: bool) -> bool:
    flag = torch.tensor([float(stop_here)], device=worker_device())
    all_reduce(flag, op=ReduceOp.MAX)
    return flag.item() == 1.0
'''),
    # Exercise 3: classify_failure.
    Alternative(cell="day19_classify_failure", why="regular expressions with IGNORECASE, tried in order",
                source='''import re

def classify_failure(message: str) -> str:
    rules = [("mismatch", r"mismatch between collectives"),
             ("unused_parameters", r"did not receive grad|finished reduction in the prior iteration"),
             ("timeout", r"timed out|operation timeout|before timing out"),
             ("peer_exited", r"(closed|reset) by peer")]
    for kind, pattern in rules:
        if re.search(pattern, message, flags=re.IGNORECASE):
            return kind
    return "unknown"
'''),
    Alternative(cell="day19_classify_failure", why="a dict of keyword lists, casefold, any()",
                source='''SIGNATURES = {
    "mismatch": ["detected mismatch between collectives"],
    "unused_parameters": ["expected to have finished reduction", "did not receive grad"],
    "timeout": ["timed out waiting", "watchdog caught collective operation timeout"],
    "peer_exited": ["connection closed by peer", "connection reset by peer"],
}

def classify_failure(message: str) -> str:
    text = message.casefold()
    for kind, keys in SIGNATURES.items():          # dicts keep their order: the more specific kinds first
        if any(k in text for k in keys):
            return kind
    return "unknown"
'''),
]

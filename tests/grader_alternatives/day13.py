"""Day 13 · Activation checkpointing: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    # Exercise 1 · checkpoint_blocks
    Alternative(cell="day13_checkpoint_blocks",
                why="splits the block indices with numpy.array_split (longer pieces first) and checkpoints a lambda "
                    "over a slice of the Sequential",
                source='''def checkpoint_blocks(blocks: nn.Sequential, x: torch.Tensor, segments: int) -> torch.Tensor:
    import numpy as np
    if not 1 <= segments <= len(blocks):
        raise ValueError(f"segments must be between 1 and {len(blocks)}")
    for piece in np.array_split(np.arange(len(blocks)), segments):
        run_ = blocks[int(piece[0]):int(piece[-1]) + 1]
        x = checkpoint(lambda t, run_=run_: run_(t), x, use_reentrant=False)
    return x
'''),
    Alternative(cell="day13_checkpoint_blocks",
                why="computes the segment lengths first with ceil division, and runs the blocks of a segment in a "
                    "plain function passed to checkpoint with its list of blocks",
                source='''def checkpoint_blocks(blocks, x, segments):
    import math
    n = len(blocks)
    if segments < 1 or segments > n:
        raise ValueError("bad number of segments")
    def run_all(inp, mods):
        for mod in mods:
            inp = mod(inp)
        return inp
    mods, left, parts = list(blocks), n, []
    for s in range(segments):
        size = math.ceil(left / (segments - s))
        parts.append(mods[n - left:n - left + size])
        left -= size
    for part in parts:
        x = checkpoint(run_all, x, part, use_reentrant=False)
    return x
'''),
    # Exercise 2 · checkpoint_peak_bytes
    Alternative(cell="day13_checkpoint_peak_bytes",
                why="simulates the backward pass: stores every segment's input, then walks the segments from the "
                    "last, popping each stored input after its recompute",
                source='''def checkpoint_peak_bytes(block_bytes: list[int], input_bytes: list[int], segments: int) -> int:
    n = len(block_bytes)
    if len(input_bytes) != n or not (1 <= segments <= n):
        raise ValueError("bad arguments")
    sizes = [n // segments + (1 if s < n % segments else 0) for s in range(segments)]
    starts = [sum(sizes[:s]) for s in range(segments)]
    stored = [input_bytes[st] for st in starts]
    peak = 0
    for s in reversed(range(segments)):
        alive = sum(stored) + sum(block_bytes[starts[s]:starts[s] + sizes[s]])
        peak = max(peak, alive)
        stored.pop()
    return peak
'''),
    Alternative(cell="day13_checkpoint_peak_bytes",
                why="prefix sums with itertools.accumulate, numbers converted with int() at the end",
                source='''def checkpoint_peak_bytes(block_bytes, input_bytes, segments):
    import itertools
    n = len(block_bytes)
    if not 1 <= segments <= n or len(input_bytes) != n:
        raise ValueError("segments out of range or lists of different lengths")
    q, r = divmod(n, segments)
    bounds = [0] + list(itertools.accumulate(q + (s < r) for s in range(segments)))
    stored = list(itertools.accumulate(input_bytes[bounds[s]] for s in range(segments)))
    return int(max(stored[s] + sum(block_bytes[bounds[s]:bounds[s + 1]]) for s in range(segments)))
'''),
    # Exercise 3 · choose_checkpoints
    Alternative(cell="day13_choose_checkpoints",
                why="measures each stage's recomputation as the extra FLOPs of a training step with that stage "
                    "checkpointed (a backward pass), restores the state dict and clears .grad afterwards",
                source='''import itertools
from torch.utils.flop_counter import FlopCounterMode

RESIDUAL_STAGES = ("layer1", "layer2", "layer3", "layer4")

def choose_checkpoints(m: nn.Module, x: torch.Tensor, budget_bytes: int) -> set[str]:
    import copy
    state, mode = copy.deepcopy(m.state_dict()), m.training
    m.train()

    def wrap_for(names):
        return lambda name, fn, inp: checkpoint(fn, inp, use_reentrant=False) if name in names else fn(inp)

    def step_flops(names):
        with FlopCounterMode(display=False) as counter:
            out = stage_forward(m, x, wrap_for(names))
            out.float().sum().backward()
        m.zero_grad(set_to_none=True)
        return counter.get_total_flops()

    def fwd_bytes(names):
        with SavedTensorLog(exclude=m.parameters()) as log:
            stage_forward(m, x, wrap_for(names))
        return log.bytes

    try:
        plain = step_flops(set())
        extra = {s: step_flops({s}) - plain for s in RESIDUAL_STAGES}
        best, best_cost = None, None
        for r in range(5):
            for names in itertools.combinations(RESIDUAL_STAGES, r):
                cost = sum(extra[s] for s in names)
                if (best_cost is None or cost < best_cost) and fwd_bytes(set(names)) <= budget_bytes:
                    best, best_cost = set(names), cost
        if best is None:
            raise ValueError("no choice of stages fits the budget")
        return best
    finally:
        m.load_state_dict(state)
        m.train(mode)
'''),
    Alternative(cell="day13_choose_checkpoints",
                why="one forward of the whole model under FlopCounterMode, the stages' FLOPs read from "
                    "get_flop_counts() by module name; buffers restored with copy_ in a finally",
                source='''import itertools
from torch.utils.flop_counter import FlopCounterMode

RESIDUAL_STAGES = ("layer1", "layer2", "layer3", "layer4")

def choose_checkpoints(m, x, budget_bytes):
    saved_buffers = [(b, b.detach().clone()) for b in m.buffers()]
    was_training = m.training
    try:
        m.train()
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            m(x)
        per_module = counter.get_flop_counts()
        prefix = type(m).__name__
        cost = {s: sum(per_module[f"{prefix}.{s}"].values()) for s in RESIDUAL_STAGES}
        candidates = sorted((sum(cost[s] for s in c), c) for k in range(len(RESIDUAL_STAGES) + 1)
                            for c in itertools.combinations(RESIDUAL_STAGES, k))
        for _, c in candidates:
            with SavedTensorLog(exclude=m.parameters()) as log:
                stage_forward(m, x, lambda name, fn, inp: checkpoint(fn, inp, use_reentrant=False)
                              if name in c else fn(inp))
            if log.bytes <= budget_bytes:
                return set(c)
        raise ValueError("does not fit even with every stage checkpointed")
    finally:
        with torch.no_grad():
            for b, copy_ in saved_buffers:
                b.copy_(copy_)
        m.train(was_training)
'''),
]

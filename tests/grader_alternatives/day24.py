"""Day 24 · Compilers and graphs: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

_PAYOFF_SOLUTION_TAIL = '''

def measure_compile_payoff(step, inputs, *, device, warmup: int = 3, repeats: int = 10, **compile_kwargs) -> dict:
    eager = time_fn(lambda: step(*inputs), device=device, warmup=warmup, repeats=repeats)
    compiled = torch.compile(step, **compile_kwargs)
    synchronize(device)
    start = time.perf_counter()
    compiled(*inputs)
    synchronize(device)
    first_call_s = time.perf_counter() - start
    steady = time_fn(lambda: compiled(*inputs), device=device, warmup=warmup, repeats=repeats)
    return {"first_call_s": first_call_s, "eager_step_s": eager.median_s, "compiled_step_s": steady.median_s,
            "speedup": eager.median_s / steady.median_s,
            "break_even": break_even_calls(first_call_s, eager.median_s, steady.median_s), "compiled": compiled}
'''

ALTERNATIVES = [
    # Exercise 1 · break_even_calls and measure_compile_payoff (one cell)
    Alternative(cell="day24_compile_payoff",
                why="exact rational arithmetic (fractions.Fraction) for the break-even instead of a tolerance",
                source='''from fractions import Fraction


def break_even_calls(first_call_s: float, eager_step_s: float, compiled_step_s: float) -> float:
    first, eager, comp = Fraction(first_call_s), Fraction(eager_step_s), Fraction(compiled_step_s)
    if first <= eager:
        return 1
    if comp >= eager:
        return math.inf
    return max(1, math.ceil((first - comp) / (eager - comp)))
''' + _PAYOFF_SOLUTION_TAIL),
    Alternative(cell="day24_compile_payoff",
                why="imports the clock and synchronize under other names (`from time import perf_counter as now`, "
                    "`from utils.device import synchronize as sync`) and times the first call with them",
                source='''from time import perf_counter as now

from utils.device import synchronize as sync


def break_even_calls(first_call_s: float, eager_step_s: float, compiled_step_s: float) -> float:
    if first_call_s <= eager_step_s:
        return 1
    if compiled_step_s >= eager_step_s:
        return math.inf
    return max(1, math.ceil((first_call_s - compiled_step_s) / (eager_step_s - compiled_step_s) - 1e-9))
''' + _PAYOFF_SOLUTION_TAIL.replace("time.perf_counter()", "now()").replace("synchronize(device)", "sync(device)")),
    Alternative(cell="day24_compile_payoff",
                why="times each call itself with Stopwatch and takes statistics.median, and counts up to the "
                    "break-even with a loop",
                source='''import statistics


def break_even_calls(first_call_s: float, eager_step_s: float, compiled_step_s: float) -> float:
    if compiled_step_s >= eager_step_s and first_call_s > eager_step_s:
        return math.inf
    n = 1
    tol = 1e-12 * max(first_call_s, eager_step_s, compiled_step_s)
    while first_call_s + (n - 1) * compiled_step_s > n * eager_step_s + tol * n:
        n += 1
    return n


def _median_time(fn, device, warmup, repeats):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        with Stopwatch(device) as sw:
            fn()
        times.append(sw.elapsed_s)
    return statistics.median(times)


def measure_compile_payoff(step, inputs, *, device, warmup: int = 3, repeats: int = 10, **compile_kwargs) -> dict:
    eager_s = _median_time(lambda: step(*inputs), device, warmup, repeats)
    compiled = torch.compile(step, **compile_kwargs)
    with Stopwatch(device) as first:
        compiled(*inputs)
    compiled_s = _median_time(lambda: compiled(*inputs), device, warmup, repeats)
    return {"first_call_s": first.elapsed_s, "eager_step_s": eager_s, "compiled_step_s": compiled_s,
            "speedup": eager_s / compiled_s, "break_even": break_even_calls(first.elapsed_s, eager_s, compiled_s),
            "compiled": compiled}
'''),
    # Exercise 2 · LengthPoolNoBreak
    Alternative(cell="day24_length_pool_no_break",
                why="a cumulative sum read at each sequence's last real position, and torch.where for the limit",
                find='''        mask = torch.arange(x.shape[1], device=x.device) < lengths[:, None]          # (batch, time)
        pooled = (x * mask[..., None]).sum(1) / lengths[:, None].to(x.dtype)
        out = self.fc(pooled)
        norm = out.norm(dim=1, keepdim=True)
        # Both branches as tensor ops: the factor is 1 for rows at or below the limit.
        return out * torch.clamp(self.limit / norm, max=1.0)''',
                replace='''        totals = x.cumsum(dim=1)                                              # (batch, time, dim)
        rows = torch.arange(x.shape[0], device=x.device)
        pooled = totals[rows, lengths - 1] / lengths.unsqueeze(1).to(x.dtype)
        out = self.fc(pooled)
        norm = torch.linalg.vector_norm(out, dim=1, keepdim=True)
        return torch.where(norm > self.limit, out * (self.limit / norm), out)'''),
    Alternative(cell="day24_length_pool_no_break",
                why="a float mask applied with einsum, and torch.minimum for the scale factor",
                find='''        mask = torch.arange(x.shape[1], device=x.device) < lengths[:, None]          # (batch, time)
        pooled = (x * mask[..., None]).sum(1) / lengths[:, None].to(x.dtype)
        out = self.fc(pooled)
        norm = out.norm(dim=1, keepdim=True)
        # Both branches as tensor ops: the factor is 1 for rows at or below the limit.
        return out * torch.clamp(self.limit / norm, max=1.0)''',
                replace='''        positions = torch.arange(x.size(1), device=x.device).unsqueeze(0)
        weights = (positions < lengths.unsqueeze(1)).to(x.dtype)              # (batch, time)
        pooled = torch.einsum("bt,btd->bd", weights, x) / weights.sum(dim=1, keepdim=True)
        out = self.fc(pooled)
        norm = out.norm(dim=1, keepdim=True)
        factor = torch.minimum(torch.ones_like(norm), self.limit / norm)
        return out * factor'''),
    Alternative(cell="day24_compile_payoff",
                why="its own timing loops (statistics.median) with synchronize imported under another name and used "
                    "for every synchronisation, no time_fn",
                source='''import statistics

from utils.device import synchronize as sync


def break_even_calls(first_call_s: float, eager_step_s: float, compiled_step_s: float) -> float:
    if first_call_s <= eager_step_s:
        return 1
    gain = eager_step_s - compiled_step_s
    if gain <= 0:
        return math.inf
    n = (first_call_s - compiled_step_s) / gain
    return max(1, math.ceil(n - 1e-9))


def _median_s(fn, device, warmup, repeats):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure_compile_payoff(step, inputs, *, device, warmup: int = 3, repeats: int = 10, **compile_kwargs) -> dict:
    eager_s = _median_s(lambda: step(*inputs), device, warmup, repeats)
    compiled = torch.compile(step, **compile_kwargs)
    sync(device)
    start = time.perf_counter()
    compiled(*inputs)
    sync(device)
    first_s = time.perf_counter() - start
    compiled_s = _median_s(lambda: compiled(*inputs), device, warmup, repeats)
    return {"first_call_s": first_s, "eager_step_s": eager_s, "compiled_step_s": compiled_s,
            "speedup": eager_s / compiled_s, "break_even": break_even_calls(first_s, eager_s, compiled_s),
            "compiled": compiled}
'''),
]

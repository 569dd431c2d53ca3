"""Day 09 · Batch size vs throughput: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    # ------------------------------------------------------------------ Exercise 1 · throughput_knee
    Alternative(
        cell="day09_throughput_knee",
        why="syncs once after the warm-up and after every step, and reads the clock only then: the device is idle "
            "whenever a timed interval starts or stops, with one sync per step instead of two",
        source='''def throughput_knee(make_step, batch_sizes, sync, fraction: float = 0.9, warmup: int = 2, repeats: int = 5,
                    clock=time.perf_counter) -> tuple[int, dict[int, float]]:
    curve = {}
    for b in sorted(batch_sizes):
        step = make_step(b)
        for _ in range(warmup):
            step()
        sync()                              # the warm-up's queued work is done
        times = []
        start = clock()
        for _ in range(repeats):
            step()
            sync()                          # the step is done: stop here, and the next step starts from idle
            stop = clock()
            times.append(stop - start)
            start = stop
        curve[b] = b / statistics.median(times)
    best = max(curve.values())
    knee = min(b for b in curve if curve[b] >= fraction * best)
    return knee, curve
'''),
    Alternative(
        cell="day09_throughput_knee",
        why="windowed timing, as torch.utils.benchmark.Timer.blocked_autorange does: sync, a window of 4 steps, "
            "sync, and the median over `repeats` windows; launches overlap device work inside a window",
        source='''def throughput_knee(make_step, batch_sizes, sync, fraction: float = 0.9, warmup: int = 2, repeats: int = 5,
                    clock=time.perf_counter) -> tuple[int, dict[int, float]]:
    WINDOW = 4                               # steps per timed window
    curve = {}
    for b in batch_sizes:
        step = make_step(b)
        for _ in range(warmup):
            step()
        per_step = []
        for _ in range(repeats):
            sync()
            t0 = clock()
            for _ in range(WINDOW):
                step()
            sync()
            per_step.append((clock() - t0) / WINDOW)
        curve[b] = b / statistics.median(per_step)
    best = max(curve.values())
    return min(b for b, v in curve.items() if v >= fraction * best), curve
'''),
    Alternative(
        cell="day09_throughput_knee",
        why="the median of the per-step throughputs (images/s) instead of images over the median time, in numpy",
        find="        curve[b] = b / statistics.median(times)",
        replace="        curve[b] = float(np.median([b / t for t in times]))"),
    # ------------------------------------------------------------------ Exercise 2 · largest_fitting
    Alternative(
        cell="day09_largest_fitting",
        why="bisect over the candidates strictly between lo and hi, with a key (Python 3.10+)",
        source='''import bisect

def largest_fitting(fits, lo: int, hi: int) -> int:
    candidates = range(lo + 1, hi)            # lo fits and hi does not: both already known
    first_failing = bisect.bisect_left(candidates, True, key=lambda b: not fits(b))
    return lo + first_failing
'''),
    Alternative(
        cell="day09_largest_fitting",
        why="a recursive binary search",
        source='''def largest_fitting(fits, lo: int, hi: int) -> int:
    if hi - lo <= 1:
        return lo
    mid = lo + (hi - lo) // 2
    return largest_fitting(fits, mid, hi) if fits(mid) else largest_fitting(fits, lo, mid)
'''),
    # ------------------------------------------------------------------ Exercise 3 · oom_safe_fits
    Alternative(
        cell="day09_oom_safe_fits",
        why="records the failure in a flag and frees after the try statement with utils' free_device_memory "
            "(gc.collect, then synchronize and empty_cache on CUDA only)",
        source='''import gc
from utils.batch_size import free_device_memory

def oom_safe_fits(attempt, device):
    def fits(batch_size: int) -> bool:
        failed = False
        try:
            attempt(batch_size)
        except Exception as error:
            if not is_out_of_memory(error):
                raise
            failed = True
        if failed:
            free_device_memory(device)       # outside the except block: the traceback is gone
        return not failed

    return fits
'''),
    Alternative(
        cell="day09_oom_safe_fits",
        why="checks the error type and messages by hand instead of is_out_of_memory, and the device by its string",
        source='''import gc

OOM_MESSAGES = ("out of memory", "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED",
                "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED", "CUDNN_STATUS_ALLOC_FAILED",
                "CUBLAS_STATUS_ALLOC_FAILED")

def oom_safe_fits(attempt, device):
    def fits(batch_size):
        try:
            attempt(batch_size)
        except RuntimeError as e:
            if not (isinstance(e, torch.OutOfMemoryError) or any(m in str(e) for m in OOM_MESSAGES)):
                raise
        else:
            return True
        gc.collect()
        if str(device).startswith("cuda"):
            torch.cuda.empty_cache()
        return False
    return fits
'''),
    Alternative(
        cell="day09_oom_safe_fits",
        why="frees after every trial, a success too, in a finally block that runs once the except block has let go of "
            "the error (as utils.batch_size.cuda_fits does)",
        source='''import gc

def oom_safe_fits(attempt, device):
    on_cuda = torch.device(device).type == "cuda"

    def fits(batch_size):
        ok = False
        try:
            try:
                attempt(batch_size)
                ok = True
            except RuntimeError as error:
                if not is_out_of_memory(error):
                    raise
        finally:
            gc.collect()
            if on_cuda:
                torch.cuda.empty_cache()
        return ok

    return fits
'''),
    Alternative(
        cell="day09_oom_safe_fits",
        find="        if on_cuda:\n            torch.cuda.empty_cache()",
        replace="        if on_cuda and torch.cuda.is_available():     # also guards a CPU-only build\n"
                "            torch.cuda.empty_cache()",
        why="guards empty_cache with torch.cuda.is_available() as well as the device, as much real code does",
    ),
    Alternative(
        cell="day09_oom_safe_fits",
        why="written for a Mac as well: matches 'out of memory' in any case (Apple's MPS raises its out-of-memory "
            "error as a plain RuntimeError) and frees MPS memory on an mps device (synchronize, then empty the cache, as "
            "utils.batch_size does on CUDA), the CUDA cache on CUDA",
        source='''import gc

def _ran_out_of_memory(error: BaseException) -> bool:
    # CUDA raises torch.OutOfMemoryError; cuDNN, cuBLAS and Apple's MPS raise a RuntimeError that says so.
    text = str(error)
    return (isinstance(error, torch.OutOfMemoryError) or "out of memory" in text.lower() or "ALLOC_FAILED" in text
            or "ALLOCATION_FAILED" in text)

def oom_safe_fits(attempt, device):
    kind = torch.device(device).type

    def fits(batch_size):
        failed = False
        try:
            attempt(batch_size)
        except RuntimeError as error:
            if not _ran_out_of_memory(error):
                raise
            failed = True
        if failed:                            # out of the except block: its traceback is gone
            gc.collect()
            if kind == "cuda":
                torch.cuda.empty_cache()
            elif kind == "mps":
                torch.mps.synchronize()
                torch.mps.empty_cache()
        return not failed

    return fits
'''),
    # ------------------------------------------------------------------ Exercise 4 · max_batch_closed_form
    Alternative(
        cell="day09_max_batch_closed_form",
        why="moves the margin to the other side (peak x (1 + margin) <= total) and floors with //",
        source='''def max_batch_closed_form(total_bytes: int, param_bytes: int, per_sample_bytes: float, optimizer: str,
                          overhead_fraction: float = 0.0, fixed_activation_bytes: int = 0) -> int:
    from utils.memory import OPTIMIZER_STATE_SLOTS
    slots = OPTIMIZER_STATE_SLOTS[optimizer.lower()]
    fixed = (2 + slots) * param_bytes + fixed_activation_bytes
    scale = 1.0 + overhead_fraction
    b = (total_bytes - fixed * scale) // (per_sample_bytes * scale)
    return int(b) if b > 0 else 0
'''),
    Alternative(
        cell="day09_max_batch_closed_form",
        why="spells the parts out (parameters, gradients, optimizer state) with an if-chain on the optimizer name",
        source='''def max_batch_closed_form(total_bytes: int, param_bytes: int, per_sample_bytes: float, optimizer: str,
                          overhead_fraction: float = 0.0, fixed_activation_bytes: int = 0) -> int:
    name = optimizer.lower()
    if name in ("adam", "adamw"):
        state = 2 * param_bytes
    elif name == "sgd_momentum":
        state = param_bytes
    else:
        state = 0
    gradients = param_bytes
    usable = total_bytes / (1 + overhead_fraction)
    left_for_samples = usable - param_bytes - gradients - state - fixed_activation_bytes
    if left_for_samples < per_sample_bytes:
        return 0
    return int(math.floor(left_for_samples / per_sample_bytes))
'''),
]

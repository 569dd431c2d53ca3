"""Day 09 · Batch size vs throughput: plausible wrong answers the hidden tests must catch."""
from grader_mutants import Mutant

MUTANTS = [
    Mutant(cell="day09_throughput_knee", find="            step()\n            sync()\n", replace="            step()\n",
           why="no sync before reading the clock at the stop: the loop times the launch, not the step",
           caught_by="day09_throughput_knee_tests"),
    Mutant(cell="day09_throughput_knee", find="            sync()\n            start = clock()",
           replace="            start = clock()",
           why="no sync before the start: the warm-up's queued work is billed to the first timed step",
           caught_by="day09_throughput_knee_tests"),
    Mutant(cell="day09_throughput_knee", find="        for _ in range(warmup):",
           replace="        for _ in range(warmup if b == batch_sizes[0] else 0):",
           why="warmed up once, before the first batch size: every later batch size is timed cold",
           caught_by="day09_throughput_knee_tests"),
    Mutant(cell="day09_throughput_knee", find="range(warmup):             # a new shape is cold", replace="range(0):  # no warm-up",
           why="no warm-up: the cold first steps at each batch size are timed",
           caught_by="day09_throughput_knee_tests"),
    Mutant(cell="day09_throughput_knee", find="            step()\n            sync()\n",
           replace="            make_step(b)()\n            sync()\n",
           why="built a fresh batch inside the timed region, so the set-up is billed to the step",
           caught_by="day09_throughput_knee_tests"),
    Mutant(cell="day09_throughput_knee", find="statistics.median(times)", replace="statistics.mean(times)",
           why="the mean of the timed steps, which one hiccup moves", caught_by="day09_throughput_knee_tests"),
    Mutant(cell="day09_throughput_knee", find="curve[b] = b / statistics.median(times)",
           replace="curve[b] = 1 / statistics.median(times)",
           why="steps per second instead of images per second", caught_by="day09_throughput_knee_tests"),
    Mutant(cell="day09_throughput_knee", find="best = max(curve.values())", replace="best = curve[batch_sizes[-1]]",
           why="measured the knee against the last (largest) batch instead of the fastest",
           caught_by="day09_throughput_knee_tests"),
    Mutant(cell="day09_throughput_knee", find="if tp >= fraction * best", replace="if tp >= 0.9 * best",
           why="ignored the fraction argument", caught_by="day09_throughput_knee_tests"),
    Mutant(cell="day09_throughput_knee", find="knee = min(b for b, tp in curve.items() if tp >= fraction * best)",
           replace="knee = next(b for b, tp in curve.items() if tp >= fraction * best)",
           why="the first batch size in the given order, not the smallest", caught_by="day09_throughput_knee_tests"),
    Mutant(cell="day09_throughput_knee",
           find="""        times = []
        for _ in range(repeats):
            sync()
            start = clock()
            step()
            sync()
            times.append(clock() - start)
        curve[b] = b / statistics.median(times)""",
           replace="""        sync()
        start = clock()
        for _ in range(repeats):
            step()
        sync()
        curve[b] = b / ((clock() - start) / repeats)""",
           why="one window of all the timed steps: a mean, which one hiccup moves, instead of the median of repeats "
               "measurements", caught_by="day09_throughput_knee_tests"),
    Mutant(cell="day09_throughput_knee", find="""            sync()
            start = clock()
            step()
            sync()
            times.append(clock() - start)""",
           replace="""            start = clock()
            step()
            sync()
            times.append(clock() - start)
            sync()""",
           why="synced after reading the stop instead of before the start: the first measurement starts while the "
               "warm-up's work is still queued", caught_by="day09_throughput_knee_tests"),
    Mutant(cell="day09_largest_fitting", find="mid = (lo + hi) // 2", replace="mid = lo + 1",
           why="a linear scan upwards instead of a binary search", caught_by="day09_largest_fitting_tests"),
    Mutant(cell="day09_largest_fitting", find="while hi - lo > 1:", replace="while hi - lo > 2:",
           why="stopped the search one step early", caught_by="day09_largest_fitting_tests"),
    Mutant(cell="day09_oom_safe_fits",
           find="            if not is_out_of_memory(error):\n                raise\n",
           replace="            if not is_out_of_memory(error):\n                raise\n            gc.collect()\n"
                   "            if on_cuda:\n                torch.cuda.empty_cache()\n            return False\n",
           why="freed the cache inside the except block, while the traceback still holds the failed batch",
           caught_by="day09_oom_safe_fits_tests"),
    Mutant(cell="day09_oom_safe_fits", find="        gc.collect()\n", replace="",
           why="no gc.collect(): tensors held by reference cycles survive into the next trial",
           caught_by="day09_oom_safe_fits_tests"),
    Mutant(cell="day09_oom_safe_fits", find="            if not is_out_of_memory(error):\n                raise\n",
           replace="            pass\n",
           why="read every RuntimeError (a shape bug) as 'does not fit'", caught_by="day09_oom_safe_fits_tests"),
    Mutant(cell="day09_oom_safe_fits", find="except RuntimeError as error:",
           replace="except torch.OutOfMemoryError as error:",
           why="caught only torch.OutOfMemoryError, so a cuDNN/cuBLAS allocation failure crashed the search",
           caught_by="day09_oom_safe_fits_tests"),
    Mutant(cell="day09_oom_safe_fits", find="            if not is_out_of_memory(error):\n",
           replace="            if not (isinstance(error, torch.OutOfMemoryError) or 'CUDNN_STATUS_ALLOC_FAILED' in str(error)\n"
                   "                    or 'CUBLAS_STATUS_ALLOC_FAILED' in str(error)):\n",
           why="recognised only torch.OutOfMemoryError and cuDNN/cuBLAS allocation failures: a RuntimeError that says "
               "'out of memory' (Apple's MPS raises its out-of-memory error that way) crashed the search",
           caught_by="day09_oom_safe_fits_tests"),
    Mutant(cell="day09_oom_safe_fits", find="        if on_cuda:\n            torch.cuda.empty_cache()\n",
           replace="        torch.cuda.empty_cache()\n",
           why="called torch.cuda.empty_cache() on every device", caught_by="day09_oom_safe_fits_tests"),
    Mutant(cell="day09_oom_safe_fits", find="""            if not is_out_of_memory(error):
                raise
""", replace="""            if not is_out_of_memory(error):
                raise
            oom_safe_fits.log = getattr(oom_safe_fits, "log", []) + [error]   # for the report
""", why="kept each out-of-memory error for a log: its traceback keeps the failed trial's tensors alive for good",
           caught_by="day09_oom_safe_fits_tests"),
    Mutant(cell="day09_max_batch_closed_form", find="fixed = param_bytes * (2 + slots)",
           replace="fixed = param_bytes * (1 + slots)",
           why="forgot the gradients", caught_by="day09_max_batch_closed_form_tests"),
    Mutant(cell="day09_max_batch_closed_form", find="total_bytes / (1 + overhead_fraction)",
           replace="total_bytes * (1 - overhead_fraction)",
           why="took the margin off the total instead of applying it to the peak",
           caught_by="day09_max_batch_closed_form_tests"),
    Mutant(cell="day09_max_batch_closed_form", find="math.floor(room / per_sample_bytes)",
           replace="round(room / per_sample_bytes)",
           why="rounded to the nearest batch instead of down", caught_by="day09_max_batch_closed_form_tests"),
    Mutant(cell="day09_max_batch_closed_form", find="return max(0, math.floor(room / per_sample_bytes))",
           replace="return math.floor(room / per_sample_bytes)",
           why="returned a negative batch size when nothing fits", caught_by="day09_max_batch_closed_form_tests"),
    Mutant(cell="day09_max_batch_closed_form", find="    return max(0, math.floor(room / per_sample_bytes))",
           replace="    b = 0\n    while (b + 1) * per_sample_bytes <= room:\n        b += 1\n    return b",
           why="a linear scan over batch sizes instead of the closed form", caught_by="day09_max_batch_closed_form_tests"),
    Mutant(cell="day09_max_batch_closed_form", find="    return max(0, math.floor(room / per_sample_bytes))",
           replace="    model = MemoryBreakdown(param_bytes, param_bytes, slots * param_bytes,\n"
                   "                            int(fixed_activation_bytes + per_sample_bytes), 1, fixed_activation_bytes)\n"
                   "    return find_max_batch_size(budget_fits(model, total_bytes, overhead_fraction)).max_batch_size",
           why="called the search it should replace", caught_by="day09_max_batch_closed_form_tests"),
    Mutant(cell="day09_max_batch_closed_form", find="[optimizer.strip().lower()]", replace="[optimizer]",
           why="optimizer names are case-sensitive ('AdamW' fails)", caught_by="day09_max_batch_closed_form_tests"),
    Mutant(cell="day09_max_batch_closed_form",
           find="return max(0, math.floor(room / per_sample_bytes))", replace="return max(0, room // per_sample_bytes)",
           why="floors with // on float bytes and returns 26.0, a float, as the batch size",
           caught_by="day09_max_batch_closed_form_tests"),
    Mutant(cell='day09_oom_safe_fits',
           find='    on_cuda = torch.device(device).type == "cuda"\n',
           replace='    on_cuda = str(device) == "cuda"\n',
           why='compared the device\'s text with "cuda": a worker on cuda:1 never empties its cache after an out-of-memory error',
           caught_by='day09_oom_safe_fits_tests'),
    Mutant(cell='day09_throughput_knee',
           find='curve[b] = b / statistics.median(times)',
           replace='curve[b] = b / min(times)',
           why="min(times) (timeit's habit) reports the fastest measurement, not the median the text asks for: it is blind to a device that is slow most of the time; the hiccup test has only one slow step per size, which the min ignores as well as the median",
           caught_by='day09_throughput_knee_tests'),
    Mutant(cell='day09_throughput_knee',
           find='if tp >= fraction * best',
           replace='if tp > fraction * best',
           why="'at least fraction of the best' written as a strict >: with fraction=1.0 (asking for the fastest batch) no batch qualifies and min() of an empty sequence raises; minor, an edge of the stated rule",
           caught_by='day09_throughput_knee_tests'),
]

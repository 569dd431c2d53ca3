"""Day 22 · The PyTorch profiler: plausible wrong answers the hidden tests must catch."""
from grader_mutants import Mutant

MUTANTS = [
    Mutant(cell="day22_op_calls_per_step",
           find="schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1)",
           replace="schedule=None",
           why="profiled every call: the one-off work of the first calls is counted",
           caught_by="day22_op_calls_per_step_tests"),
    Mutant(cell="day22_op_calls_per_step",
           find="repeat=1", replace="repeat=0",
           why="left the schedule repeating: with wait=0 the next cycle replaces the counts with an empty one",
           caught_by="day22_op_calls_per_step_tests"),
    Mutant(cell="day22_op_calls_per_step",
           find='r["calls"] / active', replace='r["calls"] / (wait + warmup + active)',
           why="divided by every call made instead of the recorded (active) steps",
           caught_by="day22_op_calls_per_step_tests"),
    Mutant(cell="day22_op_calls_per_step",
           find="        for _ in range(wait + warmup + active):",
           replace="        for _ in range(active):",
           why="called the step only `active` times: the schedule never reaches the active steps",
           caught_by="day22_op_calls_per_step_tests"),
    Mutant(cell="day22_data_wait_share",
           find='and end <= s["start_us"] + s["dur_us"] for s in steps',
           replace="for s in steps",
           why="counted a data range that starts inside a step but sticks out of it",
           caught_by="day22_data_wait_share_tests"),
    Mutant(cell="day22_data_wait_share",
           find='if e["name"] != data_name:',
           replace='if not e["name"].startswith(data_name):',
           why="matched range names by prefix, so 'data_aug' counts as data",
           caught_by="day22_data_wait_share_tests"),
    Mutant(cell="day22_labelled_batches",
           find="            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n        yield x, y",
           replace="            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n"
                   "            yield x, y",
           why="yielded inside the range: the caller's training step is measured as data",
           caught_by="day22_labelled_batches_tests"),
    Mutant(cell="day22_labelled_batches",
           find="    it = iter(batches)\n    while True:\n        with record_function(name):\n            try:\n"
                "                x, y = next(it)\n            except StopIteration:\n                return\n"
                "            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n        yield x, y",
           replace="    for x, y in batches:\n        with record_function(name):\n"
                   "            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n        yield x, y",
           why="a range around the copy only: the for statement fetches the batch before the range opens",
           caught_by="day22_labelled_batches_tests"),
    Mutant(cell="day22_labelled_batches",
           find="            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n        yield x, y",
           replace="        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n        yield x, y",
           why="copied to the device after the range closed: the host-to-device copy is not counted as data",
           caught_by="day22_labelled_batches_tests"),
    Mutant(cell="day22_labelled_batches",
           find="it = iter(batches)", replace="it = iter(list(batches))",
           why="read the whole loader first: an endless loader never yields, and the loading is outside any range",
           caught_by="day22_labelled_batches_tests"),
    Mutant(cell="day22_labelled_batches",
           find="with record_function(name):", replace='with record_function("data"):',
           why="hard-coded the range name instead of using the name parameter",
           caught_by="day22_labelled_batches_tests"),
    Mutant(cell="day22_labelled_batches",
           find="            try:\n                x, y = next(it)\n            except StopIteration:\n                return\n",
           replace="            x, y = next(it)\n",
           why="let StopIteration escape a generator: the loop ends with a RuntimeError instead of ending",
           caught_by="day22_labelled_batches_tests"),
]

MUTANTS += [
    Mutant(cell="day22_gpu_time_breakdown",
           find='''    compute = covered({"kernel"})
    busy = covered({"kernel", "gpu_memcpy", "gpu_memset"})''',
           replace='''    compute = sum(min(e["start_us"] + e["dur_us"], end_us) - max(e["start_us"], start_us)
                  for e in events if e["cat"] == "kernel" and e["start_us"] < end_us and e["start_us"] + e["dur_us"] > start_us)
    busy = covered({"kernel", "gpu_memcpy", "gpu_memset"})''',
           why="summed kernel durations: two kernels running side by side on two streams count twice",
           caught_by="day22_gpu_time_breakdown_tests"),
    Mutant(cell="day22_gpu_time_breakdown",
           find='''        spans = sorted((max(e["start_us"], start_us), min(e["start_us"] + e["dur_us"], end_us))
                       for e in events if e["cat"] in cats)''',
           replace='''        spans = sorted((e["start_us"], e["start_us"] + e["dur_us"])
                       for e in events if e["cat"] in cats and start_us <= e["start_us"] < end_us)''',
           why="kept whole events that start in the window instead of clipping them to it",
           caught_by="day22_gpu_time_breakdown_tests"),
    Mutant(cell="day22_gpu_time_breakdown",
           find='''    return {"compute_us": compute, "memory_us": busy - compute, "idle_us": (end_us - start_us) - busy}''',
           replace='''    memory = covered({"gpu_memcpy", "gpu_memset"})
    return {"compute_us": compute, "memory_us": memory, "idle_us": (end_us - start_us) - compute - memory}''',
           why="counted a copy's whole time as memory time, also while a kernel ran beside it",
           caught_by="day22_gpu_time_breakdown_tests"),
    Mutant(cell="day22_gpu_time_breakdown",
           find='''    busy = covered({"kernel", "gpu_memcpy", "gpu_memset"})''',
           replace='''    busy = covered({"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"})''',
           why="counted the GPU mirrors of the ranges as GPU work: a step's mirror covers its idle gaps too",
           caught_by="day22_gpu_time_breakdown_tests"),
    Mutant(cell="day22_gpu_time_breakdown",
           find='''        spans = sorted((max(e["start_us"], start_us)''',
           replace='''        spans = list((max(e["start_us"], start_us)''',
           why="merged the intervals in the order the trace lists them, without sorting them by start first",
           caught_by="day22_gpu_time_breakdown_tests"),
    Mutant(cell="day22_gpu_time_breakdown",
         find="    compute = covered({\"kernel\"})\n    busy = covered({\"kernel\", \"gpu_memcpy\", \"gpu_memset\"})\n",
         replace=("    mem_union = covered({\"gpu_memcpy\", \"gpu_memset\"})\n"
                  "    def clip(e):\n"
                  "        return max(e[\"start_us\"], start_us), min(e[\"start_us\"] + e[\"dur_us\"], end_us)\n"
                  "    overlap = 0.0\n"
                  "    for k in events:\n"
                  "        if k[\"cat\"] != \"kernel\":\n"
                  "            continue\n"
                  "        ks, kt = clip(k)\n"
                  "        for c in events:\n"
                  "            if c[\"cat\"] in (\"gpu_memcpy\", \"gpu_memset\"):\n"
                  "                cs, ct = clip(c)\n"
                  "                overlap += max(0.0, min(kt, ct) - max(ks, cs))\n"
                  "    compute = covered({\"kernel\"})\n"
                  "    busy = compute + mem_union - overlap\n"),
         why="subtracted each kernel's overlap with the copies in turn: two kernels side by side beside a copy are "
             "subtracted twice",
         caught_by="day22_gpu_time_breakdown_tests"),
    Mutant(cell="day22_gpu_time_breakdown",
         find="    def covered(cats):\n        # The length of the union of the events' intervals, clipped to the window.\n",
         replace=("    import math\n    def covered(cats):\n"
                  "        ev = [(e[\"start_us\"], e[\"start_us\"] + e[\"dur_us\"]) for e in events if e[\"cat\"] in cats]\n"
                  "        n = 0\n        for t in range(math.floor(start_us), math.ceil(end_us)):\n"
                  "            if any(s <= t < u for s, u in ev):\n                n += 1\n        return float(n)\n"
                  "    def covered_exact(cats):\n"
                  "        # The length of the union of the events' intervals, clipped to the window.\n"),
         why="counted whole microseconds on a 1 us grid: trace times are fractions of a microsecond",
         caught_by="day22_gpu_time_breakdown_tests"),
    Mutant(cell="day22_labelled_batches",
           find="x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)",
           replace="x, y = x.to(device), y.to(device)",
           why="blocking copies: the text asks for non_blocking=True (a CPU grader sees no other difference)",
           caught_by="day22_labelled_batches_tests"),
    Mutant(cell="day22_data_wait_share",
           find='total = sum(s["dur_us"] for s in steps)',
           replace='total = (max(s["start_us"] + s["dur_us"] for s in steps) - min(s["start_us"] for s in steps)) if steps else 0.0',
           why="took the span from the first step's start to the last step's end: gaps between steps count as step time",
           caught_by="day22_data_wait_share_tests"),
    Mutant(cell="day22_data_wait_share",
           find='s["start_us"] <= e["start_us"] and end <= s["start_us"] + s["dur_us"]',
           replace='s["start_us"] <= end <= s["start_us"] + s["dur_us"]',
           why="counted a data range that ends inside a step without checking where it starts",
           caught_by="day22_data_wait_share_tests"),
]

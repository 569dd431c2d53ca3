"""Day 02 · Watching the GPU: plausible wrong answers to parse_query_gpu_csv, busy_fraction and UtilSampler."""
from grader_mutants import Mutant

MUTANTS = [
    Mutant(cell="day02_parse_query_gpu_csv",
           find='values = [v.strip() for v in line.split(",")]', replace='values = line.replace(",", " ").split()',
           why="split on whitespace: 'GeForce RTX 2080' and '26 %' break into several fields",
           caught_by="day02_parse_query_gpu_csv_tests"),
    Mutant(cell="day02_parse_query_gpu_csv",
           find=' and not key.endswith("version")', replace="",
           why="a driver version that looks like a number becomes a float (470.10 -> 470.1, another driver)",
           caught_by="day02_parse_query_gpu_csv_tests"),
    Mutant(cell="day02_parse_query_gpu_csv",
           find='re.sub(r"\\s*\\[[^\\]]*\\]\\s*$", "", h.strip())', replace="h.strip()",
           why="the unit stays in the key ('utilization.gpu [%]')",
           caught_by="day02_parse_query_gpu_csv_tests"),
    Mutant(cell="day02_parse_query_gpu_csv",
           find='missing = {"", "n/a", "[n/a]", "[not supported]", "not supported"}', replace='missing = {"", "n/a"}',
           why="only the plain 'N/A' spelling is read as missing ('[N/A]', '[Not Supported]' stay strings)",
           caught_by="day02_parse_query_gpu_csv_tests"),
    Mutant(cell="day02_parse_query_gpu_csv",
           find='        if len(values) != len(keys):\n'
                '            raise ValueError(f"{len(values)} values for {len(keys)} fields in {line!r}")\n',
           replace="",
           why="a line with the wrong number of values is silently truncated by zip",
           caught_by="day02_parse_query_gpu_csv_tests"),
    Mutant(cell="day02_parse_query_gpu_csv",
           find="lines = text.splitlines() if isinstance(text, str) else text ",
           replace='lines = (text if isinstance(text, str) else "".join(text)).splitlines() ',
           why="the stream is joined into one text first: it waits for nvidia-smi -lms to end, which it never does",
           caught_by="day02_parse_query_gpu_csv_tests"),
    Mutant(cell="day02_parse_query_gpu_csv",
           find="lines = text.splitlines() if isinstance(text, str) else text ",
           replace="lines = text.splitlines() if isinstance(text, str) else list(text) ",
           why="the lines are collected into a list before the first row is parsed, which blocks on a live stream",
           caught_by="day02_parse_query_gpu_csv_tests"),
    Mutant(cell="day02_busy_fraction",
           find="busy = sum(t1 - t0 for t0, t1, u in zip(t_s[:-1], t_s[1:], util_pct[1:]) if u >= threshold)\n"
                "    return busy / total",
           replace="return sum(u >= threshold for u in util_pct[1:]) / (len(util_pct) - 1)",
           why="the share of samples, not of time: a burst of close samples outweighs a long idle stretch",
           caught_by="day02_busy_fraction_tests"),
    Mutant(cell="day02_busy_fraction",
           find="util_pct[1:]) if u >= threshold)", replace="util_pct[:-1]) if u >= threshold)",
           why="each value held over the interval after it: a reading that averages the time before it (psutil, "
               "NVML) is credited to the next interval, and a late sample's long gap to the busy reading before it",
           caught_by="day02_busy_fraction_tests"),
    Mutant(cell="day02_busy_fraction",
           find="if u >= threshold)", replace="if u > threshold)",
           why="the threshold is exclusive",
           caught_by="day02_busy_fraction_tests"),
    Mutant(cell="day02_busy_fraction",
           find='    if total <= 0:\n        raise ValueError("the samples span no time")\n', replace="",
           why="a trace that spans no time divides by zero instead of raising ValueError",
           caught_by="day02_busy_fraction_tests"),
    Mutant(cell="day02_util_sampler",
           find='nvml.nvmlDeviceGetHandleByUUID("GPU-" + self.cuda_uuid)',
           replace="nvml.nvmlDeviceGetHandleByIndex(0)",
           why="the GPU is found by NVML index 0, which is not cuda:0 when CUDA_VISIBLE_DEVICES or the order differ",
           caught_by="day02_util_sampler_tests"),
    Mutant(cell="day02_util_sampler",
           find="while not self._stop.wait(self.interval_s):   # returns True at once when stop is set\n"
                "                read()",
           replace="while not self._stop.is_set():\n                time.sleep(self.interval_s)\n                read()",
           why="the thread sleeps with time.sleep, so every stop waits out up to one interval (5 s with interval_s=5)",
           caught_by="day02_util_sampler_tests"),
    Mutant(cell="day02_util_sampler",
           find="        self._stop.set()\n        self._thread.join()\n", replace="",
           why="__exit__ never stops the thread: it keeps reading NVML after the with block and after nvmlShutdown",
           caught_by="day02_util_sampler_tests"),
    Mutant(cell="day02_util_sampler",
           find="daemon=True", replace="daemon=False",
           why="a non-daemon thread: a sampler that is never stopped keeps Python from exiting",
           caught_by="day02_util_sampler_tests"),
    Mutant(cell="day02_util_sampler",
           find="            try:\n                util = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)\n"
                "            except nvml.NVMLError:            # an unsupported field, a GPU that fell off the bus: a gap, not the end\n"
                "                util = None\n",
           replace="            util = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)\n",
           why="one failed NVML read raises in the thread and ends the recording for the rest of the run",
           caught_by="day02_util_sampler_tests"),
    Mutant(cell="day02_util_sampler",
           find="        try:\n            self._read()                                   # a sample at the stop\n"
                "        finally:\n            self.nvml.nvmlShutdown()\n",
           replace="        self._read()                                       # a sample at the stop\n",
           why="nvmlShutdown is never called: every sampler leaves NVML initialised",
           caught_by="day02_util_sampler_tests"),
    Mutant(cell="day02_util_sampler",
           find="return False                                       # the body's exception, if any, propagates",
           replace="return True",
           why="__exit__ returns True, which swallows the exception raised in the training loop",
           caught_by="day02_util_sampler_tests"),
    Mutant(cell="day02_util_sampler",
           find="        try:\n            handle = nvml.nvmlDeviceGetHandleByUUID(\"GPU-\" + self.cuda_uuid)   # NVML's index is not CUDA's\n"
                "        except Exception:\n            nvml.nvmlShutdown()\n            raise\n",
           replace="        handle = nvml.nvmlDeviceGetHandleByUUID(\"GPU-\" + self.cuda_uuid)\n",
           why="a GPU that is not found leaves NVML initialised (no nvmlShutdown before the error)",
           caught_by="day02_util_sampler_tests"),
    Mutant(cell="day02_util_sampler",
           find="        read()                                             # a sample at the start\n", replace="",
           why="no sample at the start: a short run records a single sample, and the trace starts an interval late",
           caught_by="day02_util_sampler_tests"),
    Mutant(cell="day02_util_sampler",
           find="while not self._stop.wait(self.interval_s):", replace="while not self._stop.wait(0.05):",
           why="the thread waits a fixed 50 ms whatever interval_s says: it samples 100 times too often at 5 s",
           caught_by="day02_util_sampler_tests"),
    Mutant(cell="day02_util_sampler", find="        self._thread.join()\n", replace="",
           why="__exit__ stops the thread but does not join it: a read still under way finishes after the last sample "
               "and after nvmlShutdown",
           caught_by="day02_util_sampler_tests"),
    Mutant(cell="day02_busy_fraction", find="if total <= 0:", replace="if total == 0:",
           why="only a zero span raises: a trace whose last time is before its first gives a fraction (1.0 here)",
           caught_by="day02_busy_fraction_tests"),
    Mutant(cell="day02_util_sampler",
           find=('        def loop() -> None:\n'
                 '            while not self._stop.wait(self.interval_s):   # returns True at once when stop is set\n'
                 '                read()\n'
                 '\n'
                 '        self._read, self._stop = read, threading.Event()\n'
                 '        read()                                             # a sample at the start\n'
                 '        self._thread = threading.Thread(target=loop, name="util-sampler", daemon=True)\n'
                 '        self._thread.start()\n'
                 '        return self\n'
                 '        ### END SOLUTION\n'
                 '\n'
                 '    def __exit__(self, *exc_info) -> bool:\n'
                 '        ### BEGIN SOLUTION\n'
                 '        self._stop.set()\n'
                 '        self._thread.join()\n'
                 '        try:\n'
                 '            self._read()                                   # a sample at the stop\n'
                 '        finally:\n'
                 '            self.nvml.nvmlShutdown()'),
           replace=('        def loop() -> None:\n'
                    '            while not self._stop.is_set():\n'
                    '                read()\n'
                    '                self._stop.wait(self.interval_s)\n'
                    '\n'
                    '        self._read, self._stop = read, threading.Event()\n'
                    '        read()                                             # a sample at the start\n'
                    '        self._thread = threading.Thread(target=loop, name="util-sampler", daemon=True)\n'
                    '        self._thread.start()\n'
                    '        return self\n'
                    '        ### END SOLUTION\n'
                    '\n'
                    '    def __exit__(self, *exc_info) -> bool:\n'
                    '        ### BEGIN SOLUTION\n'
                    '        self._stop.set()\n'
                    '        self._thread.join()\n'
                    '        self.nvml.nvmlShutdown()'),
           why="the thread reads as it starts and __exit__ takes no sample at the stop: a short run still shows two "
               "samples, both at the start",
           caught_by="day02_util_sampler_tests"),
    Mutant(cell='day02_parse_query_gpu_csv',
           find='            if value.lower() in missing:\n                row[key] = None\n            elif number.fullmatch(value) and not key.endswith("version"):\n',
           replace='            if key.endswith("version"):\n                row[key] = value\n            elif value.lower() in missing:\n                row[key] = None\n            elif number.fullmatch(value):\n',
           why="the version rule is checked before the missing rule, so driver_version 'N/A' stays the string 'N/A' instead of None",
           caught_by='day02_parse_query_gpu_csv_tests'),
    Mutant(cell='day02_parse_query_gpu_csv',
           find='missing = {"", "n/a", "[n/a]", "[not supported]", "not supported"}',
           replace='missing = {"n/a", "[n/a]", "[not supported]", "not supported"}',
           why="an empty value stays '' instead of None (only N/A, [N/A] and [Not Supported] are treated as missing)",
           caught_by='day02_parse_query_gpu_csv_tests'),
    Mutant(cell='day02_parse_query_gpu_csv',
           find='        if not line.strip():\n            continue\n        if keys is None:\n            keys = [re.sub(r"\\s*\\[[^\\]]*\\]\\s*$", "", h.strip()) for h in line.split(",")]\n            continue\n',
           replace='        if keys is None:                                    # the first line is the header\n            keys = [re.sub(r"\\s*\\[[^\\]]*\\]\\s*$", "", h.strip()) for h in line.split(",")]\n            continue\n        if not line.strip():\n            continue\n',
           why='the first line is taken as the header even when it is blank, so an output starting with a blank line raises ValueError on every data line',
           caught_by='day02_parse_query_gpu_csv_tests'),
    Mutant(cell='day02_parse_query_gpu_csv',
           find='if len(values) != len(keys):',
           replace='if len(values) > len(keys):',
           why="only a line with too many values raises; a short line (fewer values than keys) is silently zipped into a shorter row (the csv.DictReader habit, where missing fields become restval), though the text says a different number of values raises ValueError. The hidden test's comment says 'a short line' but the test uses a long one (3 values for 2 fields)",
           caught_by='day02_parse_query_gpu_csv_tests'),
    Mutant(cell='day02_parse_query_gpu_csv',
           find='        values = [v.strip() for v in line.split(",")]',
           replace='        values = [v.strip() for v in line.split(", ")]',
           why="data lines split on ', ' (comma and space, as nvidia-smi prints) rather than on commas: 'Tesla T4,70.00 W' is one value. The text says split on commas only and strip the spaces",
           caught_by='day02_parse_query_gpu_csv_tests'),
    Mutant(cell='day02_util_sampler',
           find='        self._stop.set()\n        self._thread.join()\n        try:\n            self._read()                                   # a sample at the stop\n        finally:\n            self.nvml.nvmlShutdown()',
           replace='        self._stop.set()\n        try:\n            self._read()                                   # a sample at the stop\n        finally:\n            self._thread.join()\n            self.nvml.nvmlShutdown()',
           why="__exit__ sets the stop event and takes the last sample before joining the thread: a read the thread has under way finishes after (and concurrently with) the 'last' sample. The text orders it: stop the thread and join it, take a last sample, then nvmlShutdown. The existing _SlowReads test checks only that the thread is dead and nvmlShutdown is last",
           caught_by='day02_util_sampler_tests'),
    Mutant(cell='day02_parse_query_gpu_csv',
           find='            elif number.fullmatch(value) and not key.endswith("version"):\n                row[key] = float(value.split(" ")[0])',
           replace='            elif re.match(r"\\d+(?:\\.\\d+)?", value) and not key.endswith("version"):\n                row[key] = float(re.match(r"\\d+(?:\\.\\d+)?", value).group())',
           why="re.match (a prefix) instead of fullmatch to pull the number off the unit: '00000000:0A:00.0' (pci.bus_id) and '0x0000000000000004' (throttle reasons) become 0.0. The text says such values stay strings, but no test value starts with a digit unless it is a number or a version",
           caught_by='day02_parse_query_gpu_csv_tests'),
    Mutant(cell='day02_util_sampler',
           find='self.samples.append((time.perf_counter() - t0, util))',
           replace='self.samples.append(((time.perf_counter() - t0) * 1000, util))   # milliseconds since the start',
           why='sample times recorded in milliseconds, not the seconds the text asks for: every time check is a lower bound (>= 1.1 s span) or is met by a first sample near 0, so a 1000x unit error passes',
           caught_by='day02_util_sampler_tests'),
]

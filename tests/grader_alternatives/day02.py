"""Day 02: correct answers to parse_query_gpu_csv, busy_fraction and UtilSampler, written other ways."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    # --- Exercise 1: parse_query_gpu_csv
    Alternative(cell="day02_parse_query_gpu_csv",
                why="the csv module (csv.reader reads its iterable line by line) and float() in a try block, "
                    "units split off with rsplit",
                source='''import csv
import re
from typing import Iterable, Iterator


def parse_query_gpu_csv(text: str | Iterable[str], fields: list[str] | None = None) -> Iterator[dict]:
    source = text.splitlines() if isinstance(text, str) else text
    header = list(fields) if fields is not None else None
    for cells in csv.reader(source, skipinitialspace=True):
        cells = [c.strip() for c in cells]
        if not any(cells):
            continue
        if header is None:
            header = [c.split(" [")[0].strip() for c in cells]
            continue
        if len(cells) != len(header):
            raise ValueError(f"expected {len(header)} values, got {len(cells)}: {cells}")
        row = {}
        for name, value in zip(header, cells):
            if value.upper() in ("", "N/A", "[N/A]", "[NOT SUPPORTED]"):
                row[name] = None
                continue
            if not name.endswith("version"):
                number = value.rsplit(" ", 1)[0] if " " in value else value
                if re.fullmatch(r"[-+]?\\d+(\\.\\d+)?", number):
                    row[name] = float(number)
                    continue
            row[name] = value
        yield row
'''),
    Alternative(cell="day02_parse_query_gpu_csv",
                why="a helper per value, an explicit iterator with next() for the header, and partition for units",
                source='''import re
from typing import Iterable, Iterator


def _value(key: str, raw: str):
    raw = raw.strip()
    if raw in ("", "N/A", "[N/A]", "[Not Supported]"):
        return None
    if key.endswith("version"):
        return raw
    number, _, unit = raw.partition(" ")
    try:
        parsed = float(number)
    except ValueError:
        return raw
    return parsed if (unit == "" or unit.isalpha() or unit in ("%", "W", "MHz", "MiB", "C")) else raw


def parse_query_gpu_csv(text: str | Iterable[str], fields: list[str] | None = None) -> Iterator[dict]:
    lines = iter(text.splitlines() if isinstance(text, str) else text)
    non_blank = (line for line in lines if line.strip())
    if fields is None:
        first = next(non_blank, None)
        if first is None:
            return
        fields = [re.sub(r"\\s*\\[.*\\]$", "", part.strip()) for part in first.split(",")]
    for line in non_blank:
        values = line.split(",")
        if len(values) != len(fields):
            raise ValueError(f"{line!r} has {len(values)} values, the header {len(fields)}")
        yield {k.strip(): _value(k.strip(), v) for k, v in zip(fields, values)}
'''),
    # --- Exercise 2: busy_fraction
    Alternative(cell="day02_busy_fraction",
                why="numpy: np.diff of the times, a boolean mask of the values at the end of each interval, float64",
                source='''def busy_fraction(t_s: list[float], util_pct: list[float], threshold: float = 50.0) -> float:
    import numpy as np

    t = np.asarray(t_s, dtype=np.float64)
    u = np.asarray(util_pct, dtype=np.float64)
    if t.shape != u.shape or t.size < 2:
        raise ValueError("need two or more samples, as many values as times")
    span = t[-1] - t[0]
    if not span > 0:
        raise ValueError("no time between the first and the last sample")
    return float(np.diff(t)[u[1:] >= threshold].sum() / span)
'''),
    Alternative(cell="day02_busy_fraction",
                why="an index loop that adds each interval to busy or idle and divides by their sum",
                source='''def busy_fraction(t_s: list[float], util_pct: list[float], threshold: float = 50.0) -> float:
    if len(t_s) < 2 or len(t_s) != len(util_pct):
        raise ValueError("bad trace")
    busy = idle = 0.0
    for i in range(len(t_s) - 1):
        dt = t_s[i + 1] - t_s[i]
        if util_pct[i + 1] >= threshold:
            busy += dt
        else:
            idle += dt
    if busy + idle <= 0:
        raise ValueError("the trace spans no time")
    return busy / (busy + idle)
'''),
    # --- Exercise 3: UtilSampler
    Alternative(cell="day02_util_sampler",
                why="the thread itself takes the first sample at once, then waits; __enter__ starts it before "
                    "returning (the first reading is still at the start)",
                source='''class UtilSampler:
    """Samples one GPU's GPU-Util (%) through NVML every `interval_s` seconds on a daemon thread."""

    def __init__(self, nvml, cuda_uuid: str, interval_s: float):
        self.nvml, self.cuda_uuid, self.interval_s = nvml, cuda_uuid, interval_s
        self.samples: list[tuple[float, float | None]] = []   # (seconds since the start, GPU-Util % or None)

    def _sample(self) -> None:
        try:
            value = float(self.nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu)
        except self.nvml.NVMLError:
            value = None
        self.samples.append((time.perf_counter() - self._t0, value))

    def _run(self) -> None:
        self._sample()
        self._first.set()
        while not self._halt.wait(self.interval_s):
            self._sample()

    def __enter__(self) -> "UtilSampler":
        self.nvml.nvmlInit()
        try:
            self._handle = self.nvml.nvmlDeviceGetHandleByUUID(f"GPU-{self.cuda_uuid}")
        except BaseException:
            self.nvml.nvmlShutdown()
            raise
        self._t0 = time.perf_counter()
        self._halt, self._first = threading.Event(), threading.Event()
        self._worker = threading.Thread(target=self._run, daemon=True)
        self._worker.start()
        self._first.wait()                       # the start sample is taken before the body runs
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            self._halt.set()
            self._worker.join()
            self._sample()
        finally:
            self.nvml.nvmlShutdown()
        return False
'''),
    Alternative(cell="day02_util_sampler",
                why="a threading.Thread subclass with its own stop Event, started and joined by the context "
                    "manager; None is None-safe with 'return None' instead of 'return False'",
                source='''class _Poller(threading.Thread):
    def __init__(self, sample, interval_s: float):
        super().__init__(name="nvml-poller", daemon=True)
        self.sample, self.interval_s, self.stopping = sample, interval_s, threading.Event()

    def run(self) -> None:
        while True:
            if self.stopping.wait(timeout=self.interval_s):
                return
            self.sample()


class UtilSampler:
    """Samples one GPU's GPU-Util (%) through NVML every `interval_s` seconds on a daemon thread."""

    def __init__(self, nvml, cuda_uuid: str, interval_s: float):
        self.nvml, self.cuda_uuid, self.interval_s = nvml, cuda_uuid, interval_s
        self.samples: list[tuple[float, float | None]] = []   # (seconds since the start, GPU-Util % or None)

    def __enter__(self) -> "UtilSampler":
        nv = self.nvml
        nv.nvmlInit()
        try:
            gpu = nv.nvmlDeviceGetHandleByUUID("GPU-%s" % self.cuda_uuid)
        except nv.NVMLError:
            nv.nvmlShutdown()
            raise
        start = time.monotonic()

        def sample() -> None:
            try:
                reading = nv.nvmlDeviceGetUtilizationRates(gpu)
                self.samples.append((time.monotonic() - start, float(reading.gpu)))
            except nv.NVMLError:
                self.samples.append((time.monotonic() - start, None))

        self._sample = sample
        sample()
        self._poller = _Poller(sample, self.interval_s)
        self._poller.start()
        return self

    def __exit__(self, *exc_info):
        self._poller.stopping.set()
        self._poller.join()
        try:
            self._sample()
        finally:
            self.nvml.nvmlShutdown()
        return None
'''),
    Alternative(cell="day02_util_sampler",
                why="the usual 'read, then wait' thread loop (while True: read; if stop.wait(interval_s): break): "
                    "with the start sample of __enter__, the thread's first read also falls at t = 0",
                source='''class UtilSampler:
    """Samples one GPU's GPU-Util (%) through NVML every `interval_s` seconds on a daemon thread."""

    def __init__(self, nvml, cuda_uuid: str, interval_s: float):
        self.nvml, self.cuda_uuid, self.interval_s = nvml, cuda_uuid, interval_s
        self.samples: list[tuple[float, float | None]] = []   # (seconds since the start, GPU-Util % or None)

    def _read(self) -> None:
        try:
            util = float(self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)
        except self.nvml.NVMLError:
            util = None
        self.samples.append((time.perf_counter() - self.t0, util))

    def __enter__(self) -> "UtilSampler":
        self.nvml.nvmlInit()
        try:
            self.handle = self.nvml.nvmlDeviceGetHandleByUUID("GPU-" + self.cuda_uuid)
        except Exception:
            self.nvml.nvmlShutdown()
            raise
        self.t0 = time.perf_counter()
        self._read()
        self.stop = threading.Event()

        def loop():
            while True:
                self._read()
                if self.stop.wait(self.interval_s):
                    break

        self.th = threading.Thread(target=loop, daemon=True)
        self.th.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.th.join()
        try:
            self._read()
        finally:
            self.nvml.nvmlShutdown()
        return False
'''),
]

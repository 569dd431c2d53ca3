"""A metric logger in the spirit of torchvision's references (``SmoothedValue``/``MetricLogger``), without a host
sync every step: values may be device tensors; they are accumulated on the device and read once per print."""
from __future__ import annotations

import time
from collections import deque
from typing import Iterable, Iterator

import torch


class SmoothedValue:
    """A window of recent values (for the smoothed median) plus the running total (for the global average).

    ``update`` accepts floats or 0-d tensors; tensors stay on their device until :meth:`sync` reads them all at
    once, which is the only host synchronisation.
    """

    def __init__(self, window: int = 20, fmt: str = "{median:.4f} ({global_avg:.4f})"):
        self.window = window
        self.fmt = fmt
        self.pending: list[tuple[torch.Tensor | float, int]] = []
        self.values: deque[float] = deque(maxlen=window)
        self.total = 0.0
        self.count = 0

    def update(self, value: torch.Tensor | float, n: int = 1) -> None:
        if isinstance(value, torch.Tensor) and value.numel() != 1:
            raise ValueError(f"update takes one number (a float or a 0-d tensor), got a tensor of shape "
                             f"{tuple(value.shape)}: reduce it first, e.g. loss.mean()")
        self.pending.append((value.detach() if isinstance(value, torch.Tensor) else value, n))

    def sync(self) -> None:
        """Move pending values to the host: one ``torch.stack(...).tolist()`` per device, whatever their number."""
        if not self.pending:
            return
        by_device: dict[torch.device, list[tuple[int, torch.Tensor]]] = {}
        for i, (v, _) in enumerate(self.pending):
            if isinstance(v, torch.Tensor):
                by_device.setdefault(v.device, []).append((i, v))
        host = [v if not isinstance(v, torch.Tensor) else None for v, _ in self.pending]
        for tensors in by_device.values():               # torch.stack needs one device
            stacked = torch.stack([v.detach().float().reshape(()) for _, v in tensors]).tolist()
            for (i, _), value in zip(tensors, stacked):
                host[i] = value
        for value, (_, n) in zip(host, self.pending):
            self.values.append(float(value))
            self.total += float(value) * n
            self.count += n
        self.pending.clear()

    @property
    def median(self) -> float:
        self.sync()
        return float(torch.tensor(list(self.values)).median()) if self.values else float("nan")

    @property
    def global_avg(self) -> float:
        self.sync()
        return self.total / self.count if self.count else float("nan")

    @property
    def value(self) -> float:
        self.sync()
        return self.values[-1] if self.values else float("nan")

    def __str__(self) -> str:
        return self.fmt.format(median=self.median, global_avg=self.global_avg, value=self.value)


class MetricLogger:
    """``for batch in logger.log_every(loader, 50, header): ... logger.update(loss=loss, lr=lr)``."""

    def __init__(self, delimiter: str = "  ", printer=print):
        self.meters: dict[str, SmoothedValue] = {}
        self.delimiter = delimiter
        self.printer = printer
        self.lines: list[str] = []

    def update(self, n: int = 1, **values: torch.Tensor | float) -> None:
        for name, value in values.items():
            self.meters.setdefault(name, SmoothedValue()).update(value, n)

    def __getitem__(self, name: str) -> SmoothedValue:
        return self.meters[name]

    def __str__(self) -> str:
        return self.delimiter.join(f"{name}: {meter}" for name, meter in self.meters.items())

    def log_every(self, iterable: Iterable, print_freq: int, header: str = "") -> Iterator:
        """Yield from ``iterable``; every ``print_freq`` items print the meters and the mean time per item (ms/it).

        The clock is read after the meters' host reads (one per meter and device), which wait for the device: on a
        GPU each window's time includes the work it queued rather than leaving it to the next window."""
        if print_freq < 1:
            raise ValueError(f"print_freq must be >= 1, got {print_freq}")
        start = last = time.perf_counter()
        i = 0
        for i, item in enumerate(iterable, start=1):
            yield item
            if i % print_freq == 0:
                meters = str(self)
                now = time.perf_counter()
                line = f"{header} [{i}]{self.delimiter}{meters}{self.delimiter}{(now - last) / print_freq * 1e3:.1f} ms/it"
                self.lines.append(line)
                self.printer(line)
                last = now
        total = time.perf_counter() - start
        line = f"{header} done: {i} iterations in {total:.2f} s"
        self.lines.append(line)
        self.printer(line)

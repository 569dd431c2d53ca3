"""A memory timeline on any device: the bytes of live tensors after every operation, by part, and where the peak is.

On a CUDA GPU, PyTorch records every allocation itself (``torch.cuda.memory._record_memory_history`` and a
snapshot, drawn at https://pytorch.org/memory_viz) and ``torch.cuda.max_memory_allocated`` gives the peak. A CPU
has neither, so :class:`LiveTensorBytes` builds the same picture from the framework's side: a
``TorchDispatchMode`` sees every tensor an operation returns, and a weak reference to each tensor's storage says
when it is freed. The sum of the live storages after each operation is the curve; its maximum is the peak.

It counts what the caching allocator would have to hold for tensors, on whatever device the tensors are, so the
same code gives the same curve on a CPU and on a GPU. It does not see memory inside an operation's kernel
(cuDNN/cuBLAS workspace, oneDNN scratch buffers), the CUDA allocator's rounding to 512-byte blocks, or its cached
free blocks: on a GPU compare it with ``max_memory_allocated``, which sees the first two.

Two things no operator reports are handled too: a ``DTensor`` (FSDP2's sharded parameters, gradients and optimizer
state) counts as the storage of its local shard, and a storage resized in place (FSDP2 frees each gathered
parameter with ``untyped_storage().resize_(0)`` after use and re-allocates it with ``resize_(size)`` before the next
all-gather) counts at its new size from that moment: the tracker wraps ``torch.UntypedStorage.resize_`` while it is
active.

Sizes are bytes; each storage is counted once, whatever number of tensors (views) share it.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Callable, Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

#: A named group of tensors whose bytes each timeline point reports (e.g. ``"gradients"``): a function that
#: returns the group's tensors as they are now (``None`` entries are skipped, e.g. a freed ``p.grad``).
Groups = dict[str, Callable[[], Iterable[torch.Tensor | None]]]


@dataclass
class TimelinePoint:
    """The state after one operation (or at a :meth:`LiveTensorBytes.mark`)."""

    index: int                 # position in the timeline
    op: str                    # the operation that just ran ("" for a mark)
    phase: str                 # the phase set by the last mark, e.g. "forward"
    live_bytes: int            # bytes of all live storages the tracker knows
    groups: dict[str, int] = field(default_factory=dict)  # bytes of each named group among them

    @property
    def other_bytes(self) -> int:
        """Live bytes outside every named group (activations, the batch, temporaries)."""
        return self.live_bytes - sum(self.groups.values())


@dataclass
class _Storage:
    nbytes: int
    born: int                  # index of the first point at which it is live
    died: int | None = None    # index of the first point at which it is gone
    group: str | None = None


def _storage(t: torch.Tensor) -> torch.UntypedStorage | None:
    if hasattr(t, "to_local") and hasattr(t, "device_mesh"):     # a DTensor: the bytes are its local shard's
        with torch.no_grad():
            t = t.to_local()
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):   # tensors without an ordinary storage (sparse, nested, fake)
        return None


class LiveTensorBytes(TorchDispatchMode):
    """Track the bytes of live tensor storages, operation by operation, on any device.

    ``with LiveTensorBytes(groups=...) as live:`` first :meth:`track` the tensors that already exist (parameters,
    gradients, optimizer state, the batch: the mode only sees tensors created inside it), then :meth:`mark` each
    phase (``live.mark("forward")``) and run the code. Afterwards ``live.timeline`` holds one
    :class:`TimelinePoint` per operation and mark, ``live.peak`` the point with the most live bytes.

    ``groups`` names sets of tensors whose bytes each point reports separately; what is live but in no group is
    :attr:`TimelinePoint.other_bytes`. A storage joins a group when one of the group's tensors holds it at a mark or
    at every ``group_every``-th operation (asking the groups walks their tensors, which costs more than a small
    model's operations), and then counts in that group for its whole life. So a group tensor that is created and
    freed between two such moments counts as "other": mark the phases that create group tensors (a gradient lives
    from backward to the next ``zero_grad``, optimizer state for good).
    """

    def __init__(self, groups: Groups | None = None, group_every: int = 1) -> None:
        super().__init__()
        if group_every < 1:
            raise ValueError(f"group_every must be >= 1, got {group_every}")
        self.groups: Groups = dict(groups or {})
        self.group_every = group_every
        self.phase = ""
        self.live_bytes = 0
        self._points: list[TimelinePoint] = []
        self._storages: list[_Storage] = []
        self._live: dict[int, tuple[weakref.ref, int]] = {}   # id(storage) -> (weak reference, serial number)
        self._keys: dict[int, tuple[weakref.ref, int]] = {}   # id(tensor) -> (weak reference, id(storage))
        self._filled = 0                                      # points whose groups are already summed

    # ------------------------------------------------------------------------------------------ bookkeeping
    def _add(self, t: torch.Tensor) -> None:
        st = _storage(t)
        if st is not None and id(st) not in self._live:
            self._add_storage(st, st.nbytes())

    def _add_storage(self, st: torch.UntypedStorage, nbytes: int) -> None:
        serial = len(self._storages)
        self._storages.append(_Storage(nbytes, born=len(self._points)))

        def freed(_ref: weakref.ref, key: int = id(st)) -> None:
            live = self._live.get(key)
            if live is not None and live[0] is _ref:
                self._end(key)

        self._live[id(st)] = (weakref.ref(st, freed), serial)
        self.live_bytes += nbytes

    def _end(self, key: int) -> None:
        _ref, serial = self._live.pop(key)
        record = self._storages[serial]
        record.died = len(self._points)
        self.live_bytes -= record.nbytes

    def _resized(self, st: torch.UntypedStorage, nbytes: int) -> None:
        # A resize in place ends the old size's life and starts the new one's (same storage, new record).
        group = None
        if id(st) in self._live:
            group = self._storages[self._live[id(st)][1]].group
            self._end(id(st))
        if nbytes > 0:
            self._add_storage(st, nbytes)
            self._storages[-1].group = group
        self._record("resize_")

    def track(self, tensors: Iterable[torch.Tensor | None]) -> None:
        """Count tensors that existed before the tracker started (parameters, gradients, state, inputs)."""
        for t in tensors:
            if isinstance(t, torch.Tensor):
                self._add(t)

    def _storage_id(self, t: torch.Tensor) -> int | None:
        cached = self._keys.get(id(t))                 # groups list the same parameters at every visit
        if cached is not None and cached[0]() is t:
            return cached[1]
        st = _storage(t)
        if st is None:
            return None
        self._keys[id(t)] = (weakref.ref(t), id(st))
        return id(st)

    def _label_groups(self) -> None:
        for name, get in self.groups.items():
            for t in get():
                key = self._storage_id(t) if isinstance(t, torch.Tensor) else None
                live = self._live.get(key) if key is not None else None
                if live is not None and self._storages[live[1]].group is None:
                    self._storages[live[1]].group = name

    def _record(self, op: str) -> None:
        index = len(self._points)
        if self.groups and (op == "" or index % self.group_every == 0):
            self._label_groups()
        self._points.append(TimelinePoint(index, op, self.phase, self.live_bytes))

    def mark(self, phase: str) -> None:
        """Start a new phase (``"forward"``, ``"backward"``, ...) and record a point with the bytes live now."""
        self.phase = phase
        self._record("")

    # ------------------------------------------------------------------------------------------ results
    @property
    def timeline(self) -> list[TimelinePoint]:
        """Every point so far, each with the bytes of every group among its live storages."""
        if self._filled < len(self._points):
            n = len(self._points)
            for point in self._points:
                point.groups = {name: 0 for name in self.groups}
            change: dict[str, list[int]] = {name: [0] * (n + 1) for name in self.groups}
            for s in self._storages:
                if s.group is not None and s.born < n:
                    change[s.group][s.born] += s.nbytes
                    change[s.group][min(s.died if s.died is not None else n, n)] -= s.nbytes
            for name, delta in change.items():
                running = 0
                for i, point in enumerate(self._points):
                    running += delta[i]
                    point.groups[name] = running
            self._filled = n
        return self._points

    @property
    def peak(self) -> TimelinePoint:
        """The point with the most live bytes (the first, if several tie)."""
        if not self._points:
            raise ValueError("the timeline is empty: run something inside the tracker")
        return max(self.timeline, key=lambda p: p.live_bytes)

    def peak_in(self, phase: str) -> TimelinePoint:
        """The point with the most live bytes among those of ``phase``."""
        points = [p for p in self.timeline if p.phase == phase]
        if not points:
            raise ValueError(f"no point in phase {phase!r}; phases seen: {sorted({p.phase for p in self._points})}")
        return max(points, key=lambda p: p.live_bytes)

    def unclaimed_at(self, point: TimelinePoint, top: int = 3) -> list[tuple[int, str, str]]:
        """The largest storages live at ``point`` that no group claims, as ``(bytes, operation that made it, its
        phase)``, largest first: what :attr:`TimelinePoint.other_bytes` is made of. A storage given to :meth:`track`
        is labelled with the point recorded after it: ``""`` when a mark follows the ``track`` call."""
        self.timeline                                   # labels every storage's group
        alive = [s for s in self._storages if s.group is None and s.born <= point.index
                 and (s.died is None or s.died > point.index)]
        alive.sort(key=lambda s: -s.nbytes)
        return [(s.nbytes, self._points[s.born].op, self._points[s.born].phase) for s in alive[:top]]

    def __enter__(self) -> "LiveTensorBytes":
        original, tracker = torch.UntypedStorage.resize_, self

        def resize_(storage: torch.UntypedStorage, size: int):
            out = original(storage, size)
            tracker._resized(storage, storage.nbytes())
            return out

        self._original_resize = original
        torch.UntypedStorage.resize_ = resize_
        try:
            return super().__enter__()
        except BaseException:
            torch.UntypedStorage.resize_ = original
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            super().__exit__(*exc)
        finally:
            torch.UntypedStorage.resize_ = self._original_resize

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor):
            self._add(out)
        else:
            for t in (out if isinstance(out, (tuple, list)) else tree_flatten(out)[0]):
                if isinstance(t, torch.Tensor):
                    self._add(t)
        self._record(func.overloadpacket.__name__)
        return out

"""utils.memory_timeline.LiveTensorBytes: live tensor bytes, op by op, checked against byte counts done by hand."""
from __future__ import annotations

import gc

import pytest
import torch
from torch import nn

from utils.memory_timeline import LiveTensorBytes


def test_counts_new_tensors_and_frees():
    with LiveTensorBytes() as live:
        a = torch.zeros(1000)                       # 4,000 bytes
        b = a + 1                                   # 4,000 more
        assert live.live_bytes == 8000
        del b
        assert live.live_bytes == 4000, "a freed storage leaves the count at once"
        v = a[10:20]                                # a view: the same storage, counted once
        assert live.live_bytes == 4000
        del a
        assert live.live_bytes == 4000, "the view keeps the whole storage alive"
        del v
    assert live.live_bytes == 0
    assert live.peak.live_bytes == 8000 and live.peak.op == "add"


def test_tracked_tensors_and_saved_activations():
    x = torch.randn(1000, requires_grad=True)     # 4,000 bytes, made before the tracker
    with LiveTensorBytes() as live:
        live.track([x, x])                          # tracking twice counts once
        y = x.exp().sin()                           # exp's output is saved (by exp and by sin) after its Python
        assert live.live_bytes == 12000             # object is gone: x, exp's output, y
        gc.collect()
        assert live.live_bytes == 12000
        del y                                       # the graph goes, and with it the saved output
        assert live.live_bytes == 4000


def test_groups_marks_and_phase_peaks():
    model = nn.Linear(100, 10)                      # 1,010 parameters: 4,040 bytes
    params = list(model.parameters())
    with LiveTensorBytes({"parameters": lambda: params, "gradients": lambda: [p.grad for p in params]}) as live:
        live.track(params)
        live.mark("forward")
        loss = model(torch.ones(4, 100)).sum()
        live.mark("backward")
        loss.backward()
        live.mark("zero_grad")
        model.zero_grad(set_to_none=True)
        live.mark("end")
    first, end = live.timeline[0], live.timeline[-1]
    assert (first.phase, first.op, first.groups) == ("forward", "", {"parameters": 4040, "gradients": 0})
    before_zeroing = next(p for p in live.timeline if p.phase == "zero_grad")
    assert before_zeroing.groups["gradients"] == 4040, "backward wrote one gradient per parameter"
    assert live.peak_in("backward").live_bytes >= before_zeroing.live_bytes
    assert end.groups["gradients"] == 0, "set_to_none frees the gradients without any operation"
    assert end.other_bytes == end.live_bytes - 4040
    with pytest.raises(ValueError, match="no point in phase"):
        live.peak_in("optimizer")


def test_empty_timeline_has_no_peak():
    with pytest.raises(ValueError, match="empty"):
        LiveTensorBytes().peak


def test_groups_asked_every_k_operations_count_each_storage_for_its_whole_life():
    model = nn.Sequential(nn.Linear(50, 50), nn.ReLU(), nn.Linear(50, 5))
    params = list(model.parameters())
    runs = []
    for every in (1, 7):
        model.zero_grad(set_to_none=True)
        with LiveTensorBytes({"gradients": lambda: [p.grad for p in params]}, group_every=every) as live:
            live.track(params)
            live.mark("forward")
            loss = model(torch.ones(8, 50)).sum()
            live.mark("backward")
            loss.backward()
            live.mark("end")
        runs.append(live)
    full, sparse = runs
    assert [(p.live_bytes, p.groups) for p in full.timeline] == [(p.live_bytes, p.groups) for p in sparse.timeline]
    grads = [p.groups["gradients"] for p in full.timeline if p.phase == "backward"]
    assert grads == sorted(grads) and grads[-1] == sum(p.numel() * 4 for p in params), \
        "each gradient counts from the operation that made it"
    with pytest.raises(ValueError, match="group_every"):
        LiveTensorBytes(group_every=0)


def test_a_storage_resized_in_place_counts_at_its_new_size():
    # FSDP2 frees a gathered parameter with untyped_storage().resize_(0) and brings it back with resize_(size): no
    # operator reports either, so the tracker follows UntypedStorage.resize_ while it is active.
    kept = torch.zeros(1000)                        # 4,000 bytes, made before the tracker
    with LiveTensorBytes({"kept": lambda: [kept]}) as live:
        live.track([kept])
        live.mark("free")
        kept.untyped_storage().resize_(0)
        assert live.live_bytes == 0
        live.mark("gather")
        kept.untyped_storage().resize_(4000)
        assert live.live_bytes == 4000
        live.mark("end")
    assert [p.live_bytes for p in live.timeline if p.op == "resize_"] == [0, 4000]
    assert live.timeline[-1].groups == {"kept": 4000}, "the storage keeps its group across the resize"
    before = torch.UntypedStorage.resize_
    with LiveTensorBytes():
        assert torch.UntypedStorage.resize_ is not before
    assert torch.UntypedStorage.resize_ is before, "leaving the tracker restores resize_"


def test_unclaimed_at_names_what_no_group_holds_at_the_peak():
    w = torch.ones(100)
    with LiveTensorBytes({"weights": lambda: [w]}) as live:
        live.track([w])
        live.mark("step")
        big = w.repeat(10)                          # 4,000 bytes, in no group
        small = w * 2                               # 400 bytes
        del big, small
    peak = live.peak
    assert peak.op == "mul" and peak.other_bytes == 4400
    assert live.unclaimed_at(peak) == [(4000, "repeat", "step"), (400, "mul", "step")]


def test_a_dtensor_counts_as_its_local_shard(tmp_path):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        sharded = distribute_tensor(torch.zeros(8, 100), init_device_mesh("cpu", (1,)), [Shard(0)])
        with LiveTensorBytes() as live:
            live.track([sharded])
            assert live.live_bytes == sharded.to_local().untyped_storage().nbytes() == 3200
            doubled = sharded * 2                   # a DTensor out of an operation: its local shard is counted
            assert live.live_bytes == 6400
            del doubled
    finally:
        dist.destroy_process_group()

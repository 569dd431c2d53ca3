"""utils.host_syncs: the sync counter counts the caller's syncs, not PyTorch's, and restores Tensor on exit."""
import math
import os

import pytest
import torch

from utils.host_syncs import SYNC_METHODS, count_host_syncs


def test_counts_each_syncing_call_by_method():
    t = torch.tensor([1.0, 2.0])
    with count_host_syncs() as syncs:
        t.sum().item()
        float(t.norm())
        if t.sum() > 0:
            pass
        f"{t[0]:.1f}"
        t.tolist()
        t * 2 + t.norm()                       # device work only: no sync
    assert syncs["n"] == 5
    assert syncs["by_method"] == {"item": 1, "__float__": 1, "__bool__": 1, "__format__": 1, "tolist": 1}


def test_reading_a_host_copy_is_not_a_second_sync_but_reading_a_changed_tensor_is():
    a, b = torch.tensor(1.0), torch.tensor(2.0)
    with count_host_syncs() as one_copy:
        totals = torch.stack([a, b]).cpu()     # the one wait on a GPU
        x, y = totals.tolist()                 # a host tensor: nothing to wait for
        float(totals[0])                       # a view of it: nothing either
    assert (x, y) == (1.0, 2.0) and one_copy["n"] == 1 and one_copy["by_method"] == {"cpu": 1}
    with count_host_syncs() as two_reads:
        a.item()
        b.item()
    assert two_reads["n"] == 2
    running = torch.zeros(())
    with count_host_syncs() as changed:
        running.cpu()                          # on a CPU run .cpu() returns the tensor itself...
        running += 1                           # ...which then changes on the device: the next read waits again
        running.item()
    assert changed["n"] == 2


def test_inference_tensors_which_have_no_version_counter_are_counted_on_every_read():
    with torch.inference_mode(), count_host_syncs() as syncs:
        logits = torch.tensor([[0.2, 0.8], [0.9, 0.1]])
        predictions = logits.argmax(1).cpu()
        predictions.tolist()                   # cannot tell whether it changed since the copy: counted
    assert syncs["n"] == 2 and syncs["by_method"] == {"cpu": 1, "tolist": 1}


def test_library_internal_syncs_are_not_counted():
    model = torch.nn.Linear(3, 2)
    model(torch.randn(4, 3)).sum().backward()
    with count_host_syncs() as syncs:
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
    assert syncs["n"] == 0 and math.isfinite(float(norm))
    import torchvision
    with count_host_syncs() as syncs:    # make_grid(normalize=True) reads the batch's min and max: torchvision's
        torchvision.utils.make_grid(torch.rand(2, 3, 4, 4), normalize=True)
    assert syncs["n"] == 0


def test_library_folders_end_with_a_separator():
    # A package that only begins with "torch" is the caller's code, not the library's.
    from utils.host_syncs import LIBRARY_DIRS
    assert LIBRARY_DIRS and all(d.endswith(os.sep) for d in LIBRARY_DIRS)
    assert not any("/site-packages/torchfoo/x.py".startswith(d) for d in LIBRARY_DIRS)


def test_methods_restored_even_after_an_error():
    before = {m: (getattr(torch.Tensor, m), m in torch.Tensor.__dict__) for m in SYNC_METHODS}
    with pytest.raises(RuntimeError):
        with count_host_syncs():
            raise RuntimeError("boom")
    after = {m: (getattr(torch.Tensor, m), m in torch.Tensor.__dict__) for m in SYNC_METHODS}
    assert after == before
    with count_host_syncs() as syncs:
        pass
    assert syncs == {"n": 0, "by_method": {}}

"""utils.tf32: the TF32 switches are process-global state, so these tests run on a CPU build: the flags are
stored and checked the same way whether or not a GPU is present. Each test starts from and returns to PyTorch's
defaults."""
from __future__ import annotations

import pytest
import torch

from utils.tf32 import has_fp32_precision_api, restore_tf32_flags, set_tf32, tf32_disabled, tf32_flags, tf32_in_use

NEW_API = has_fp32_precision_api()


def getters() -> dict[str, object]:
    """What every public getter answers now; ``"raises"`` where torch refuses (mixed legacy and new API)."""
    out: dict[str, object] = {}
    reads = {"get_float32_matmul_precision": torch.get_float32_matmul_precision,
             "cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
             "cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32}
    if NEW_API:
        reads.update({"cuda.matmul.fp32_precision": lambda: torch.backends.cuda.matmul.fp32_precision,
                      "cudnn.conv.fp32_precision": lambda: torch.backends.cudnn.conv.fp32_precision,
                      "cudnn.rnn.fp32_precision": lambda: torch.backends.cudnn.rnn.fp32_precision,
                      "mkldnn.matmul.fp32_precision": lambda: torch.backends.mkldnn.matmul.fp32_precision})
    for name, read in reads.items():
        try:
            out[name] = read()
        except RuntimeError:
            out[name] = "raises"
    return out


def reset_to_defaults() -> None:
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = True
    if NEW_API:
        torch.backends.cuda.matmul.fp32_precision = "none"
        torch.backends.mkldnn.matmul.fp32_precision = "none"
        torch.backends.cudnn.conv.fp32_precision = "tf32"
        torch.backends.cudnn.rnn.fp32_precision = "tf32"


@pytest.fixture(autouse=True)
def defaults():
    reset_to_defaults()
    yield
    reset_to_defaults()


def legacy_high():
    torch.set_float32_matmul_precision("high")


def legacy_medium_no_cudnn():
    torch.set_float32_matmul_precision("medium")
    torch.backends.cudnn.allow_tf32 = False


def new_api_only():                       # the documented new API, used alone: legacy getters then raise
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    torch.backends.cudnn.conv.fp32_precision = "ieee"


STATES = {"defaults": lambda: None, "legacy high": legacy_high, "legacy medium, cudnn off": legacy_medium_no_cudnn}
if NEW_API:
    STATES["new API only"] = new_api_only


@pytest.mark.parametrize("state", list(STATES))
def test_tf32_disabled_turns_everything_off_and_restores_every_getter(state):
    STATES[state]()
    before = getters()
    with tf32_disabled():
        inside = getters()
        assert tf32_in_use() == {"matmul": False, "conv": False}
    assert getters() == before, f"not restored after {state!r}"
    # Inside, nothing raises and everything says full fp32, whatever the process had set before.
    assert inside["get_float32_matmul_precision"] == "highest"
    assert inside["cuda.matmul.allow_tf32"] is False and inside["cudnn.allow_tf32"] is False
    if NEW_API:
        assert {inside[k] for k in ("cuda.matmul.fp32_precision", "cudnn.conv.fp32_precision",
                                    "cudnn.rnn.fp32_precision", "mkldnn.matmul.fp32_precision")} == {"ieee"}


def test_defaults_are_what_the_course_teaches():
    # Matmuls in full fp32, cuDNN convolutions in TF32: why a GPU "fp32" conv reference needs tf32_disabled().
    assert tf32_in_use() == {"matmul": False, "conv": True}


@pytest.mark.skipif(not NEW_API, reason="the fp32_precision API arrived in PyTorch 2.9")
def test_mixing_the_apis_makes_legacy_getters_raise_and_set_tf32_repairs_it():
    new_api_only()
    assert getters()["cuda.matmul.allow_tf32"] == "raises"
    set_tf32(True)
    g = getters()
    assert "raises" not in g.values()
    assert g["cuda.matmul.allow_tf32"] is True and g["cudnn.allow_tf32"] is True
    assert g["cuda.matmul.fp32_precision"] == g["cudnn.conv.fp32_precision"] == "tf32"
    set_tf32(False)
    g = getters()
    assert "raises" not in g.values() and g["get_float32_matmul_precision"] == "highest"
    assert g["cudnn.conv.fp32_precision"] == "ieee" and g["cudnn.allow_tf32"] is False


def test_restores_even_when_the_block_raises():
    legacy_high()
    before = getters()
    with pytest.raises(ZeroDivisionError):
        with tf32_disabled():
            1 / 0
    assert getters() == before


def test_cpu_numerics_are_unchanged_and_bad_input_is_rejected():
    x = torch.randn(64, 64, generator=torch.Generator().manual_seed(0))
    expected = x @ x
    with tf32_disabled():
        assert torch.equal(x @ x, expected)
    with pytest.raises(TypeError):
        set_tf32("yes")
    with pytest.raises(KeyError):
        restore_tf32_flags({"cudnn.benchmark": True})


def test_snapshot_is_a_plain_dict_that_round_trips():
    legacy_medium_no_cudnn()
    snap = tf32_flags()
    set_tf32(True)
    assert tf32_flags() != snap
    restore_tf32_flags(snap)
    assert tf32_flags() == snap

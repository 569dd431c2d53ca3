"""instructor.spies: the hidden tests' watches record what an answer did, and only that."""
import pytest
import torch
from torch import nn

from instructor.spies import recording_moves, recording_op_dtypes, same_device, was_moved


def test_recording_moves_sees_each_spelling_of_a_device_move_and_nothing_else():
    x, y = torch.ones(2), torch.ones(2)
    original_to = torch.Tensor.to
    with recording_moves() as moves:
        x.to("cpu")
        y.to(device=torch.device("cpu"), non_blocking=True)
        x.to(torch.float64)            # a dtype, not a move
        x.to(y)                        # another tensor's device and dtype: not a named device
        x.cpu()                        # not recorded unless asked
    assert [(o is x, o is y, d) for o, d in moves] == [(True, False, torch.device("cpu")),
                                                        (False, True, torch.device("cpu"))]
    assert torch.Tensor.to is original_to, "the patch is undone on exit"


def test_recording_moves_restores_the_methods_when_the_answer_raises():
    original = (torch.Tensor.to, torch.Tensor.cpu, nn.Module.to)
    with pytest.raises(RuntimeError, match="answer failed"):
        with recording_moves(cpu_calls=True, modules=True):
            raise RuntimeError("answer failed")
    assert (torch.Tensor.to, torch.Tensor.cpu, nn.Module.to) == original


def test_cpu_calls_and_modules_are_recorded_when_asked():
    x, layer = torch.ones(2), nn.Linear(2, 2)
    with recording_moves(cpu_calls=True, modules=True) as moves:
        out = layer.to("cpu")(x).cpu()
    assert was_moved(moves, layer, "cpu") and not was_moved(moves, x, "cpu")
    assert any(o is not x and d.type == "cpu" for o, d in moves), out


def test_was_moved_matches_by_identity_and_treats_an_indexless_device_as_the_current_one():
    x, copy = torch.ones(2), torch.ones(2)
    moves = [(x, torch.device("cuda"))]
    assert was_moved(moves, x, "cuda:0") and was_moved(moves, x, torch.device("cuda"))
    assert not was_moved(moves, copy, "cuda"), "an equal tensor is not the same tensor"
    assert not was_moved(moves, x, "cpu")
    assert same_device("cuda:1", "cuda") and not same_device("cuda:1", "cuda:0")


def test_recording_op_dtypes_sees_the_dtype_autocast_ran_the_op_in():
    torch.manual_seed(0)
    model, x, y = nn.Linear(8, 4), torch.randn(6, 8), torch.randint(0, 4, (6,))
    with recording_op_dtypes({"_log_softmax"}) as inside:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            nn.CrossEntropyLoss()(model(x), y).backward()
    with recording_op_dtypes(["_log_softmax"]) as outside:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x)
        nn.functional.cross_entropy(logits, y).backward()
    assert inside == [("_log_softmax", torch.float32)]        # autocast's fp32 list; the backward op is not named
    assert outside == [("_log_softmax", torch.bfloat16)]


def test_recording_op_dtypes_refuses_a_bare_string():
    with pytest.raises(TypeError, match="collection of op names"):
        with recording_op_dtypes("_log_softmax"):
            pass

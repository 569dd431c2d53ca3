"""instructor.spies: the hidden tests' watches record what an answer did, and only that."""
import pytest
import torch
from torch import nn

from instructor.spies import grad_enabled_after, recording_moves, recording_op_dtypes, replacing, same_device, was_moved


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


def _answer_namespace(source: str) -> dict:
    namespace: dict = {}
    exec(source, namespace)          # a learner's cell: its own globals, as a notebook has
    return namespace


def test_replacing_reaches_a_name_the_answer_imported_and_leaves_the_tests_own_reference_real():
    import os
    ns = _answer_namespace(
        "import os\nfrom os import getcwd\nfrom os import getcwd as cwd\n"
        "def helper():\n    return cwd()\n"
        "def answer():\n    return (os.getcwd(), getcwd(), helper())\n")
    ns["_real_getcwd"] = os.getcwd                       # the test's own handle, never read by the answer
    with replacing(ns["answer"], (os, "getcwd", lambda: "fake")):
        assert ns["answer"]() == ("fake", "fake", "fake")
        assert ns["_real_getcwd"] is not None and ns["_real_getcwd"]() != "fake"
    assert ns["answer"]()[1] != "fake" and os.getcwd() != "fake", "everything restored on exit"


def test_replacing_restores_when_the_answer_raises_and_refuses_a_non_function():
    import os
    ns = _answer_namespace("from os import getcwd\ndef answer():\n    getcwd()\n    raise KeyError('boom')\n")
    real = ns["getcwd"]
    with pytest.raises(KeyError):
        with replacing(ns["answer"], (os, "getcwd", lambda: "fake")):
            ns["answer"]()
    assert ns["getcwd"] is real and os.getcwd is real
    with pytest.raises(TypeError, match="learner's function"):
        with replacing(len, (os, "getcwd", lambda: "fake")):
            pass


def test_learner_copies_never_import_the_instructor_package():
    # The learner release has no instructor/ folder: a spy imported outside a hidden test would fail at home.
    import json
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    offenders = []
    for notebook in sorted((root / "days").glob("day*/*.ipynb")):
        for cell in json.loads(notebook.read_text())["cells"]:
            if "instructor" in "".join(cell["source"]) and cell["cell_type"] == "code":
                offenders.append(f"{notebook.relative_to(root)}:{cell.get('id')}")
    assert not offenders, f"move these imports of instructor below ### BEGIN HIDDEN TESTS: {offenders}"


def test_nll_loss_is_the_op_every_spelling_of_the_loss_reaches_in_fp32_inside_autocast():
    torch.manual_seed(0)
    model, x, y = nn.Linear(8, 4), torch.randn(6, 8), torch.randint(0, 4, (6,))
    spellings = [lambda: nn.functional.cross_entropy(model(x), y),
                 lambda: nn.functional.nll_loss(nn.functional.log_softmax(model(x), dim=1), y)]
    for loss in spellings:
        with recording_op_dtypes({"nll_loss_forward"}) as ops:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                value = loss()
        assert ops == [("nll_loss_forward", torch.float32)] and value.dtype == torch.float32


def test_replacing_sees_through_a_decorated_answer():
    import os
    ns = _answer_namespace("import torch\nfrom os import getcwd\n"
                           "@torch.no_grad()\ndef answer():\n    return getcwd()\n")
    with replacing(ns["answer"], (os, "getcwd", lambda: "fake")):
        assert ns["answer"]() == "fake"
    assert ns["answer"]() != "fake"


def test_recording_moves_records_whether_each_move_asked_for_an_asynchronous_copy():
    x, layer = torch.ones(2), nn.Linear(2, 2)
    with recording_moves(cpu_calls=True, modules=True) as moves:
        x.to("cpu", non_blocking=True)
        x.to("cpu", torch.float32, True)              # to(device, dtype, non_blocking) by position
        x.to(device="cpu")
        x.cpu()
        layer.to("cpu", non_blocking=True)
    assert len(moves) == len(moves.non_blocking)
    assert moves.non_blocking[:4] == [True, True, False, False]
    assert [flag for (obj, _), flag in zip(moves, moves.non_blocking) if obj is layer] == [True]


def _autocast_answer_namespace() -> dict:
    return _answer_namespace(
        "import torch\nfrom torch import autocast\n"
        "def read_device(model, x):\n"
        "    device = next(model.parameters()).device\n"
        "    x = x.to(device)\n"
        "    with autocast(device_type=x.device.type, dtype=torch.bfloat16):\n"
        "        return model(x)\n"
        "def hard_coded(model, x):\n"
        "    x = x.to('cpu')\n"
        "    with torch.autocast('cpu', dtype=torch.bfloat16):\n"
        "        return model(x)\n")


def test_as_if_on_cuda_shows_a_device_read_from_the_model_and_stops_at_autocast():
    from instructor.spies import as_if_on_cuda
    ns = _autocast_answer_namespace()
    model, x = nn.Linear(3, 2), torch.ones(4, 3)
    with as_if_on_cuda(ns["read_device"], model) as run:
        ns["read_device"](model, x)
        raise AssertionError("the fake autocast must end the run")
    assert run.autocast_device_types == ["cuda"] and run.move_targets == ["cuda"]
    assert next(model.parameters()).device.type == "cpu", "the model's own parameters are back after the block"
    assert torch.Tensor.to.__name__ == "to" and ns["autocast"] is torch.autocast, "the patches are undone on exit"
    model2 = nn.Linear(3, 2)
    with as_if_on_cuda(ns["hard_coded"], model2) as run2:
        ns["hard_coded"](model2, run2.tensor(x))
    assert run2.autocast_device_types == ["cpu"] and run2.move_targets == ["cpu"], run2.move_targets


def test_as_if_on_cuda_passes_other_errors_through():
    from instructor.spies import as_if_on_cuda
    ns = _autocast_answer_namespace()
    with pytest.raises(ValueError, match="learner's bug"):
        with as_if_on_cuda(ns["read_device"], nn.Linear(3, 2)):
            raise ValueError("learner's bug")
    assert ns["autocast"] is torch.autocast


def test_as_if_on_cuda_keeps_a_cast_batch_on_cuda_and_only_a_move_to_the_cpu_leaves_it():
    from instructor.spies import as_if_on_cuda
    ns = _answer_namespace(
        "import torch\n"
        "def cast_first(model, x):\n"
        "    x = x.to(torch.float32)\n"
        "    with torch.autocast(x.device.type, dtype=torch.bfloat16):\n"
        "        return model(x)\n"
        "def back_to_cpu(model, x):\n"
        "    x = x.to('cpu')\n"
        "    with torch.autocast(x.device.type, dtype=torch.bfloat16):\n"
        "        return model(x)\n")
    model, x = nn.Linear(3, 2), torch.ones(4, 3, dtype=torch.float64)
    with as_if_on_cuda(ns["cast_first"], model) as run:
        ns["cast_first"](model, run.tensor(x))
    assert run.autocast_device_types == ["cuda"] and run.move_targets == []
    with as_if_on_cuda(ns["back_to_cpu"], model) as run:
        ns["back_to_cpu"](model, run.tensor(x))
    assert run.autocast_device_types == ["cpu"] and run.move_targets == ["cpu"]


def test_as_if_on_cuda_runs_on_the_simulated_gpu_so_tensors_made_there_work_and_a_mix_fails():
    from instructor.spies import as_if_on_cuda
    ns = _answer_namespace(
        "import torch\n"
        "def makes_on_device(model, x):\n"
        "    device = next(model.parameters()).device\n"
        "    weights = torch.ones(x.shape[0], device=device)   # made on the GPU: fine there\n"
        "    x = x.to(device) * weights[:, None]\n"
        "    with torch.autocast(x.device.type, dtype=torch.bfloat16):\n"
        "        return model(x)\n"
        "def mixes(model, x):\n"
        "    x = x.to(next(model.parameters()).device) * torch.ones(x.shape[0], 1)   # a CPU tensor meets a GPU one\n"
        "    with torch.autocast(x.device.type, dtype=torch.bfloat16):\n"
        "        return model(x)\n")
    model, x = nn.Linear(3, 2), torch.ones(4, 3)
    with as_if_on_cuda(ns["makes_on_device"], model) as run:
        ns["makes_on_device"](model, x)
    assert run.autocast_device_types == ["cuda"] and run.move_targets == ["cuda"]
    with pytest.raises(RuntimeError, match="same device"):
        with as_if_on_cuda(ns["mixes"], model):
            ns["mixes"](model, x)
    assert type(next(model.parameters())) is nn.Parameter, "the model's own parameters are back after an error"


def test_grad_enabled_after_tells_a_scoped_switch_from_a_global_one_and_always_restores():
    def scoped():
        with torch.no_grad():
            torch.ones(1) * 2

    @torch.inference_mode()
    def decorated():
        return torch.ones(1) * 2

    assert grad_enabled_after(scoped) and grad_enabled_after(decorated)
    assert not grad_enabled_after(lambda: torch.set_grad_enabled(False))
    assert torch.is_grad_enabled()                            # switched back on for the cells below

    def fails():
        torch.set_grad_enabled(False)
        raise ValueError("the answer failed")

    with pytest.raises(ValueError):
        grad_enabled_after(fails)
    assert torch.is_grad_enabled()

"""utils.fault_injection: the faults land where they are armed, and state comparisons name every difference."""
from __future__ import annotations

import signal
import sys

import pytest
import torch

from utils.fault_injection import (FaultyRun, finish, same_bits, start_faulty_run, state_differences,
                                   summarize_differences)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX only")

# Five SGD steps, a torch.save of the weights after each into OUT/step<k>.pt; prints nothing of its own.
SCRIPT = '''import sys
from pathlib import Path

import torch

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for k in range(1, 6):
    optimizer.zero_grad()
    model(torch.ones(3, 4)).sum().backward()
    optimizer.step()
    torch.save({"weight": model.weight.detach().clone(), "step": k}, out / f"step{k}.pt")
'''


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return path


@pytest.mark.slow    # three Python processes that import torch: about 10 s of CPU
def test_each_fault_stops_the_run_where_it_was_armed(script, tmp_path):
    runs = {name: start_faulty_run(script, [tmp_path / name], **fault) for name, fault in
            [("clean", {}), ("after_step_3", {"kill_after_step": 3}), ("in_save_2", {"kill_in_save": 2})]}
    ended = {name: finish(proc, timeout_s=120) for name, proc in runs.items()}

    assert ended["clean"] == FaultyRun(0, 5, ended["clean"].stderr_tail)
    assert sorted(p.name for p in (tmp_path / "clean").iterdir()) == [f"step{k}.pt" for k in range(1, 6)]

    # Killed right after optimizer step 3, before that step's save: two files, and no step count printed.
    rc, steps, _ = ended["after_step_3"]
    assert (rc, steps) == (-signal.SIGKILL, None)
    assert sorted(p.name for p in (tmp_path / "after_step_3").iterdir()) == ["step1.pt", "step2.pt"]

    # Killed half-way through the second save: the first file loads, the second is truncated and does not.
    assert ended["in_save_2"].returncode == -signal.SIGKILL
    folder = tmp_path / "in_save_2"
    assert torch.load(folder / "step1.pt")["step"] == 1
    whole = (tmp_path / "clean" / "step2.pt").stat().st_size
    assert 0 < (folder / "step2.pt").stat().st_size < whole
    with pytest.raises(Exception):
        torch.load(folder / "step2.pt")
    assert not (folder / "step3.pt").exists()


def test_a_run_that_hangs_is_killed_and_reported(tmp_path):
    path = tmp_path / "hang.py"
    path.write_text("import time\ntime.sleep(60)\n")
    ended = finish(start_faulty_run(path), timeout_s=1)
    assert ended.returncode is None and ended.steps is None and "timed out after 1 s" in ended.stderr_tail


@pytest.mark.parametrize("fault, message", [({"kill_after_step": -1}, "use 0"),
                                             ({"kill_after_step": 2, "kill_in_save": 1}, "one fault at a time")])
def test_bad_faults_are_refused(script, fault, message):
    with pytest.raises(ValueError, match=message):
        start_faulty_run(script, **fault)


def test_a_missing_script_says_to_write_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="write the script first"):
        start_faulty_run(tmp_path / "nothing.py")


def test_state_differences_names_every_entry_that_differs():
    a = {"model": {"w": torch.ones(2), "b": torch.zeros(1)}, "rng": [torch.arange(3), torch.arange(3)], "step": 4}
    assert state_differences(a, {"model": {"w": torch.ones(2), "b": torch.zeros(1)},
                                 "rng": [torch.arange(3), torch.arange(3)], "step": 4}) == []
    b = {"model": {"w": torch.ones(2, dtype=torch.float64), "b": torch.zeros(1)},
         "rng": [torch.arange(3) + 1, torch.arange(3) + 1], "step": 5, "extra": 1}
    diffs = state_differences(a, b)
    assert diffs == ["final keys ['extra']", "final['model']['w']", "final['rng'][0]", "final['rng'][1]",
                     "final['step']"]
    assert summarize_differences(diffs) == ("final keys ['extra']; final['model']['w']; final['rng'][*] (2 entries); "
                                            "final['step']")
    assert state_differences([1, 2], [1]) == ["final (length 2 vs 1)"]
    assert state_differences(torch.zeros(2), torch.zeros(3)) == ["final"]      # shapes differ
    assert state_differences(torch.zeros(2), [0.0, 0.0]) == ["final"]          # a tensor against a list


def test_tensors_are_compared_bit_for_bit_not_by_value():
    nan = torch.tensor([float("nan"), 1.0])
    assert state_differences({"w": nan}, {"w": nan.clone()}) == []            # torch.equal says they differ
    assert state_differences(torch.tensor([0.0]), torch.tensor([-0.0])) == ["final"]   # torch.equal says equal
    assert state_differences(torch.zeros(2, dtype=torch.bool), torch.zeros(2, dtype=torch.bool)) == []
    assert state_differences(torch.tensor(3.0), torch.tensor(3.0)) == []        # 0-d
    assert state_differences(torch.zeros(0, 3), torch.zeros(0, 3)) == []       # empty
    assert state_differences(torch.arange(6).reshape(2, 3).t(), torch.arange(6).reshape(2, 3).t().contiguous()) == []
    _view = torch.randn(3, 4)[:1, 0]                                             # one element, stride 4
    assert same_bits(_view, _view.clone()) and not same_bits(_view, _view + 1)
    assert same_bits(torch.tensor([1 + 1j]).conj().imag, torch.tensor([-1.0]))                  # a negative view


@pytest.mark.slow    # a Python process that imports torch: about 3 s of CPU
def test_a_script_that_raises_still_reports_its_steps(tmp_path):
    path = tmp_path / "fails.py"
    path.write_text("import torch\np = torch.nn.Parameter(torch.ones(1))\nopt = torch.optim.SGD([p], lr=0.1)\n"
                    "for _ in range(2):\n    p.grad = torch.ones(1)\n    opt.step()\nraise RuntimeError('boom')\n")
    ended = finish(start_faulty_run(path), timeout_s=120)
    assert (ended.returncode, ended.steps) == (1, 2) and "boom" in ended.stderr_tail


@pytest.mark.filterwarnings("ignore:.*quantized tensor creation functions:UserWarning")
def test_tensors_of_every_kind_a_checkpoint_might_hold_are_compared():
    q = torch.quantize_per_tensor(torch.tensor([0.5, -1.0]), 0.1, 3, torch.qint8)
    assert same_bits(q, torch.quantize_per_tensor(torch.tensor([0.5, -1.0]), 0.1, 3, torch.qint8))
    assert not same_bits(q, torch.quantize_per_tensor(torch.tensor([0.5, -1.0]), 0.2, 3, torch.qint8))
    qc = torch.quantize_per_channel(torch.ones(2, 2), torch.tensor([0.1, 0.2]), torch.tensor([0, 1]), 0, torch.quint8)
    assert same_bits(qc, qc.clone()) and not same_bits(qc, q)
    z = torch.tensor([1 + 2j])
    assert same_bits(z.conj(), torch.tensor([1 - 2j])) and not same_bits(z.conj(), z)
    s = torch.eye(3).to_sparse()
    assert same_bits(s, torch.eye(3).to_sparse()) and not same_bits(s, (2 * torch.eye(3)).to_sparse())
    assert not same_bits(s, torch.eye(3))                                       # sparse against dense

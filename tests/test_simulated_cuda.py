"""instructor.simulated_cuda: tensors that stay on the CPU but fail where CUDA tensors would."""
import pytest
import torch
from torch import nn

from instructor.simulated_cuda import SIMULATED, is_on_simulated_cuda, on_simulated_cuda, simulating_cuda


def test_a_simulated_tensor_reports_cuda_keeps_its_values_and_results_stay_simulated():
    x = torch.randn(4, 3)
    sim = on_simulated_cuda(x)
    assert sim.device == SIMULATED and torch.equal(sim.cpu(), x)
    out = sim.float().softmax(dim=1).max(dim=1)
    assert is_on_simulated_cuda(out.values) and is_on_simulated_cuda(out.indices)
    assert out.values.device.type == "cuda" and float(sim.max()) == float(x.max())


@pytest.mark.parametrize("mix", [
    lambda sim, cpu: sim == cpu,
    lambda sim, cpu: torch.cat([sim, cpu]),
    lambda sim, cpu: cpu[sim > 0],                     # a GPU mask indexing a CPU tensor
    lambda sim, cpu: sim.index_select(0, cpu.long()),  # index_select and masked_select check devices on CUDA
    lambda sim, cpu: sim.masked_select(cpu > 0),
    lambda sim, cpu: cpu[:1].squeeze().add_(sim[0]),    # a GPU value written into a 0-d CPU tensor
])
def test_an_op_that_mixes_a_simulated_and_a_cpu_tensor_raises_as_cuda_does(mix):
    sim, cpu = on_simulated_cuda(torch.arange(4.0)), torch.arange(4.0)
    with simulating_cuda(), pytest.raises(RuntimeError, match="same device"):
        mix(sim, cpu)


def test_a_cpu_total_updated_in_place_from_a_gpu_value_fails():
    total, loss = torch.zeros(()), on_simulated_cuda(torch.tensor(2.0))
    with simulating_cuda(), pytest.raises(RuntimeError, match="written into a CPU tensor"):
        total += loss
    on_gpu = on_simulated_cuda(torch.zeros(()))
    with simulating_cuda():
        on_gpu += loss
        on_gpu.add_(torch.tensor(1.0))                 # a 0-d CPU value as an input is fine
        torch.zeros(3).copy_(on_simulated_cuda(torch.ones(3)))   # a copy between devices is fine
    assert float(on_gpu) == 3.0


def test_what_cuda_allows_is_allowed():
    sim, cpu = on_simulated_cuda(torch.arange(4.0)), torch.arange(4.0)
    with simulating_cuda():
        assert is_on_simulated_cuda(sim + torch.tensor(1.0))          # a 0-d CPU tensor joins, as on CUDA
        assert is_on_simulated_cuda(sim[torch.tensor([0, 2])])        # CPU indices into a CUDA tensor
        moved = cpu.to(sim.device, non_blocking=True)
        assert is_on_simulated_cuda(moved) and is_on_simulated_cuda(sim == moved)
        assert is_on_simulated_cuda(cpu.to(sim)) and is_on_simulated_cuda(cpu.cuda())
        back = sim.to(cpu.device)
        assert type(back) is torch.Tensor and torch.equal(back == cpu, torch.ones(4, dtype=torch.bool))
        half = sim.to("cpu", torch.float16)
        assert type(half) is torch.Tensor and half.dtype == torch.float16
        assert is_on_simulated_cuda(sim.to(torch.float16))           # a dtype only: stays where it is
        made = torch.zeros(3, device=sim.device)
        assert is_on_simulated_cuda(made) and type(torch.zeros(3)) is torch.Tensor


def test_a_parameter_reports_cuda_and_only_cpu_tensors_are_accepted():
    layer = nn.Linear(2, 2)
    layer.weight = on_simulated_cuda(layer.weight)
    assert isinstance(layer.weight, nn.Parameter) and layer.weight.device.type == "cuda" and layer.weight.is_cuda
    assert next(layer.parameters()).device == SIMULATED
    with pytest.raises(TypeError, match="CPU tensor"):
        on_simulated_cuda(torch.empty(2, device="meta"))


def test_numpy_and_a_cpu_scalar_in_cat_are_refused_as_on_cuda():
    import numpy as np

    sim = on_simulated_cuda(torch.ones(2))
    for to_numpy in (lambda: sim.numpy(), lambda: np.asarray(sim), lambda: sim.detach().numpy()):
        with pytest.raises(TypeError, match="Use Tensor.cpu"):
            to_numpy()
    assert np.asarray(sim.cpu()).tolist() == [1.0, 1.0]
    scalar = on_simulated_cuda(torch.tensor(1.0))
    for join in (torch.stack, torch.cat):
        with pytest.raises(RuntimeError, match="same device"):
            join([scalar if join is torch.stack else sim, torch.tensor(2.0) if join is torch.stack else torch.ones(1)])
    with simulating_cuda():
        assert is_on_simulated_cuda(torch.stack([scalar, torch.tensor(2.0).to(scalar.device)]))

"""utils.export: input validation in front of ONNX Runtime. The model is built with onnx.helper (no exporter,
so each test takes milliseconds)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper

from utils.export import InputSpec, InputValidationError, OnnxModel, default_providers, input_problems, max_abs_diff


def _relu_model(shape=("batch", 3, 4, 4)) -> bytes:
    x = helper.make_tensor_value_info("images", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("out", TensorProto.FLOAT, list(shape))
    graph = helper.make_graph([helper.make_node("Relu", ["images"], ["out"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


SPEC = InputSpec("images", ("batch", 3, 4, 4), np.dtype(np.float32))


def test_input_problems_accepts_any_dynamic_batch():
    assert input_problems((1, 3, 4, 4), np.float32, SPEC) == []
    assert input_problems((513, 3, 4, 4), "float32", SPEC) == []


def test_input_problems_names_each_problem():
    assert any("rank 3" in p for p in input_problems((3, 4, 4), np.float32, SPEC))
    assert input_problems((2, 1, 4, 4), np.float32, SPEC) == ["dimension 1 is 1, expected 3"]
    assert input_problems((2, 3, 4, 4), np.float64, SPEC) == ["dtype float64, expected float32"]
    both = input_problems((2, 4, 4, 3), np.float64, SPEC)
    assert len(both) == 3  # two wrong fixed dimensions and the dtype
    assert any("expected >= 1" in p for p in input_problems((0, 3, 4, 4), np.float32, SPEC))


def test_onnx_model_reads_spec_and_runs():
    m = OnnxModel(_relu_model(), providers=["CPUExecutionProvider"])
    assert m.spec.shape == ("batch", 3, 4, 4) and m.spec.dtype == np.float32
    x = np.random.default_rng(0).standard_normal((5, 3, 4, 4)).astype(np.float32)
    np.testing.assert_array_equal(m(x), np.maximum(x, 0))


def test_onnx_model_rejects_bad_input_with_clear_error():
    m = OnnxModel(_relu_model(), providers=["CPUExecutionProvider"])
    with pytest.raises(InputValidationError, match="dtype float64, expected float32"):
        m(np.zeros((2, 3, 4, 4)))
    with pytest.raises(InputValidationError, match="dimension 1 is 4, expected 3"):
        m(np.zeros((2, 4, 4, 3), dtype=np.float32))
    with pytest.raises(InputValidationError, match="NumPy array or a torch tensor"):
        m([[1.0]])


def test_onnx_model_accepts_torch_tensors():
    torch = pytest.importorskip("torch")
    m = OnnxModel(_relu_model(), providers=["CPUExecutionProvider"])
    x = torch.randn(2, 3, 4, 4)
    np.testing.assert_allclose(m(x), x.clamp(min=0).numpy())


def test_max_abs_diff():
    assert max_abs_diff(np.array([1.0, -2.0]), np.array([1.5, 1.0])) == pytest.approx(3.0)
    assert max_abs_diff(np.zeros(0), np.zeros(0)) == 0.0
    with pytest.raises(ValueError, match="shapes differ"):
        max_abs_diff(np.zeros((4, 10)), np.zeros(10))


def test_default_providers_prefer_cuda_without_tf32():
    assert default_providers(["CPUExecutionProvider"]) == ["CPUExecutionProvider"]
    gpu = default_providers(["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"])
    assert gpu == [("CUDAExecutionProvider", {"use_tf32": "0", "device_id": "0"}), "CPUExecutionProvider"]
    # ONNX Runtime on the GPU the PyTorch side uses, not always GPU 0
    assert default_providers(["CUDAExecutionProvider"], cuda_device=1)[0][1]["device_id"] == "1"
    import onnxruntime as ort
    in_use = OnnxModel(_relu_model()).providers                               # this machine's onnxruntime
    assert in_use[0] == ("CUDAExecutionProvider" if "CUDAExecutionProvider" in ort.get_available_providers()
                         else "CPUExecutionProvider")


def test_onnx_sessions_do_not_spin_unless_asked():
    # Spinning intra-op threads keep the cores busy after a call and slow the eager side of an interleaved timing.
    quiet = OnnxModel(_relu_model(), providers=["CPUExecutionProvider"])
    busy = OnnxModel(_relu_model(), providers=["CPUExecutionProvider"], spin=True)
    key = "session.intra_op.allow_spinning"
    assert quiet.session.get_session_options().get_session_config_entry(key) == "0"
    assert busy.session.get_session_options().get_session_config_entry(key) == "1"


def test_a_bfloat16_tensor_is_refused_with_the_dtype_to_use():
    torch = pytest.importorskip("torch")
    m = OnnxModel(_relu_model(), providers=["CPUExecutionProvider"])
    with pytest.raises(InputValidationError, match=r"torch.bfloat16 tensor has no NumPy dtype.*model's float32 first, e.g. .to\(torch.float32\)"):
        m(torch.zeros(2, 3, 4, 4, dtype=torch.bfloat16))

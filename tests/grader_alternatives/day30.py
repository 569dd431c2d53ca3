"""Day 30 · Export: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    Alternative(
        cell="day30_export_onnx",
        why="exports an eval-mode deep copy (the caller's model is never switched), keys dynamic_shapes by forward's "
            "own parameter name read with inspect.signature, saves through the returned ONNXProgram, checks the "
            "file by path",
        source='''import inspect


def export_onnx(model: torch.nn.Module, example: torch.Tensor, path) -> Path:
    path = Path(path)
    frozen = copy.deepcopy(model).eval()            # the caller's model keeps its mode: it is never touched
    first_arg = next(iter(inspect.signature(frozen.forward).parameters))
    program = torch.onnx.export(frozen, (example,), dynamo=True, verbose=False,
                                dynamic_shapes={first_arg: {0: torch.export.Dim("batch")}},
                                input_names=["images"], output_names=["logits"])
    program.save(str(path), external_data=True)
    onnx.checker.check_model(str(path), full_check=True)
    return path
'''),
    Alternative(
        cell="day30_export_onnx",
        why="the old exporter's dynamic_axes (accepted and converted by the dynamo exporter; its warning silenced), "
            "external data left to the default, the mode restored without try/finally",
        source='''import warnings


def export_onnx(model: torch.nn.Module, example: torch.Tensor, path) -> Path:
    mode = model.training
    model.train(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")             # "dynamic_axes is not recommended when dynamo=True"
        torch.onnx.export(model, (example,), str(path), dynamo=True, verbose=False,
                          input_names=["images"], output_names=["logits"],
                          dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}})
    model.train(mode)
    onnx.checker.check_model(str(path), full_check=True)
    return Path(path)
'''),
    Alternative(
        cell="day30_input_specs",
        why="parses the protobuf itself (ModelProto.FromString: no external data can be read), a dict of element "
            "types, WhichOneof for each dimension",
        source='''_NP = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.FLOAT16: np.float16,
       onnx.TensorProto.DOUBLE: np.float64, onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32,
       onnx.TensorProto.INT8: np.int8, onnx.TensorProto.UINT8: np.uint8, onnx.TensorProto.BOOL: np.bool_}


def input_specs(path) -> list[InputSpec]:
    proto = onnx.ModelProto.FromString(Path(path).read_bytes())
    initializers = {t.name for t in proto.graph.initializer}
    out = []
    for value in proto.graph.input:
        if value.name in initializers:
            continue
        dims = []
        for d in value.type.tensor_type.shape.dim:
            kind = d.WhichOneof("value")
            dims.append(d.dim_value if kind == "dim_value" else d.dim_param if kind == "dim_param" else None)
        out.append(InputSpec(value.name, tuple(dims), np.dtype(_NP[value.type.tensor_type.elem_type])))
    return out
'''),
    Alternative(
        cell="day30_input_specs",
        why="onnx.load_model on an open file object (only the .onnx file is opened), a list comprehension, and "
            "helper.tensor_dtype_to_np_dtype",
        source='''def input_specs(path) -> list[InputSpec]:
    with open(path, "rb") as f:
        graph = onnx.load_model(f, load_external_data=False).graph
    weight_names = set(i.name for i in graph.initializer)

    def dim(d):
        if d.HasField("dim_value"):
            return int(d.dim_value)
        return d.dim_param if d.HasField("dim_param") else None

    return [InputSpec(v.name, tuple(dim(d) for d in v.type.tensor_type.shape.dim),
                      np.dtype(onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)))
            for v in graph.input if v.name not in weight_names]
'''),
]

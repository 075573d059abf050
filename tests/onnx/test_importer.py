"""The ONNX importer's contract: ONNX semantics or a typed error, never a silent guess."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import rlx_core as rlx  # noqa: E402
from rlx_core.frontend.onnx_backend import backend_for  # noqa: E402
from rlx_core.frontend.onnx_import import (  # noqa: E402
    OnnxImportError,
    UnknownOpsetError,
    UnsupportedOp,
    import_model,
)
from rlx_core.ir.graph import Level, ValueKind  # noqa: E402
from rlx_core.ir.printer import print_graph  # noqa: E402


def _mlp(opset: int = 17) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((4, 8)).astype(np.float32)
    b1 = rng.standard_normal(8).astype(np.float32)
    w2 = rng.standard_normal((8, 3)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="bias1"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
        helper.make_node("MatMul", ["h2", "w2"], ["h3"], name="fc2"),
        helper.make_node("Softmax", ["h3"], ["y"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                     numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model, {"w1": w1, "b1": b1, "w2": w2}


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_mlp_imports_with_params_and_matches_numpy() -> None:
    model, w = _mlp()
    g = rlx.from_onnx(model)
    assert g.level is Level.HIR
    assert [p.name for p in g.params] == ["w1", "b1", "w2"]
    assert all(p.kind is ValueKind.PARAM for p in g.params)
    assert "softmax" in print_graph(g)
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    got = rlx.compile(g, x, target="numpy", record=False)(x)
    want = _softmax(np.maximum(x @ w["w1"] + w["b1"], 0) @ w["w2"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_from_path_and_bytes(tmp_path) -> None:
    model, _ = _mlp()
    path = tmp_path / "mlp.onnx"
    onnx.save(model, str(path))
    assert rlx.from_onnx(str(path)).name == "mlp"
    assert len(rlx.from_onnx(path.read_bytes()).nodes) == len(rlx.from_onnx(model).nodes)


def test_truncated_file_is_a_typed_error(tmp_path) -> None:
    model, _ = _mlp()
    data = model.SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(OnnxImportError) as info:
        rlx.from_onnx(str(path))
    assert info.value.code == "RLX-O001"
    assert "truncated" in str(info.value)


def test_not_onnx_and_missing_file() -> None:
    with pytest.raises(OnnxImportError):
        rlx.from_onnx(b"definitely not a protobuf \xff\xff\xff")
    with pytest.raises(OnnxImportError, match="cannot read"):
        rlx.from_onnx("/nonexistent/model.onnx")
    with pytest.raises(OnnxImportError, match="cannot import a int"):
        rlx.from_onnx(42)


@pytest.mark.parametrize("opset", [3, 999])
def test_unknown_opset_is_a_typed_error(opset: int) -> None:
    model, _ = _mlp()
    model.opset_import[0].version = opset
    with pytest.raises(UnknownOpsetError) as info:
        rlx.from_onnx(model)
    assert info.value.code == "RLX-O002"
    assert str(opset) in str(info.value)


def test_unknown_domain_is_a_typed_error() -> None:
    model, _ = _mlp()
    model.opset_import.append(helper.make_opsetid("com.example.custom", 1))
    with pytest.raises(UnknownOpsetError, match="com.example.custom"):
        rlx.from_onnx(model)


def test_every_unsupported_node_is_listed_together() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="ok"),
        helper.make_node("NonZero", ["a"], ["b"], name="nz"),  # no converter
        helper.make_node("Softmax", ["a"], ["c"], name="sm", axis=1, bogus=3),  # unknown attr
        helper.make_node("Unique", ["a"], ["d"], name="uq"),  # no converter
        helper.make_node("Relu", ["b"], ["e"], name="after_bad"),  # downstream: not reported
    ]
    graph = helper.make_graph(
        nodes, "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in "bcde"])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedOp) as info:
        rlx.from_onnx(model)
    err = info.value
    assert err.code == "RLX-O003"
    assert [(p.node, p.op_type) for p in err.problems] == [
        ("nz", "NonZero"), ("uq", "Unique"), ("sm", "Softmax")]
    assert "bogus" in str(err) and "nz (NonZero)" in str(err)


def test_unsupported_dtype_and_symbolic_dims_are_reported() -> None:
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "y"], ["z"], name="add")], "g",
        [helper.make_tensor_value_info("x", TensorProto.UINT64, [2]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedOp) as info:
        rlx.from_onnx(model)
    text = str(info.value)
    assert "UINT64" in text and "symbolic dimension 'batch'" in text


def test_shape_inputs_fold_only_when_given() -> None:
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="r")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedOp, match="must be known when the model is imported"):
        import_model(model)
    res = import_model(model, static_inputs={"shape": np.array([3, 4], dtype=np.int64)})
    assert res.input_names == ("x",) and res.folded_inputs == ("shape",)
    assert res.graph.output_types()[0].shape == (3, 4)


def test_backend_recompiles_when_a_folded_input_changes() -> None:
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="r")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rep = backend_for("numpy").prepare(model)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    (a,) = rep.run([x, np.array([3, 4], dtype=np.int64)])
    (b,) = rep.run([x, np.array([4, 3], dtype=np.int64)])
    assert a.shape == (3, 4) and b.shape == (4, 3)
    np.testing.assert_array_equal(b, x.reshape(4, 3))
    assert len(rep.compiled) == 2


def test_run_node_and_device() -> None:
    backend = backend_for("numpy")
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")
    node = helper.make_node("Mod", ["a", "b"], ["c"])
    a = np.array([-7, 7, -7, 7], dtype=np.int32)
    b = np.array([3, -3, -3, 3], dtype=np.int32)
    (c,) = backend.run_node(node, [a, b])
    np.testing.assert_array_equal(c, np.mod(a, b))  # Python-style: the divisor's sign
    node = helper.make_node("Mod", ["a", "b"], ["c"], fmod=1)
    (c,) = backend.run_node(node, [a.astype(np.float32), b.astype(np.float32)])
    np.testing.assert_array_equal(c, np.fmod(a, b))

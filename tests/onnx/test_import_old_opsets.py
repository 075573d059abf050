"""Op versions of opsets 7 to 10 (and the 11/12 bumps) against onnx.reference, each at the
oldest opset that resolves to it; the version converter path; the rejection listing every
node when neither path imports."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import check, model  # noqa: E402
from onnx import helper  # noqa: E402

from rlx_core.frontend.onnx_backend import backend_for  # noqa: E402
from rlx_core.frontend.onnx_import import UnsupportedOp, import_model  # noqa: E402
from rlx_core.frontend.onnx_import.ops.table import CONVERTERS  # noqa: E402

RNG = np.random.default_rng(7)


def _f(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


X4 = _f(2, 3, 6, 6)
# (op, opset, graph inputs, initializers, attributes)
CASES: list[tuple[str, int, dict[str, np.ndarray], dict[str, np.ndarray], dict[str, Any]]] = [
    ("Conv", 7, {"x": X4}, {"w": _f(4, 3, 3, 3), "b": _f(4)}, {"pads": [1, 1, 1, 1]}),
    ("Conv", 9, {"x": X4}, {"w": _f(6, 1, 3, 3)}, {"group": 3, "strides": [2, 2]}),
    ("Relu", 7, {"x": X4}, {}, {}),
    ("MaxPool", 8, {"x": X4}, {}, {"kernel_shape": [3, 3], "strides": [2, 2],
                                   "pads": [1, 1, 1, 1]}),
    ("MaxPool", 7, {"x": X4}, {}, {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ("MaxPool", 10, {"x": X4}, {}, {"kernel_shape": [3, 3], "strides": [2, 2],
                                    "ceil_mode": 1}),
    ("AveragePool", 7, {"x": X4}, {}, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                       "count_include_pad": 1}),
    ("AveragePool", 10, {"x": X4}, {}, {"kernel_shape": [3, 3], "strides": [2, 2],
                                        "ceil_mode": 1}),
    ("GlobalAveragePool", 7, {"x": X4}, {}, {}),
    ("Reshape", 7, {"x": X4}, {"s": np.array([2, 0, -1], np.int64)}, {}),
    ("Gemm", 7, {"a": _f(3, 5)}, {"b": _f(4, 5), "c": _f(4)}, {"transB": 1, "alpha": 0.5}),
    ("Gemm", 9, {"a": _f(5, 3)}, {"b": _f(5, 4), "c": _f(3, 4)}, {"transA": 1, "beta": 2.0}),
    ("Gemm", 11, {"a": _f(3, 5)}, {"b": _f(5, 4)}, {}),
    ("Dropout", 7, {"x": X4}, {}, {"ratio": 0.3}),
    ("Softmax", 7, {"x": X4}, {}, {}),
    ("Softmax", 11, {"x": X4}, {}, {"axis": 2}),
    ("LogSoftmax", 9, {"x": X4}, {}, {"axis": -1}),
    ("Hardmax", 7, {"x": X4}, {}, {"axis": 1}),
    ("Clip", 7, {"x": X4}, {}, {"min": -0.5, "max": 0.5}),
    ("Clip", 7, {"x": X4}, {}, {"max": 6.0}),
    ("Pad", 7, {"x": X4}, {}, {"pads": [0, 0, 1, 2, 0, 0, 2, 1], "value": 1.5}),
    ("Pad", 7, {"x": X4}, {}, {"pads": [0, 0, 1, 2, 0, 0, 2, 1], "mode": "reflect"}),
    ("Pad", 11, {"x": X4}, {"p": np.array([0, 0, 1, 0, 0, 0, 0, 1], np.int64)}, {}),
    ("Slice", 7, {"x": X4}, {}, {"starts": [1, -4], "ends": [3, 1000], "axes": [1, 3]}),
    ("Slice", 9, {"x": X4}, {}, {"starts": [0, 1], "ends": [1, 3]}),
    ("Concat", 7, {"a": X4, "b": _f(2, 1, 6, 6)}, {}, {"axis": 1}),
    ("Concat", 11, {"a": X4, "b": _f(2, 3, 6, 2)}, {}, {"axis": -1}),
    ("Flatten", 7, {"x": X4}, {}, {"axis": 2}),
    ("Flatten", 11, {"x": X4}, {}, {"axis": -1}),
    ("Split", 7, {"x": X4}, {}, {"axis": 1, "split": [1, 2]}),
    ("Transpose", 7, {"x": X4}, {}, {"perm": [0, 2, 3, 1]}),
    ("Unsqueeze", 7, {"x": _f(3, 4)}, {}, {"axes": [0, 3]}),
    ("Squeeze", 7, {"x": _f(3, 1, 4)}, {}, {"axes": [1]}),
    ("Add", 7, {"a": X4, "b": _f(6)}, {}, {}),
    ("Sum", 7, {"a": X4, "b": _f(2, 3, 6, 6)}, {}, {}),
    ("Max", 7, {"a": X4, "b": _f(2, 3, 6, 6)}, {}, {}),
    ("Sigmoid", 7, {"x": X4}, {}, {}),
    ("Tanh", 7, {"x": X4}, {}, {}),
    ("Exp", 7, {"x": X4}, {}, {}),
    ("Sqrt", 7, {"x": np.abs(X4)}, {}, {}),
    ("Neg", 7, {"x": X4}, {}, {}),
    ("Floor", 7, {"x": X4}, {}, {}),
    ("Reciprocal", 7, {"x": X4 + 5}, {}, {}),
    ("Pow", 7, {"a": np.abs(X4), "b": _f(6)}, {}, {}),
    ("MatMul", 7, {"a": _f(2, 3, 4)}, {"b": _f(4, 5)}, {}),
    ("PRelu", 7, {"x": X4}, {"s": _f(3, 1, 1)}, {}),
    ("ReduceMean", 7, {"x": X4}, {}, {"axes": [2, 3]}),
    ("ReduceSum", 11, {"x": X4}, {}, {"axes": [-1], "keepdims": 0}),
    ("ReduceMax", 7, {"x": X4}, {}, {"axes": [1]}),
    ("ArgMax", 7, {"x": X4}, {}, {"axis": 1}),
    ("Gather", 7, {"x": X4}, {"i": np.array([2, 0], np.int64)}, {"axis": 1}),
    ("Upsample", 9, {"x": X4}, {"s": np.array([1, 1, 2, 2], np.float32)}, {}),
    ("Resize", 10, {"x": X4}, {"s": np.array([1, 1, 2, 2], np.float32)}, {}),
    ("Greater", 7, {"a": X4, "b": _f(6)}, {}, {}),
    ("Equal", 7, {"a": np.array([1, 2, 3], np.int64), "b": np.array([1, 5, 3], np.int64)},
     {}, {}),
    ("Cast", 7, {"x": X4}, {}, {"to": onnx.TensorProto.INT32}),
    ("Tile", 7, {"x": _f(2, 3)}, {"r": np.array([2, 1], np.int64)}, {}),
    ("Expand", 8, {"x": _f(3, 1)}, {"s": np.array([2, 3, 4], np.int64)}, {}),
    ("Shape", 7, {"x": X4}, {}, {}),
    ("TopK", 7, {"x": _f(3, 5)}, {}, {"k": 2}),
    ("DepthToSpace", 7, {"x": _f(1, 8, 2, 3)}, {}, {"blocksize": 2}),
    ("InstanceNormalization", 7, {"x": X4}, {"s": _f(3), "b": _f(3)}, {}),
    ("LeakyRelu", 7, {"x": X4}, {}, {"alpha": 0.2}),
    ("Elu", 7, {"x": X4}, {}, {}),
    ("Identity", 7, {"x": X4}, {}, {}),
]

_N_OUT = {"TopK": 2, "Split": 2}
# onnx.reference ignores the 2-D coercion of Softmax-1/11 and Hardmax-1/11 and cannot run
# Resize-10: ONNX Runtime, which implements these versions, is the reference for them
_ORT_REFERENCE = {"Softmax", "Hardmax", "Resize"}


def _check_with_ort(m: onnx.ModelProto, ins: dict[str, np.ndarray]) -> None:
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, ins)
    got = backend_for("numpy").prepare(m).run(list(ins.values()))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op,opset,ins,consts,attrs", CASES,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_old_op_version_matches_reference(op: str, opset: int, ins: dict, consts: dict,
                                          attrs: dict) -> None:
    out_type = onnx.TensorProto.FLOAT if op in _ORT_REFERENCE else onnx.TensorProto.UNDEFINED
    m = model(op, ins, _N_OUT.get(op, 1), opset, consts=consts, out_type=out_type, **attrs)
    version = onnx.defs.get_schema(op, opset, "").since_version
    assert CONVERTERS[op].at(version) is not None, f"{op}-{version} is not in the table"
    res = import_model(m, input_shapes={k: v.shape for k, v in ins.items()})
    assert res.graph.origin["path"] == "direct"  # the old version itself, not an upgrade
    if op in _ORT_REFERENCE:
        _check_with_ort(m, ins)
    else:
        check(m, ins, rtol=1e-5, atol=1e-5)


def test_every_classic_cnn_op_imports_at_opsets_7_to_9() -> None:
    """The ops of model-zoo CNNs resolve to an implemented version at every opset from 7."""
    classic = ("Add", "AveragePool", "BatchNormalization", "Concat", "Conv", "Dropout",
               "Flatten", "Gemm", "GlobalAveragePool", "LRN", "MatMul", "MaxPool", "Mul",
               "Relu", "Reshape", "Softmax", "Sum", "Clip", "Pad", "Transpose", "Unsqueeze",
               "Squeeze", "Slice", "Split", "Sigmoid", "LeakyRelu", "Upsample", "Shape",
               "Gather", "Cast", "Constant", "ReduceMean")
    for opset in range(7, 23):
        for op in classic:
            try:
                version = onnx.defs.get_schema(op, opset, "").since_version
            except onnx.defs.SchemaError:
                continue  # Upsample is not defined after opset 9
            assert CONVERTERS[op].at(version) is not None, (op, version, opset)


def _chain(opset: int, op: str = "Relu", **attrs: Any) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    nodes = [helper.make_node(op, ["x"], ["t"], **attrs), helper.make_node("Relu", ["t"], ["y"])]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                             opset_imports=[helper.make_opsetid("", opset)])


def test_the_compile_trace_records_the_import_path() -> None:
    import rlx_core as rlx

    res = import_model(_chain(8, "Sigmoid"))
    assert res.graph.origin == {"format": "onnx", "opset": 8, "path": "direct",
                                "batchnorm_folded_into_conv": 0}
    exe = rlx.compile(res.graph, _f(2, 3), target="numpy")
    assert exe.trace.source["import"]["path"] == "direct"


def test_version_converter_path_when_a_version_is_missing(monkeypatch) -> None:
    """A version the table lacks is imported through onnx.version_converter's upgrade."""
    from rlx_core.frontend.onnx_import.ops import table

    sig = table.CONVERTERS["Sigmoid"]
    monkeypatch.setitem(table.CONVERTERS, "Sigmoid", table.OnnxOp(sig.fn, (13,), sig.attrs))
    m = _chain(8, "Sigmoid")
    res = import_model(m)
    assert res.graph.origin["path"] == "upgraded from opset 8 to 17 by onnx.version_converter"
    x = _f(2, 3)
    import rlx_core as rlx

    got = rlx.compile(res.graph, x, target="numpy")(x)
    np.testing.assert_allclose(got, np.maximum(1 / (1 + np.exp(-x)), 0), rtol=1e-6)


def test_neither_path_rejects_listing_every_node() -> None:
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("NoSuchOp", ["a"], ["b"], name="bad1"),
             helper.make_node("AlsoMissing", ["b"], ["y"], name="bad2")]
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 8)])
    with pytest.raises(UnsupportedOp) as err:
        import_model(m)
    names = [p.node for p in err.value.problems]
    assert names == ["bad1", "bad2"]
    assert "version_converter" in (err.value.hint or "")


@pytest.mark.parametrize("opset,spatial", [(7, 1), (7, 0), (9, 1)])
def test_batch_norm_7_and_9(opset: int, spatial: int) -> None:
    """onnx.reference's BatchNormalization-6/7 returns a malformed tuple and its -9 mixes in
    batch statistics (momentum) although one output means inference, so the expected values
    are the spec's formula; spatial=0 holds one statistic per activation."""
    shp = (3,) if spatial else (3, 6, 6)
    s, b, m = _f(*shp), _f(*shp), _f(*shp)
    v = np.abs(_f(*shp)) + 0.5
    attrs = {"spatial": spatial} if opset < 9 else {}
    bn = model("BatchNormalization", {"x": X4}, 1, opset,
               consts={"s": s, "b": b, "m": m, "v": v}, epsilon=1e-3, **attrs)
    got = backend_for("numpy").prepare(bn).run([X4])[0]
    ex = (lambda a: a.reshape(1, 3, 1, 1)) if spatial else (lambda a: a[None])
    want = (X4 - ex(m)) / np.sqrt(ex(v) + 1e-3) * ex(s) + ex(b)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

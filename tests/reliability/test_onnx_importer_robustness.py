"""Found item 4 of issue 31: every malformed ONNX model the byte-mutation fuzz produced ends in
a typed RLX-O0xx error that names the node; none raises a raw Python exception."""

from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from rlx_core.frontend.onnx_import import UnsupportedOp, import_model  # noqa: E402
from rlx_core.frontend.onnx_import.errors import (  # noqa: E402
    ExternalDataError,
    MalformedOnnxError,
    NodeImportError,
)

X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)


def _model(nodes, inputs=(X,), outputs=(Y,), inits=()):
    g = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _problem(err: UnsupportedOp) -> str:
    return " | ".join(str(p) for p in err.problems)


@pytest.mark.parametrize("node, says", [
    (helper.make_node("Softmax", ["x"], ["y"], axis=[1, 2]), "'axis' is INTS, but Softmax"),
    (helper.make_node("ReduceMean", ["x"], ["y"], keepdims=[1], axes=[1]), "'keepdims' is INTS"),
    (helper.make_node("Gemm", ["x", "x"], ["y"], alpha="big"), "'alpha' is STRING"),
    (helper.make_node("LeakyRelu", ["x"], ["y"], alpha=[0.1, 0.2]), "'alpha' is FLOATS"),
])
def test_attribute_of_the_wrong_type(node, says) -> None:
    with pytest.raises(UnsupportedOp) as info:
        import_model(_model([node]).SerializeToString())
    assert says in _problem(info.value) and not isinstance(info.value, NodeImportError)


def test_attribute_holding_a_graph() -> None:
    node = helper.make_node("Transpose", ["x"], ["y"])
    node.attribute.append(helper.make_attribute("perm", helper.make_graph([], "sub", [], [])))
    with pytest.raises(UnsupportedOp, match="'perm' is GRAPH, but Transpose declares it INTS"):
        import_model(_model([node]))


@pytest.mark.parametrize("old, new, says", [
    (b"bad", b"\xff\xfe\xfd", "node #0's name is not valid UTF-8"),
    (b"Relu", b"R\xffl\xfe", "node #0's op_type is not valid UTF-8"),
    (b"\x01x", b"\x01\xff", "input 0 is not valid UTF-8"),
])
def test_invalid_utf8_names(old, new, says) -> None:
    data = _model([helper.make_node("Relu", ["x"], ["y"], name="bad")]).SerializeToString()
    assert data.count(old) >= 1
    with pytest.raises(MalformedOnnxError, match=says) as info:
        import_model(data.replace(old, new, 1))
    assert info.value.code == "RLX-O020" and info.value.hint


def test_duplicate_outputs() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])]
    with pytest.raises(MalformedOnnxError, match="'y' is produced twice"):
        import_model(_model(nodes))
    with pytest.raises(MalformedOnnxError, match="writes 'x', which is already a graph input"):
        import_model(_model([helper.make_node("Relu", ["x"], ["x"])], outputs=[X]))


def _range(limit: float) -> bytes:
    consts = [helper.make_node("Constant", [], [n], value=numpy_helper.from_array(
        np.array(v, np.float32))) for n, v in (("s", 0.0), ("l", limit), ("d", 1.0))]
    r = helper.make_tensor_value_info("r", TensorProto.FLOAT, None)
    return _model([*consts, helper.make_node("Range", ["s", "l", "d"], ["r"])], inputs=(),
                  outputs=(r,)).SerializeToString()


def test_huge_range_is_refused_before_it_is_computed(monkeypatch) -> None:
    monkeypatch.setenv("RLX_MEMORY_LIMIT", "1G")
    with pytest.raises(UnsupportedOp, match=r"f32\[10000000000\] .* over the memory budget"):
        import_model(_range(1e10))
    res = import_model(_range(5.0))  # a small one still imports (and folds to a constant)
    assert res.graph.outputs


def test_non_finite_range_is_refused() -> None:
    with pytest.raises(UnsupportedOp, match="must be finite"):
        import_model(_range(float("inf")))


def _external_model(folder) -> str:
    w = numpy_helper.from_array(np.arange(20, dtype=np.float32).reshape(4, 5), "w")
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], inits=[w])
    path = os.path.join(folder, "m.onnx")
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="w.bin", size_threshold=0)
    return path


def test_external_data_is_read_next_to_the_model(tmp_path, monkeypatch) -> None:
    import rlx_core as rlx

    path = _external_model(tmp_path)
    monkeypatch.chdir("/")  # not the model's folder: the data must still be found
    g = import_model(path).graph
    x = np.ones((2, 3, 4), np.float32)
    out = rlx.compile(g, x, target="numpy")(x)
    np.testing.assert_allclose(out, x @ np.arange(20, dtype=np.float32).reshape(4, 5))


def test_external_data_failures_are_typed(tmp_path) -> None:
    path = _external_model(tmp_path)
    with pytest.raises(ExternalDataError, match="without the model file's path"):
        import_model(open(path, "rb").read())
    proto = onnx.load(path, load_external_data=False)
    proto.graph.initializer[0].external_data[0].value = "../../etc/passwd"
    bad = tmp_path / "escape.onnx"
    bad.write_bytes(proto.SerializeToString())
    with pytest.raises(ExternalDataError, match="cannot be read from"):
        import_model(str(bad))
    os.remove(tmp_path / "w.bin")
    with pytest.raises(ExternalDataError, match="cannot be read from"):
        import_model(path)


def test_last_resort_names_the_node(monkeypatch) -> None:
    from dataclasses import replace

    from rlx_core.frontend.onnx_import.ops.table import CONVERTERS

    def boom(n):
        raise KeyError("internal")

    monkeypatch.setitem(CONVERTERS, "Relu", replace(CONVERTERS["Relu"], fn=boom))
    model = _model([helper.make_node("Relu", ["x"], ["h"], name="first"),
                    helper.make_node("Frobnicate", ["h"], ["y"])])
    with pytest.raises(NodeImportError) as info:
        import_model(model)
    err = info.value
    assert err.code == "RLX-O022" and "first (Relu): conversion failed unexpectedly: KeyError" \
        in str(err) and "Frobnicate" in str(err) and "first" in err.hint


def test_mutation_fuzz_short_run_has_no_untyped_exception() -> None:
    from rlx_core.testing.mutate_onnx import run

    report = run(mutants=300, seed=1)
    assert report.mutants == 300 and report.seeds >= 10
    assert report.untyped == {}, report.describe()


def test_a_failing_upgrade_is_a_no_not_a_crash(monkeypatch) -> None:
    # an old model that does not import directly is retried upgraded; the converter's own C++
    # errors (ConvertError, InferenceError) must read as "cannot upgrade", never escape
    from onnx import version_converter

    class ConvertError(Exception):
        pass

    def refuse(proto, version):
        raise ConvertError("Output y is undefined!")

    monkeypatch.setattr(version_converter, "convert_version", refuse)
    node = helper.make_node("Frobnicate", ["x"], ["y"])
    g = helper.make_graph([node], "g", [X], [Y])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    with pytest.raises(UnsupportedOp, match="Frobnicate") as info:
        import_model(model)
    assert "Output y is undefined" in info.value.hint


def test_static_integer_inputs_must_be_integers() -> None:
    pads = numpy_helper.from_array(np.array([0, 0, 1, 0, 0, 1], np.complex64), "p")
    node = helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")
    with pytest.raises(UnsupportedOp, match="pads must be integers, got complex64"):
        import_model(_model([node], inits=[pads]))


def test_maxpool_indices_table_is_bounded() -> None:
    c = helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 1, 4096, 4096])
    i = helper.make_tensor_value_info("i", TensorProto.INT64, None)
    node = helper.make_node("MaxPool", ["c"], ["y", "i"], kernel_shape=[64, 64],
                            strides=[1, 1])
    with pytest.raises(UnsupportedOp, match="Indices output needs an import-time index table"):
        import_model(_model([node], inputs=(c,), outputs=(Y, i)))


def test_concat_without_inputs_or_of_mixed_ranks() -> None:
    with pytest.raises(UnsupportedOp, match="at least one input"):
        import_model(_model([helper.make_node("Concat", ["", ""], ["y"], axis=0)]))
    v = helper.make_tensor_value_info("v", TensorProto.FLOAT, [2, 3])
    with pytest.raises(UnsupportedOp, match="different ranks"):
        import_model(_model([helper.make_node("Concat", ["v", "x"], ["y"], axis=1)],
                            inputs=(X, v)))

"""ONNX If, Loop and Scan through the importer (unrolled / constant-folded), against
onnx.reference.ReferenceEvaluator, and the typed refusals where a static graph cannot hold
the control flow."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import check  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import rlx_core as rlx  # noqa: E402
from rlx_core.frontend.onnx_backend import backend_for  # noqa: E402
from rlx_core.frontend.onnx_import import UnsupportedOp, import_model  # noqa: E402

F = TensorProto.FLOAT


def _vi(name: str, elem: int, shape: list[int] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes: list, inputs: list, outputs: list, opset: int = 17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "t", inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _branch(name: str, nodes: list, outs: list[str]) -> onnx.GraphProto:
    return helper.make_graph(nodes, name, [], [_vi(o, TensorProto.UNDEFINED, None) for o in outs])


def _if_model(same_shapes: bool = True) -> onnx.ModelProto:
    then_g = _branch("then", [helper.make_node("Mul", ["x", "x"], ["t"])], ["t"])
    else_nodes = [helper.make_node("Neg", ["x"], ["e"])]
    if not same_shapes:
        else_nodes.append(helper.make_node("ReduceSum", ["e"], ["e2"], keepdims=0))
    else_g = _branch("else", else_nodes, ["e" if same_shapes else "e2"])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)
    return _model([node], [_vi("c", TensorProto.BOOL, []), _vi("x", F, [2, 3])],
                  [_vi("y", F, None)])


@pytest.mark.parametrize("cond", [True, False])
def test_if_static_condition_takes_one_branch(cond: bool) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    inputs = {"c": np.array(cond), "x": x}
    check(_if_model(), inputs)
    check(_if_model(same_shapes=False), inputs)  # only the taken branch is imported


def test_if_runtime_condition_selects_between_branches() -> None:
    m = _if_model()
    res = import_model(m)  # no static_inputs: the condition is a run-time input
    assert res.input_names == ("c", "x")
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    exe = rlx.compile(res.graph, np.array(True), x, target="numpy", record=False)
    for cond in (True, False):
        want = ReferenceEvaluator(m).run(None, {"c": np.array(cond), "x": x})[0]
        np.testing.assert_array_equal(exe(np.array(cond), x), want)


def test_if_runtime_condition_with_different_branch_shapes_is_refused() -> None:
    with pytest.raises(UnsupportedOp, match="differs between the branches"):
        import_model(_if_model(same_shapes=False))


def _loop_model(opset: int = 17) -> onnx.ModelProto:
    """y = y + i * x each iteration; the scan output collects y."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Mul", ["fi", "x"], ["ix"]),
         helper.make_node("Add", ["y_in", "ix"], ["y_out"]),
         helper.make_node("Identity", ["y_out"], ["scan"])],
        "body",
        [_vi("i", TensorProto.INT64, []), _vi("cond_in", TensorProto.BOOL, []),
         _vi("y_in", F, None)],
        [_vi("cond_out", TensorProto.BOOL, []), _vi("y_out", F, None), _vi("scan", F, None)])
    node = helper.make_node("Loop", ["M", "", "y0"], ["y", "ys"], body=body)
    return _model([node], [_vi("M", TensorProto.INT64, []), _vi("y0", F, [3]),
                           _vi("x", F, [3])], [_vi("y", F, None), _vi("ys", F, None)], opset)


def test_loop_unrolls_over_a_static_trip_count() -> None:
    x = np.array([1, -2, 0.5], np.float32)
    m = _loop_model()
    rep = backend_for("numpy").prepare(m, "CPU")
    y, ys = rep.run([np.array(4, dtype=np.int64), np.ones(3, np.float32), x])
    want, steps = np.ones(3, np.float32), []
    for i in range(4):
        want = want + np.float32(i) * x
        steps.append(want)
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(ys, np.stack(steps))


def test_loop_with_a_runtime_trip_count_is_refused() -> None:
    with pytest.raises(UnsupportedOp, match="trip count M is only known at run time"):
        import_model(_loop_model())


def _scan_model(length: int, in_dir: int, out_dir: int, out_axis: int) -> onnx.ModelProto:
    """A running sum and product over axis 1 of x (N, length, 2)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "xt"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "xt"], ["o"])],
        "body", [_vi("s_in", F, [3, 2]), _vi("xt", F, [3, 2])],
        [_vi("s_out", F, [3, 2]), _vi("o", F, [3, 2])])
    node = helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1,
                            scan_input_axes=[1], scan_input_directions=[in_dir],
                            scan_output_axes=[out_axis], scan_output_directions=[out_dir])
    return _model([node], [_vi("s0", F, [3, 2]), _vi("x", F, [3, length, 2])],
                  [_vi("s", F, None), _vi("ys", F, None)])


def _scan_numpy(s0: np.ndarray, x: np.ndarray, in_dir: int, out_dir: int,
                out_axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Scan-9+ semantics (ONNX's reference only implements axis 0, forward)."""
    s, outs = s0, []
    steps = range(x.shape[1])
    for t in (reversed(steps) if in_dir else steps):
        s = s + x[:, t]
        outs.append(s * x[:, t])
    return s, np.stack(outs[::-1] if out_dir else outs, axis=out_axis)


def _check_scan(length: int, in_dir: int, out_dir: int, out_axis: int, target: str = "numpy",
                seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    s0 = rng.standard_normal((3, 2)).astype(np.float32)
    x = (rng.standard_normal((3, length, 2)) * 0.5).astype(np.float32)
    rep = backend_for(target).prepare(_scan_model(length, in_dir, out_dir, out_axis), "CPU")
    got = rep.run([s0, x])
    want = _scan_numpy(s0, x, in_dir, out_dir, out_axis)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("in_dir,out_dir,out_axis", [(0, 0, 0), (1, 0, 1), (0, 1, -1),
                                                     (1, 1, 2)])
def test_scan_axes_and_directions(in_dir: int, out_dir: int, out_axis: int) -> None:
    _check_scan(5, in_dir, out_dir, out_axis)


def test_scan_axis_0_forward_matches_the_reference() -> None:
    rng = np.random.default_rng(3)
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "xt"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["o"])],
        "body", [_vi("s_in", F, [2]), _vi("xt", F, [2])], [_vi("s_out", F, [2]),
                                                          _vi("o", F, [2])])
    node = helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1)
    m = _model([node], [_vi("s0", F, [2]), _vi("x", F, [6, 2])],
               [_vi("s", F, None), _vi("ys", F, None)])
    check(m, {"s0": rng.standard_normal(2).astype(np.float32),
              "x": rng.standard_normal((6, 2)).astype(np.float32)})


def test_scan_longer_than_concat_arity() -> None:
    _check_scan(70, 0, 0, 0, seed=1)


def test_scan_cpu() -> None:
    _check_scan(4, 1, 1, 1, target="cpu", seed=2)


def test_body_node_that_cannot_be_imported_rejects_the_loop() -> None:
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("NoSuchOp", ["v_in"], ["v_out"])],
        "body", [_vi("i", TensorProto.INT64, []), _vi("c_in", TensorProto.BOOL, []),
                 _vi("v_in", F, [2])],
        [_vi("c_out", TensorProto.BOOL, []), _vi("v_out", F, [2])])
    m = _model([helper.make_node("Loop", ["M", "", "v"], ["out"], body=body)],
               [_vi("M", TensorProto.INT64, []), _vi("v", F, [2])], [_vi("out", F, None)])
    with pytest.raises(UnsupportedOp, match="NoSuchOp"):
        import_model(m, static_inputs={"M": np.array(2, dtype=np.int64)})

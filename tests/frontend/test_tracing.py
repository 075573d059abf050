"""Tracing: numpy semantics of the Tensor API, and typed errors at trace time."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from tests.conftest import assert_close

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4, 5)).astype(np.float32)
Y = RNG.standard_normal((4, 5)).astype(np.float32)
IDX = RNG.integers(-5, 5, size=(3, 4)).astype(np.int32)

CASES = {
    "broadcast_add": (lambda x, y: x + y, (X, Y)),
    "scalar_ops": (lambda x, y: 2 * x - y / 3 + 1, (X, Y)),
    "rsub_rdiv": (lambda x, y: 1 - x, (X, Y)),
    "compare_where": (lambda x, y: rlx.where(x > y, x, y * 2), (X, Y)),
    "sum_axis": (lambda x, y: x.sum(axis=1), (X, Y)),
    "sum_keepdims": (lambda x, y: x.sum(axis=(0, 2), keepdims=True), (X, Y)),
    "mean_all": (lambda x, y: x.mean(), (X, Y)),
    "max_min": (lambda x, y: x.max(axis=-1) - x.min(axis=0)[None, :, 0], (X, Y)),
    "var": (lambda x, y: x.var(axis=-1), (X, Y)),
    "matmul_2d": (lambda x, y: y @ y.T, (X, Y)),
    "matmul_batched_broadcast": (lambda x, y: x @ y.T, (X, Y)),
    "matmul_vec": (lambda x, y: y @ y[0], (X, Y)),
    "reshape_transpose": (lambda x, y: x.reshape(5, -1).T, (X, Y)),
    "transpose_axes": (lambda x, y: x.transpose(2, 0, 1), (X, Y)),
    "slice_basic": (lambda x, y: x[1:, ::2, -3:], (X, Y)),
    "int_index": (lambda x, y: x[0, 1], (X, Y)),
    "ellipsis_newaxis": (lambda x, y: x[..., None, 2], (X, Y)),
    "concat": (lambda x, y: rlx.concat([y, y * 2], axis=0), (X, Y)),
    "stack": (lambda x, y: rlx.stack([y, y + 1], axis=1), (X, Y)),
    "exp_tanh": (lambda x, y: rlx.exp(x * 0.1) + rlx.tanh(y), (X, Y)),
    "astype": (lambda x, y: (x * 10).astype("i32"), (X, Y)),
    "argmax": (lambda x, y: x.argmax(axis=1), (X, Y)),
}

NUMPY = {
    "broadcast_add": lambda x, y: x + y,
    "scalar_ops": lambda x, y: 2 * x - y / 3 + 1,
    "rsub_rdiv": lambda x, y: 1 - x,
    "compare_where": lambda x, y: np.where(x > y, x, y * 2),
    "sum_axis": lambda x, y: x.sum(axis=1),
    "sum_keepdims": lambda x, y: x.sum(axis=(0, 2), keepdims=True),
    "mean_all": lambda x, y: x.mean(),
    "max_min": lambda x, y: x.max(axis=-1) - x.min(axis=0)[None, :, 0],
    "var": lambda x, y: x.var(axis=-1),
    "matmul_2d": lambda x, y: y @ y.T,
    "matmul_batched_broadcast": lambda x, y: x @ y.T,
    "matmul_vec": lambda x, y: y @ y[0],
    "reshape_transpose": lambda x, y: x.reshape(5, -1).T,
    "transpose_axes": lambda x, y: x.transpose(2, 0, 1),
    "slice_basic": lambda x, y: x[1:, ::2, -3:],
    "int_index": lambda x, y: x[0, 1],
    "ellipsis_newaxis": lambda x, y: x[..., None, 2],
    "concat": lambda x, y: np.concatenate([y, y * 2], axis=0),
    "stack": lambda x, y: np.stack([y, y + 1], axis=1),
    "exp_tanh": lambda x, y: np.exp(x * 0.1) + np.tanh(y),
    "astype": lambda x, y: (x * 10).astype(np.int32),
    "argmax": lambda x, y: x.argmax(axis=1).astype(np.int32),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_tensor_api_matches_numpy(name):
    fn, args = CASES[name]
    exe = rlx.compile(fn, *args, target="numpy", verify=True)
    assert_close(exe(*args), NUMPY[name](*args), scale=5)


def test_gather_index_with_tensor():
    table = RNG.standard_normal((10, 3)).astype(np.float32)
    ids = np.array([[1, 2], [9, 0]], np.int32)
    exe = rlx.compile(lambda t, i: t[i], table, ids, target="numpy")
    assert_close(exe(table, ids), table[ids])


def test_int_arithmetic_keeps_int_semantics():
    fn = lambda a: (a * 3 + 1, a // 2, a % 3)  # noqa: E731
    exe = rlx.compile(fn, IDX, target="numpy")
    got = exe(IDX)
    np.testing.assert_array_equal(got[0], IDX * 3 + 1)
    np.testing.assert_array_equal(got[1], IDX // 2)  # floor division, as numpy


def test_shape_error_names_op_shapes_and_line():
    def bad(x, y):
        return x @ y  # the line the error must point at

    with pytest.raises(rlx.ShapeError) as info:
        rlx.trace(bad, rlx.spec((2, 3)), rlx.spec((4, 5)))
    msg = str(info.value)
    assert "RLX-T001" in msg and "f32[2,3]" in msg and "f32[4,5]" in msg
    assert "test_tracing.py" in msg


def test_broadcast_error():
    with pytest.raises(rlx.ShapeError, match=r"do not broadcast"):
        rlx.trace(lambda x, y: x + y, rlx.spec((2, 3)), rlx.spec((4,)))


def test_axis_error():
    with pytest.raises(rlx.AxisError, match=r"axis 3 is out of range"):
        rlx.trace(lambda x: x.sum(axis=3), rlx.spec((2, 3)))


def test_unknown_dtype():
    with pytest.raises(rlx.DTypeError, match=r"unknown dtype 'f128'"):
        rlx.trace(lambda x: x.astype("f128"), rlx.spec((2,)))


def test_dtype_error_float_op_on_bool():
    with pytest.raises(rlx.DTypeError):
        rlx.trace(lambda x: rlx.nn.softmax(x), rlx.spec((2,), "i32"))


def test_python_control_flow_on_tensor_is_a_typed_error():
    def f(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(rlx.TraceError, match="truth value"):
        rlx.trace(f, rlx.spec((2,)))


def test_tensor_ops_outside_trace_raise():
    # the public ops compute eagerly (tests/frontend/test_eager.py); declaring a weight does not
    with pytest.raises(rlx.TraceError, match="only valid inside"):
        rlx.param(np.ones(2, np.float32), "w")


def test_wrong_argument_shape_at_call():
    exe = rlx.compile(lambda x: x * 2, np.ones((2, 2), np.float32), target="numpy")
    with pytest.raises(rlx.ArgumentError, match="compiled for f32"):
        exe(np.ones((3, 2), np.float32))


def test_params_named_after_user_variables_and_blocks():
    weight = np.ones((8, 3), np.float32) * 0.5

    def f(x):
        with rlx.block("proj"):
            return rlx.nn.linear(x, weight)

    g = rlx.trace(f, rlx.spec((2, 3)))
    assert [p.name for p in g.params] == ["proj.weight"]
    assert g.nodes[-1].loc.scope == "proj"


def test_trace_needs_no_numpy_arrays():
    g = rlx.trace(lambda x: rlx.nn.gelu(x, approximate="tanh") * 2, rlx.spec((8, 4)))
    assert g.outputs and g.nodes[0].op == "gelu"

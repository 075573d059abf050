"""WebGPU target, op by op: every kernel kind the WGSL renderer emits runs on the native device
(Mesa lavapipe in CI) and matches the numpy reference target on the same graph."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder, NameGen
from rlx_core.ir.graph import Graph, Level, TensorType, Value, ValueKind
from rlx_core.targets.registry import get_target

OK, WHY = get_target("webgpu").available()
pytestmark = pytest.mark.skipif(not OK, reason=f"no WebGPU adapter here: {WHY}")

TOL = {"f32": 2e-5, "f16": 2e-2}


class G:
    """A tiny graph maker: inputs, then ops (with the Builder's shape rules), then outputs."""

    def __init__(self) -> None:
        self.names = NameGen()
        self.b = Builder(self.names)
        self.inputs: list[Value] = []

    def input(self, dtype: str, shape: tuple[int, ...]) -> Value:
        v = Value(self.names.claim(f"x{len(self.inputs)}"),
                  TensorType(dt.get(dtype), tuple(shape)), ValueKind.INPUT)
        self.inputs.append(v)
        return v

    def __call__(self, op: str, *ins: Value, **attrs: Any) -> Value:
        return self.b.emit(op, list(ins), attrs)

    def graph(self, *outs: Value) -> Graph:
        return Graph("g", Level.HIR, tuple(self.inputs), (), tuple(self.b.nodes),
                     tuple(o.name for o in outs))


def data_for(v: Value, rng: np.random.Generator, positive: bool = False) -> np.ndarray:
    d, shape = v.type.dtype, v.type.shape
    if d.is_float:
        x = rng.standard_normal(shape)
        return (np.abs(x) + 0.1 if positive else x).astype(dt.to_numpy_name(d))
    if d == dt.bool_:
        return rng.random(shape) > 0.4
    lo = 1 if positive else (-5 if d.kind is dt.Kind.INT else 0)
    return rng.integers(lo, 6, shape).astype(dt.to_numpy_name(d))


def check(g: Graph, args: list[np.ndarray] | None = None, positive: bool = False,
          tol: float | None = None) -> Any:
    rng = np.random.default_rng(0)
    args = args if args is not None else [data_for(v, rng, positive) for v in g.inputs]
    got = rlx.compile(g, *args, target="webgpu")(*args)
    want = rlx.compile(g, *args, target="numpy")(*args)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for a, b in zip(got, want, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, (a.dtype, b.dtype, a.shape, b.shape)
        if b.dtype.kind in "biu":
            np.testing.assert_array_equal(a, b)
        else:
            t = tol if tol is not None else TOL[dt.get(b.dtype).name]
            np.testing.assert_allclose(a, b, rtol=t, atol=t)
    return got


UNARY_F = ["neg", "abs", "exp", "tanh", "erf", "logistic", "sin", "cos", "floor", "ceil",
           "round", "sign", "reciprocal"]


@pytest.mark.parametrize("op", UNARY_F)
def test_unary_f32(op: str) -> None:
    g = G()
    x = g.input("f32", (3, 5))
    check(g.graph(g(op, x)))


@pytest.mark.parametrize("op", ["log", "sqrt", "rsqrt"])
def test_unary_positive(op: str) -> None:
    g = G()
    x = g.input("f32", (7,))
    check(g.graph(g(op, x)), positive=True)


@pytest.mark.parametrize("dtype", ["f32", "i32", "u32", "i8", "u8", "i16"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "max", "min", "div", "rem"])
def test_binary(op: str, dtype: str) -> None:
    g = G()
    x, y = g.input(dtype, (4, 6)), g.input(dtype, (4, 6))
    check(g.graph(g(op, x, y)), positive=op in ("div", "rem"))


def test_integer_wraparound_and_bitwise() -> None:
    g = G()
    x, y = g.input("i8", (64,)), g.input("i8", (64,))
    s = g("mul", g("add", x, y), y)
    out = g("xor", g("and", x, y), g("or", s, x))
    big = np.arange(-32, 32, dtype=np.int8) * 4
    check(g.graph(s, out, g("neg", x)), [big, big[::-1].copy()])


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_compare_and_select(op: str) -> None:
    g = G()
    x, y = g.input("f32", (10,)), g.input("f32", (10,))
    p = g(op, x, y)
    check(g.graph(p, g("select", p, x, y)))


def test_bool_logic() -> None:
    g = G()
    a, b = g.input("bool", (9,)), g.input("bool", (9,))
    outs = [g(op, a, b) for op in ("and", "or", "xor", "add", "mul", "max", "min")]
    check(g.graph(*outs, g("logical_not", a)))


@pytest.mark.parametrize("src,dst", [("f32", "i32"), ("f32", "u8"), ("f32", "bool"),
                                     ("i32", "f32"), ("i32", "i8"), ("bool", "f32"),
                                     ("u32", "i32"), ("f32", "f16"), ("f16", "f32")])
def test_cast(src: str, dst: str) -> None:
    g = G()
    x = g.input(src, (12,))
    if src == "f32":
        vals = np.array([0.5, -0.5, 1.9, -1.9, 300.0, -300.0, 1e10, -1e10, np.nan, np.inf,
                         0.0, 7.0], np.float32)
        check(g.graph(g("cast", x, dtype=dt.get(dst))), [vals])
    else:
        check(g.graph(g("cast", x, dtype=dt.get(dst))))


def test_pow_with_negative_bases() -> None:
    g = G()
    x, y = g.input("f32", (6,)), g.input("f32", (6,))
    a = np.array([-2.0, -2.0, 3.0, 0.0, 2.0, -1.5], np.float32)
    b = np.array([3.0, 2.0, 0.5, 2.0, -1.0, 2.0], np.float32)
    check(g.graph(g("pow", x, y)), [a, b])


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod"])
@pytest.mark.parametrize("axes", [(1,), (0, 2), (0, 1, 2)])
def test_reductions(op: str, axes: tuple[int, ...]) -> None:
    g = G()
    x = g.input("f32", (3, 300, 5))
    tol = 1e-3 if op == "reduce_prod" else 1e-4
    check(g.graph(g(op, x, axes=axes)), tol=tol)


def test_integer_and_bool_reductions() -> None:
    g = G()
    x, p = g.input("i32", (4, 33)), g.input("bool", (4, 33))
    check(g.graph(g("reduce_sum", x, axes=(1,)), g("reduce_max", x, axes=(0,)),
                  g("reduce_max", p, axes=(1,)), g("reduce_min", p, axes=(1,))))


def test_argmax_first_maximum() -> None:
    g = G()
    x = g.input("f32", (3, 700))
    vals = np.zeros((3, 700), np.float32)
    vals[0, [5, 400]] = 2.0  # a tie: the first one wins
    vals[1, 699] = 1.0
    vals[2] = np.random.default_rng(1).standard_normal(700)
    check(g.graph(g("argmax", x, axis=1, index_dtype=dt.i32)), [vals])


def test_reduce_with_fused_producers_and_consumers() -> None:
    g = G()
    x, z = g.input("f32", (6, 40)), g.input("f32", (6,))
    s = g("reduce_sum", g("exp", g("mul", x, x)), axes=(1,))
    check(g.graph(g("add", g("log", s), z)), tol=1e-4)


@pytest.mark.parametrize("shapes,contract,batch", [
    (((5, 7), (7, 3)), ((1,), (0,)), ((), ())),
    (((33, 40), (17, 40)), ((1,), (1,)), ((), ())),  # x @ w.T, ragged tiles
    (((2, 3, 9, 8), (2, 3, 8, 4)), ((3,), (2,)), ((0, 1), (0, 1))),  # batched, as attention
    (((4, 6, 5), (2, 6, 4)), ((0, 1), (2, 1)), ((), ())),  # two contracted axes, odd layout
])
def test_dot_general(shapes: Any, contract: Any, batch: Any) -> None:
    g = G()
    a, b = g.input("f32", shapes[0]), g.input("f32", shapes[1])
    check(g.graph(g("dot_general", a, b, contract=contract, batch=batch)), tol=1e-4)


def test_matmul_epilogue_and_int_matmul() -> None:
    g = G()
    a, w, bias = g.input("f32", (9, 20)), g.input("f32", (20, 18)), g.input("f32", (18,))
    y = g("dot_general", a, w, contract=((1,), (0,)))
    bb = g("broadcast_in_dim", bias, shape=(9, 18), dims=(1,))
    relu = g("max", g("add", y, bb), g("constant", value=0.0, shape=(9, 18), dtype=dt.f32))
    ia, ib = g.input("i32", (3, 4)), g.input("i32", (4, 5))
    check(g.graph(relu, g("dot_general", ia, ib, contract=((1,), (0,)))), tol=1e-4)


def test_movement_ops() -> None:
    g = G()
    x, y = g.input("f32", (2, 3, 4)), g.input("f32", (2, 5, 4))
    outs = [g("transpose", x, perm=(2, 0, 1)), g("reshape", x, shape=(6, 4)),
            g("slice", y, start=(0, 1, 1), limit=(2, 5, 4), stride=(1, 2, 2)),
            g("pad", x, low=(1, 0, 2), high=(0, 1, 1), value=-3.0),
            g("concat", x, y, axis=1), g("iota", shape=(3, 4), dim=1, dtype=dt.i32),
            g("constant", value=(1.0, 2.0, 3.0, 4.0), shape=(2, 2), dtype=dt.f32),
            g("broadcast_in_dim", g("reduce_sum", x, axes=(1,)), shape=(2, 7, 4), dims=(0, 2))]
    check(g.graph(*outs))


def test_gather_and_scatter_add() -> None:
    g = G()
    table, ids = g.input("f32", (10, 6)), g.input("i32", (2, 3))
    x, idx, upd = g.input("f32", (4, 5)), g.input("i32", (7,)), g.input("f32", (4, 7))
    ids_v = np.array([[0, 9, -1], [3, 3, 5]], np.int32)
    idx_v = np.array([0, 2, 2, 4, -1, 0, 1], np.int32)
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((10, 6)).astype(np.float32), ids_v,
            rng.standard_normal((4, 5)).astype(np.float32), idx_v,
            rng.standard_normal((4, 7)).astype(np.float32)]
    check(g.graph(g("gather", table, ids, axis=0), g("scatter_add", x, idx, upd, axis=1)), args)


def test_f16_elementwise_and_matmul() -> None:
    if "shader-f16" not in get_target("webgpu").adapter().features:
        pytest.skip("adapter has no shader-f16")
    g = G()
    a, b = g.input("f16", (8, 12)), g.input("f16", (12, 5))
    y = g("dot_general", a, b, contract=((1,), (0,)))
    check(g.graph(y, g("tanh", g("mul", a, a)), g("reduce_sum", a, axes=(1,))))


def test_large_elementwise_folds_the_grid() -> None:
    # more than 65535 workgroups of 256 invocations: the grid is folded into y
    g = G()
    x = g.input("f32", (65536 * 256 + 300,))
    vals = np.arange(65536 * 256 + 300, dtype=np.float32) % 97
    (got,) = check(g.graph(g("add", x, x)), [vals])
    assert got[-1] == 2 * vals[-1]


def test_argmax_nan_counts_as_maximum() -> None:
    g = G()
    x = g.input("f32", (2, 300))
    vals = np.zeros((2, 300), np.float32)
    vals[0, 7], vals[0, 100], vals[0, 200] = 5.0, np.nan, np.nan
    vals[1, 299] = 1.0
    check(g.graph(g("argmax", x, axis=1, index_dtype=dt.i32)), [vals])


def test_head_split_attention_folds_into_strided_matmuls() -> None:
    """WebGPU decomposes attention; the head split's transposes fold into the dots' dimension
    numbers (batch dims 0 and 2 of the (batch, seq, heads, dim) projections), written either
    as the transformer pattern or as layout='bshd'."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 24, 3, 8)).astype(np.float32) for _ in range(3))
    keep = np.ones((2, 24), bool)
    keep[1, 20:] = False

    def pattern(a, b, c, m):
        sp = lambda t: t.transpose(0, 2, 1, 3)  # noqa: E731
        o = rlx.nn.attention(sp(a), sp(b), sp(c), mask="padding", padding_mask=m)
        return o.transpose(0, 2, 1, 3)

    def bshd(a, b, c, m):
        return rlx.nn.attention(a, b, c, mask="padding", padding_mask=m, layout="bshd")

    want = np.asarray(rlx.compile(pattern, q, k, v, keep, target="numpy", record=False)(
        q, k, v, keep))
    for fn in (pattern, bshd):
        exe = rlx.compile(fn, q, k, v, keep, target="webgpu", record=False)
        dots = [n for n in exe.mir.nodes if n.op == "dot_general"]
        assert len(dots) == 2 and dots[0].attr("batch") == ((0, 2), (0, 2))
        np.testing.assert_allclose(np.asarray(exe(q, k, v, keep)), want, rtol=1e-5, atol=1e-5)

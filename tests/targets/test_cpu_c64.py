"""c64 on the cpu target, in its own generated C (C99 ``float _Complex``): arithmetic, libm's
complex functions, sums and products, dot_general, casts and constants, against the numpy
reference; what the cpu does not compute on c64 is a typed legalization failure."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.dispatch.errors import LegalizationError
from tests.dispatch.graphs import GraphMaker

RNG = np.random.default_rng(64)


def _c64(*shape: int) -> np.ndarray:
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(np.complex64)


def _both(g, *args: np.ndarray, rtol: float = 2e-6) -> np.ndarray:
    want = rlx.compile(g, *args, target="numpy")(*args)
    exe = rlx.compile(g, *args, target="cpu")
    assert exe.target == "cpu"
    got = exe(*args)
    assert got.dtype == want.dtype == np.complex64
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)
    return got


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
def test_binary(op: str) -> None:
    m = GraphMaker()
    a, b = m.input("a", "c64", (5, 7)), m.input("b", "c64", (5, 7))
    _both(m.graph(m.op(op, [a, b])), _c64(5, 7), _c64(5, 7), rtol=1e-5 if op == "pow" else 2e-6)


@pytest.mark.parametrize("op", ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sin",
                                "cos", "reciprocal"])
def test_unary(op: str) -> None:
    m = GraphMaker()
    a = m.input("a", "c64", (6, 5))
    _both(m.graph(m.op(op, [a])), _c64(6, 5), rtol=1e-5)


@pytest.mark.parametrize("op,axes", [("reduce_sum", (1,)), ("reduce_sum", (0,)),
                                     ("reduce_sum", (0, 1)), ("reduce_prod", (1,))])
def test_reductions(op: str, axes: tuple[int, ...]) -> None:
    m = GraphMaker()
    a = m.input("a", "c64", (9, 33))  # 33 columns: the column-order reduce kernel too
    x = _c64(9, 33) if op == "reduce_sum" else (_c64(9, 33) * 0.3 + 1).astype(np.complex64)
    _both(m.graph(m.op(op, [a], axes=axes)), x, rtol=1e-5)


def test_matmul_plain_batched_and_transposed() -> None:
    a, b = _c64(4, 6), _c64(6, 3)
    _both(rlx.trace(lambda x, y: x @ y, a, b), a, b)
    a3, b3 = _c64(2, 4, 6), _c64(2, 6, 5)
    _both(rlx.trace(lambda x, y: x @ y, a3, b3), a3, b3)
    bt = _c64(3, 6)  # contracted along its last axis: the dot-product loop
    m = GraphMaker()
    x, y = m.input("x", "c64", (4, 6)), m.input("y", "c64", (3, 6))
    d = m.op("dot_general", [x, y], contract=((1,), (1,)), batch=((), ()))
    _both(m.graph(d), a, bt)


def test_casts_constants_select_and_compare() -> None:
    m = GraphMaker()
    r = m.input("r", "f32", (8,))
    z = m.input("z", "c64", (8,))
    zr = m.op("cast", [r], dtype="c64")
    k = m.op("constant", [], value=complex(0.5, -2.0), dtype="c64", shape=(8,))
    s = m.op("add", [m.op("mul", [zr, k]), z])
    eq = m.op("eq", [s, z])
    pick = m.op("select", [eq, z, s])
    back = m.op("cast", [pick], dtype="f32")  # the real part
    g = m.graph(pick)
    args = (RNG.standard_normal(8).astype(np.float32), _c64(8))
    _both(g, *args)
    g2 = m.graph(back)
    want = rlx.compile(g2, *args, target="numpy")(*args)
    got = rlx.compile(g2, *args, target="cpu")(*args)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


def test_an_op_the_cpu_lacks_on_c64_is_a_typed_failure_with_the_split_hint() -> None:
    m = GraphMaker()
    z = m.input("z", "c64", (4,))
    g = m.graph(m.op("sign", [z], line=3))
    with pytest.raises(LegalizationError) as info:
        rlx.compile(g, _c64(4), target="cpu")
    assert "RLX-L002" in str(info.value) and "real and imaginary" in str(info.value)


def test_data_movement() -> None:
    m = GraphMaker()
    z = m.input("z", "c64", (4, 6))
    ids = m.input("ids", "i32", (3,))
    t = m.op("transpose", [z], perm=(1, 0))
    s = m.op("slice", [t], start=(1, 0), limit=(5, 4), stride=(2, 1))
    p = m.op("pad", [s], low=(1, 0), high=(0, 2), value=1.5)
    c = m.op("concat", [p, p], axis=0)
    gth = m.op("gather", [z, ids], axis=0)
    g = m.graph(c, gth)
    args = (_c64(4, 6), np.array([3, 0, 2], np.int32))
    want = rlx.compile(g, *args, target="numpy")(*args)
    got = rlx.compile(g, *args, target="cpu")(*args)
    for w_, g_ in zip(want, got, strict=True):
        np.testing.assert_array_equal(g_, w_)

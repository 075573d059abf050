"""Every MIR primitive, in every dtype each target claims, against the numpy reference.

One graph per (family, dtype) keeps compiles few: each output is one op, and a failure names
the op. Shapes are small but non-trivial (broadcast, odd sizes, several axes).
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import TensorType
from rlx_core.ir.ops.mir import BINARY, COMPARE, REDUCE, UNARY
from tests.conformance.harness import (
    TARGETS,
    TESTED_DTYPES,
    accepts,
    check_mir,
    claimed_ops,
    claims,
    executable_target,
    oracle_defined,
    values,
)
from tests.dispatch.graphs import GraphMaker

SHAPE = (3, 5, 4)
_POSITIVE = {"log", "sqrt", "rsqrt"}
_NONZERO = {"div", "rem", "reciprocal"}


def _rng(*key: object) -> np.random.Generator:
    return np.random.default_rng(abs(hash(tuple(str(k) for k in key))) % 2**32)


@pytest.mark.parametrize("d", TESTED_DTYPES)
@pytest.mark.parametrize("target", TARGETS)
def test_unary(target: str, d: str) -> None:
    ops = claimed_ops(target, d, UNARY)
    rng = _rng("unary", d)
    m = GraphMaker()
    x, xp = m.input("x", d, SHAPE), m.input("xp", d, SHAPE)
    xs = [values(d, SHAPE, rng), values(d, SHAPE, rng, "positive")]
    outs, labels = [], []
    for op in ops:
        use_pos = op in _POSITIVE
        arg = xs[1] if use_pos else xs[0]
        t = TensorType(dt.get(d), SHAPE)
        if op in _NONZERO:
            arg = xs[1]
        if not accepts(op, [t], {}) or not oracle_defined(op, {}, [arg]):
            continue
        outs.append(m.op(op, [xp if arg is xs[1] else x]))
        labels.append(op)
    if not outs:
        pytest.skip(f"no unary op is defined on {d}")
    check_mir(target, m.graph(*outs), xs, labels)


@pytest.mark.parametrize("d", TESTED_DTYPES)
@pytest.mark.parametrize("target", TARGETS)
def test_binary_and_compare(target: str, d: str) -> None:
    ops = claimed_ops(target, d, BINARY + COMPARE)
    rng = _rng("binary", d)
    m = GraphMaker()
    a, b = m.input("a", d, SHAPE), m.input("b", d, SHAPE)
    nz, ex = m.input("nz", d, SHAPE), m.input("ex", d, SHAPE)
    xs = [values(d, SHAPE, rng), values(d, SHAPE, rng), values(d, SHAPE, rng, "nonzero"),
          values(d, SHAPE, rng, "small")]
    if dt.get(d).is_float:
        xs[0] = values(d, SHAPE, rng, "positive")  # pow of a negative base is NaN noise
    xs[1].reshape(-1)[:3] = xs[0].reshape(-1)[:3]  # some equal pairs for the comparisons
    t = TensorType(dt.get(d), SHAPE)
    outs, labels = [], []
    for op in ops:
        rhs, rv = (nz, xs[2]) if op in _NONZERO else (ex, xs[3]) if op == "pow" else (b, xs[1])
        if not accepts(op, [t, t], {}) or not oracle_defined(op, {}, [xs[0], rv]):
            continue
        outs.append(m.op(op, [a, rhs]))
        labels.append(op)
    if not outs:
        pytest.skip(f"no binary op is defined on {d}")
    check_mir(target, m.graph(*outs), xs, labels)


@pytest.mark.parametrize("d", TESTED_DTYPES)
@pytest.mark.parametrize("target", TARGETS)
def test_select(target: str, d: str) -> None:
    tgt = executable_target(target)
    if not claims(tgt, "select", d, "bool"):
        pytest.skip(f"{target} does not claim select for {d}")
    rng = _rng("select", d)
    m = GraphMaker()
    p, x, y = m.input("p", "bool", SHAPE), m.input("x", d, SHAPE), m.input("y", d, SHAPE)
    xs = [values("bool", SHAPE, rng), values(d, SHAPE, rng), values(d, SHAPE, rng)]
    check_mir(target, m.graph(m.op("select", [p, x, y])), xs, ["select"])


@pytest.mark.parametrize("src", TESTED_DTYPES)
@pytest.mark.parametrize("target", TARGETS)
def test_cast(target: str, src: str) -> None:
    tgt = executable_target(target)
    dests = [d for d in TESTED_DTYPES if claims(tgt, "cast", src, d)]
    if not dests:
        pytest.skip(f"{target} claims no cast from {src}")
    rng = _rng("cast", src)
    m = GraphMaker()
    x = m.input("x", src, SHAPE)
    arr = values(src, SHAPE, rng, "wide")
    outs, labels = [], []
    for d in dests:
        if not oracle_defined("cast", {"dtype": dt.get(d)}, [arr]):
            continue
        outs.append(m.op("cast", [x], dtype=dt.get(d)))
        labels.append(f"cast {src}->{d}")
    check_mir(target, m.graph(*outs), [arr], labels)


@pytest.mark.parametrize("d", TESTED_DTYPES)
@pytest.mark.parametrize("target", TARGETS)
def test_reductions(target: str, d: str) -> None:
    ops = claimed_ops(target, d, REDUCE + ("argmax",))
    rng = _rng("reduce", d)
    m = GraphMaker()
    x = m.input("x", d, SHAPE)
    arr = values(d, SHAPE, rng)
    t = TensorType(dt.get(d), SHAPE)
    outs, labels = [], []
    for op in ops:
        if op == "argmax":
            variants = [{"axis": 1, "index_dtype": dt.i32}, {"axis": 2, "index_dtype": dt.i64}]
        else:
            variants = [{"axes": (1,)}, {"axes": (0, 2)}, {"axes": ()}, {"axes": (0, 1, 2)}]
        for attrs in variants:
            if op == "argmax" and not claims(executable_target(target), op,
                                             attrs["index_dtype"].name):
                continue
            if not accepts(op, [t], attrs) or not oracle_defined(op, attrs, [arr]):
                continue
            outs.append(m.op(op, [x], **attrs))
            labels.append(f"{op} {attrs}")
    if not outs:
        pytest.skip(f"no reduction is defined on {d}")
    check_mir(target, m.graph(*outs), [arr], labels)


@pytest.mark.parametrize("d", TESTED_DTYPES)
@pytest.mark.parametrize("target", TARGETS)
def test_movement(target: str, d: str) -> None:
    ops = ("broadcast_in_dim", "reshape", "transpose", "slice", "pad", "concat", "add")
    tgt = executable_target(target)
    if not all(claims(tgt, op, d) for op in ops[:-1]):
        pytest.skip(f"{target} does not claim every movement op for {d}")
    rng = _rng("movement", d)
    m = GraphMaker()
    x, v = m.input("x", d, SHAPE), m.input("v", d, (5,))
    xs = [values(d, SHAPE, rng), values(d, (5,), rng)]
    outs = [
        m.op("broadcast_in_dim", [v], shape=(2, 5, 3), dims=(1,)),
        m.op("broadcast_in_dim", [x], shape=(2, 3, 5, 4), dims=(1, 2, 3)),
        m.op("reshape", [x], shape=(4, 15)),
        m.op("transpose", [x], perm=(2, 0, 1)),
        m.op("slice", [x], start=(1, 0, 1), limit=(3, 5, 4), stride=(1, 2, 2)),
        m.op("pad", [x], low=(1, 0, 2), high=(0, 2, 1), value=1.0),
        m.op("concat", [x, x], axis=1),
    ]
    labels = ["broadcast row", "broadcast lead", "reshape", "transpose", "slice", "pad", "concat"]
    if claims(tgt, "add", d) and accepts("add", [TensorType(dt.get(d), (3, 5, 4))] * 2, {}):
        # a broadcast and a transpose read through index maps inside one fused loop
        bv = m.op("broadcast_in_dim", [v], shape=(3, 5, 4), dims=(1,))
        tx = m.op("transpose", [m.op("transpose", [x], perm=(1, 0, 2))], perm=(1, 0, 2))
        outs.append(m.op("add", [tx, bv]))
        labels.append("add(transpose, broadcast)")
    check_mir(target, m.graph(*outs), xs, labels)


@pytest.mark.parametrize("d", TESTED_DTYPES)
@pytest.mark.parametrize("target", TARGETS)
def test_gather_scatter(target: str, d: str) -> None:
    tgt = executable_target(target)
    idx_t = next((i for i in ("i32", "i64") if claims(tgt, "gather", d, i) and
                  claims(tgt, "scatter_add", d, i)), None)
    if idx_t is None:
        pytest.skip(f"{target} does not claim gather/scatter_add for {d}")
    rng = _rng("gather", d)
    m = GraphMaker()
    x, i = m.input("x", d, SHAPE), m.input("i", idx_t, (2, 3))
    u = m.input("u", d, (3, 2, 3, 4))
    idx = np.array([[0, 3, -1], [2, 2, -4]], dtype=dt.to_numpy_name(dt.get(idx_t)))
    xs = [values(d, SHAPE, rng), idx, values(d, (3, 2, 3, 4), rng)]
    outs = [m.op("gather", [x, i], axis=1), m.op("gather", [x, i], axis=2)]
    labels = ["gather axis 1", "gather axis 2 (negative indices)"]
    if accepts("scatter_add", [TensorType(dt.get(d), SHAPE), TensorType(dt.get(idx_t), (2, 3)),
                               TensorType(dt.get(d), (3, 2, 3, 4))], {"axis": 1}):
        outs.append(m.op("scatter_add", [x, i, u], axis=1))
        labels.append("scatter_add (repeated index)")
    check_mir(target, m.graph(*outs), xs, labels)


_DOTS = [
    # (lhs shape, rhs shape, contract, batch): plain, rhs transposed (linear), lhs transposed,
    # batched (attention), and an odd layout that needs a copy into canonical order
    ((4, 6), (6, 5), ((1,), (0,)), ((), ())),
    ((4, 6), (5, 6), ((1,), (1,)), ((), ())),
    ((6, 4), (6, 5), ((0,), (0,)), ((), ())),
    ((2, 3, 6), (2, 6, 4), ((2,), (1,)), ((0,), (0,))),
    ((3, 2, 6), (6, 4, 2), ((2,), (0,)), ((1,), (2,))),
    ((2, 3, 4), (3, 4, 5), ((1, 2), (0, 1)), ((), ())),
]


@pytest.mark.parametrize("d", TESTED_DTYPES)
@pytest.mark.parametrize("target", TARGETS)
def test_dot_general(target: str, d: str) -> None:
    tgt = executable_target(target)
    if not claims(tgt, "dot_general", d):
        pytest.skip(f"{target} does not claim dot_general for {d}")
    rng = _rng("dot", d)
    m = GraphMaker()
    outs, labels, xs = [], [], []
    for n, (ls, rs, contract, batch) in enumerate(_DOTS):
        attrs = {"contract": contract, "batch": batch}
        tl, tr = TensorType(dt.get(d), ls), TensorType(dt.get(d), rs)
        if not accepts("dot_general", [tl, tr], attrs):
            continue
        a, b = m.input(f"a{n}", d, ls), m.input(f"b{n}", d, rs)
        xs += [values(d, ls, rng), values(d, rs, rng)]
        y = m.op("dot_general", [a, b], **attrs)
        outs.append(y)
        labels.append(f"dot {ls} x {rs} {attrs}")
        if n == 1 and claims(tgt, "add", d) and claims(tgt, "max", d):
            # an epilogue: bias add and relu fused after the GEMM
            bias = m.input("bias", d, (5,))
            xs.append(values(d, (5,), rng))
            bb = m.op("broadcast_in_dim", [bias], shape=(4, 5), dims=(1,))
            zero = m.op("constant", [], value=0, shape=(4, 5), dtype=dt.get(d))
            outs.append(m.op("max", [m.op("add", [y, bb]), zero]))
            labels.append("dot + bias, relu")
    if not outs:
        pytest.skip(f"dot_general is not defined on {d}")
    check_mir(target, m.graph(*outs), xs, labels)


@pytest.mark.parametrize("d", TESTED_DTYPES)
@pytest.mark.parametrize("target", TARGETS)
def test_sources(target: str, d: str) -> None:
    tgt = executable_target(target)
    if not (claims(tgt, "iota", d) and claims(tgt, "constant", d) and claims(tgt, "add", d)):
        pytest.skip(f"{target} does not claim iota/constant/add for {d}")
    m = GraphMaker()
    x = m.input("x", d, (2, 3))
    arr = values(d, (2, 3), _rng("src", d))
    iota = m.op("iota", [], shape=(2, 3), dim=1, dtype=dt.get(d))
    flat = m.op("constant", [], value=(1, 0, 2, 3, 0, 1), shape=(2, 3), dtype=dt.get(d))
    splat = m.op("constant", [], value=2, shape=(2, 3), dtype=dt.get(d))
    outs = [iota, flat, splat]
    labels = ["iota", "tuple constant", "splat constant"]
    if accepts("add", [TensorType(dt.get(d), (2, 3))] * 2, {}):
        outs.append(m.op("add", [m.op("add", [x, iota]), flat]))
        labels.append("x + iota + constant")
    check_mir(target, m.graph(*outs), [arr], labels)


@pytest.mark.parametrize("target", TARGETS)
def test_gather_out_of_range_is_a_typed_error(target: str) -> None:
    from rlx_core.errors import RlxError

    tgt = executable_target(target)
    if not claims(tgt, "gather", "f32", "i32"):
        pytest.skip(f"{target} does not claim gather")
    m = GraphMaker()
    x, i = m.input("x", "f32", (4, 3)), m.input("i", "i32", (2,))
    g = m.graph(m.op("gather", [x, i], axis=0))
    import rlx_core as rlx

    exe = rlx.compile(g, target=target, record=False)
    with pytest.raises(RlxError, match="out of range"):
        exe(np.zeros((4, 3), np.float32), np.array([1, 9], np.int32))
    # the error does not stick: the next good call works
    out = exe(np.ones((4, 3), np.float32), np.array([1, -1], np.int32))
    np.testing.assert_array_equal(out, np.ones((2, 3), np.float32))

"""Algebraic simplification: every rule is exact -- simplified graphs give bit-identical results
on inputs full of -0.0, NaN, inf and integer extremes -- and firings are traced by rule name."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_core.compile_trace import CompileTrace, code_location
from rlx_core.ir.graph import Graph
from rlx_core.ir.verifier import verify
from rlx_core.passes import algebraic_simplify as simp
from rlx_core.passes.algebraic_simplify import AlgebraicSimplify
from rlx_core.passes.base import PassContext
from rlx_core.passes.dce import DCE
from tests.passes.helpers import G, run_numpy, same_bits

FLOAT_X = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 3e38], np.float32)
INT_X = np.array([0, -1, 1, 2**31 - 1, -(2**31), 12345, -7, 8], np.int32)


def simplify(g: Graph, ctx: PassContext | None = None) -> Graph:
    ctx = ctx or PassContext()
    return verify(DCE().run(verify(AlgebraicSimplify().run(g, ctx)), ctx))


def assert_equivalent(before: Graph, after: Graph, args: dict[str, np.ndarray]) -> None:
    with np.errstate(all="ignore"):
        want, got = run_numpy(before, args), run_numpy(after, args)
    for w, g in zip(want, got, strict=True):
        assert same_bits(g, w), (g, w)


def binary_with_const(op: str, dtype: str, value: object, const_first: bool = False) -> Graph:
    g = G()
    x = g.input("x", dtype, (8,))
    c = g.op("broadcast_in_dim", g.const(value, dtype), shape=(8,), dims=())
    y = g.op(op, c, x) if const_first else g.op(op, x, c)
    return g.graph(y)


@pytest.mark.parametrize(
    "op,value,first,fires",
    [
        ("mul", 1.0, False, True),
        ("mul", 1.0, True, True),
        ("div", 1.0, False, True),
        ("sub", 0.0, False, True),
        ("add", -0.0, False, True),
        ("add", -0.0, True, True),
        ("add", 0.0, False, False),
        ("add", 0.0, True, False),
        ("sub", -0.0, False, False),
        ("mul", 0.0, False, False),
        ("mul", -1.0, False, False),
        ("div", -1.0, False, False),
    ],
)
def test_float_rules_fire_only_when_exact(op, value, first, fires) -> None:
    g = binary_with_const(op, "f32", value, first)
    out = simplify(g)
    assert (out.nodes == ()) is fires, [n.op for n in out.nodes]
    assert_equivalent(g, out, {"x": FLOAT_X})


@pytest.mark.parametrize(
    "op,value,first",
    [
        ("mul", 1, False),
        ("mul", 1, True),
        ("div", 1, False),
        ("add", 0, False),
        ("add", 0, True),
        ("sub", 0, False),
        ("mul", 0, False),
        ("mul", 0, True),
    ],
)
def test_int_rules(op, value, first) -> None:
    g = binary_with_const(op, "i32", value, first)
    out = simplify(g)
    assert all(n.op in ("constant", "broadcast_in_dim") for n in out.nodes)
    assert_equivalent(g, out, {"x": INT_X})


@pytest.mark.parametrize("dtype,x", [("i32", INT_X), ("f32", FLOAT_X)])
def test_self_operations(dtype, x) -> None:
    g = G()
    v = g.input("x", dtype, (8,))
    outs = [g.op("max", v, v), g.op("min", v, v), g.op("sub", v, v), g.op("neg", g.op("neg", v))]
    graph = g.graph(*outs)
    out = simplify(graph)
    assert_equivalent(graph, out, {"x": x})
    subs = [n for n in out.nodes if n.op == "sub"]
    assert len(subs) == (1 if dtype == "f32" else 0)  # inf - inf is NaN, so floats keep x - x


def test_movement_chains_are_exact() -> None:
    g = G()
    x = g.input("x", "f32", (2, 3, 4))
    t = g.op("transpose", g.op("transpose", x, perm=(2, 0, 1)), perm=(0, 2, 1))
    r = g.op("reshape", g.op("reshape", t, shape=(8, 3)), shape=(2, 12))
    same = g.op("cast", g.op("reshape", x, shape=(2, 3, 4)), dtype="f32")
    graph = g.graph(t, r, same)
    out = simplify(graph)
    assert [n.op for n in out.nodes] == ["transpose", "reshape"]
    assert out.outputs[2] == "x"
    args = {"x": np.arange(24, dtype=np.float32).reshape(2, 3, 4)}
    assert_equivalent(graph, out, args)


def test_transposes_feeding_a_matmul_fold_into_its_dimension_numbers() -> None:
    # attention's head split: q and k are (b, s, h, d) -> (b, h, s, d) transposes
    g = G()
    xq = g.input("xq", "i32", (2, 5, 3, 4))
    xk = g.input("xk", "i32", (2, 5, 3, 4))
    q = g.op("transpose", xq, perm=(0, 2, 1, 3))
    k = g.op("transpose", xk, perm=(0, 2, 1, 3))
    s = g.op("dot_general", q, k, contract=((3,), (3,)), batch=((0, 1), (0, 1)))
    graph = g.graph(s)
    out = simplify(graph)
    assert [n.op for n in out.nodes] == ["dot_general"]
    dot = out.nodes[0]
    assert dot.inputs == ("xq", "xk")
    assert dot.attr("batch") == ((0, 2), (0, 2)) and dot.attr("contract") == ((3,), (3,))
    rng = np.random.default_rng(0)
    args = {n: rng.integers(-9, 9, (2, 5, 3, 4)).astype(np.int32) for n in ("xq", "xk")}
    assert_equivalent(graph, out, args)


def test_a_transpose_that_reorders_free_dims_stays() -> None:
    g = G()
    x = g.input("x", "f32", (3, 4, 5))
    w = g.input("w", "f32", (5, 2))
    t = g.op("transpose", x, perm=(1, 0, 2))  # free dims 0 and 1 swap: the result would too
    y = g.op("dot_general", t, w, contract=((2,), (0,)))
    out = simplify(g.graph(y))
    assert [n.op for n in out.nodes] == ["transpose", "dot_general"]


def test_select_and_logical_not() -> None:
    g = G()
    p = g.input("p", "bool", (4,))
    a = g.input("a", "f32", (4,))
    b = g.input("b", "f32", (4,))
    f = g.op("broadcast_in_dim", g.const(False, "bool"), shape=(4,), dims=())
    s1 = g.op("select", f, a, b)
    s2 = g.op("select", g.op("logical_not", g.op("logical_not", p)), s1, a)
    graph = g.graph(s2)
    out = simplify(graph)
    assert [n.op for n in out.nodes] == ["select"] and out.nodes[0].inputs == ("p", "b", "a")
    args = {
        "p": np.array([True, False, True, False]),
        "a": np.array([1, 2, 3, 4], np.float32),
        "b": -np.array([1, 2, 3, 4], np.float32),
    }
    assert_equivalent(graph, out, args)


def test_logical_not_on_ints_is_bitwise_so_it_is_an_involution() -> None:
    g = G()
    x = g.input("x", "i32", (8,))
    y = g.op("logical_not", g.op("logical_not", x))
    graph = g.graph(y)
    out = simplify(graph)
    assert out.nodes == () and out.outputs == ("x",)
    assert_equivalent(graph, out, {"x": INT_X})


def test_trace_names_each_rule_and_its_location() -> None:
    trace = CompileTrace()
    g = G()
    x = g.input("x", "i32", (8,))
    one = g.op("broadcast_in_dim", g.const(1, "i32"), shape=(8,), dims=())
    y = g.op("neg", g.op("neg", g.op("mul", x, one)))
    AlgebraicSimplify().run(g.graph(y), PassContext(trace=trace))
    rules = trace.take_rules()
    assert [r.rule for r in rules] == ["mul_by_one", "involution"]
    assert (rules[0].file, rules[0].line) == code_location(simp.mul_by_one)
    assert (rules[1].file, rules[1].line) == code_location(simp.involution)
    assert all(r.file.endswith("rlx_core/passes/algebraic_simplify.py") for r in rules)


def test_no_trace_no_records(monkeypatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(PassContext, "record", lambda self, *a, **k: calls.append(a))
    out = AlgebraicSimplify().run(binary_with_const("mul", "f32", 1.0), PassContext())
    assert calls == [] and out.outputs == ("x",)

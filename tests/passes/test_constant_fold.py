"""Constant folding: folded graphs compute what the unfolded ones compute (numpy reference),
splats stay splats, limits and unsupported dtypes are respected, firings are traced."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_core.compile_trace import CompileTrace, code_location
from rlx_core.ir.graph import Graph, Loc
from rlx_core.ir.verifier import verify
from rlx_core.passes.base import PassContext
from rlx_core.passes.const_eval import MAX_ELEMENTS
from rlx_core.passes.constant_fold import ConstantFold, fold_constant_operands
from rlx_core.passes.dce import DCE
from tests.passes.helpers import G, run_numpy, same_bits


def fold(g: Graph, ctx: PassContext | None = None) -> Graph:
    ctx = ctx or PassContext()
    return verify(DCE().run(verify(ConstantFold().run(g, ctx)), ctx))


def small_program() -> Graph:
    g = G()
    a = g.const(tuple(float(v) for v in np.linspace(-3, 3, 12)), "f32", (3, 4))
    b = g.const(0.1, "f32")
    bb = g.op("broadcast_in_dim", b, shape=(3, 4), dims=())
    s = g.op("mul", a, bb)
    t = g.op("transpose", s, perm=(1, 0))
    e = g.op("exp", t)
    r = g.op("reshape", e, shape=(12,))
    i = g.op("iota", shape=(12,), dim=0, dtype="i32")
    k = g.const(5, "i32", (12,))
    lt = g.op("lt", i, k)
    cf = g.op("cast", i, dtype="f32")
    sel = g.op("select", lt, r, cf)
    w = g.const(tuple(range(-6, 6)), "i8", (12,))
    w2 = g.op("mul", w, g.const(100, "i8", (12,)))
    q = g.op("div", w2, g.const(7, "i8", (12,)))
    return g.graph(sel, q, lt)


def test_folds_everything_and_agrees_with_the_reference() -> None:
    g = small_program()
    out = fold(g)
    assert {n.op for n in out.nodes} == {"constant"} and len(out.nodes) == 3
    want = run_numpy(g, {})
    got = run_numpy(out, {})
    for gv, wv in zip(got, want, strict=True):
        if gv.dtype.kind == "f":
            # exp in double rounded once vs numpy's float32 exp: within an ulp or two
            np.testing.assert_array_max_ulp(gv, wv, maxulp=2)
        else:
            assert same_bits(gv, wv)


def test_splat_broadcast_folds_to_a_splat_and_leaves_inputs_alone() -> None:
    g = G()
    x = g.input("x", "f32", (256, 512))
    two = g.op("broadcast_in_dim", g.const(2.0, "f32"), shape=(256, 512), dims=())
    half = g.op(
        "mul", two, g.op("broadcast_in_dim", g.const(0.25, "f32"), shape=(256, 512), dims=())
    )
    y = g.op("mul", x, half)
    out = fold(g.graph(y))
    consts = [n for n in out.nodes if n.op == "constant"]
    assert len(consts) == 1 and consts[0].attr("value") == 0.5
    assert consts[0].attr("shape") == (256, 512)
    assert out.nodes[-1].op == "mul" and out.nodes[-1].inputs[0] == "x"


def test_large_tuple_results_are_not_folded() -> None:
    g = G()
    n = MAX_ELEMENTS * 2
    io = g.op("iota", shape=(n,), dim=0, dtype="i32")
    out = fold(g.graph(io))
    assert [nd.op for nd in out.nodes] == ["iota"]


@pytest.mark.parametrize("dtype", ["bf16", "c64"])
def test_unsupported_dtypes_are_left_alone(dtype) -> None:
    g = G()
    c = g.const(1.0, dtype, (2,))
    y = g.op("add", c, c)
    out = fold(g.graph(y))
    assert [n.op for n in out.nodes] == ["constant", "add"]


def test_folded_constants_keep_provenance() -> None:
    g = G()
    a = g.const(3, "i32")
    b = g.op("neg", a, loc=Loc("model.py", 9, "block1", "h7", "gelu"))
    out = fold(g.graph(b))
    (c,) = out.nodes
    assert c.op == "constant" and c.attr("value") == -3 and c.out.name == b.name
    assert c.loc == Loc("model.py", 9, "block1", "h7", "gelu")


def test_trace_records_firings_with_rule_name_and_location() -> None:
    trace = CompileTrace()
    g = small_program()
    ConstantFold().run(g, PassContext(trace=trace))
    rules = trace.take_rules()
    folded = [n for n in g.nodes if n.op != "constant"]
    assert len(rules) == len(folded)
    assert {r.rule for r in rules} == {"fold_constant_operands"}
    assert {(r.file, r.line) for r in rules} == {code_location(fold_constant_operands)}
    assert rules[0].file.endswith("rlx_core/passes/constant_fold.py")
    assert all("= constant()" in r.after[0] for r in rules)
    assert [r.node for r in rules] == [n.out.name for n in folded]


def test_no_trace_no_records(monkeypatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(PassContext, "record", lambda self, *a, **k: calls.append(a))
    out = ConstantFold().run(small_program(), PassContext(trace=None))
    assert calls == [] and any(n.op == "constant" for n in out.nodes)

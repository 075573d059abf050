"""DCE: only nodes the outputs depend on survive, in their original order."""

from __future__ import annotations

from rlx_core.compile_trace import CompileTrace, code_location
from rlx_core.ir.graph import Level
from rlx_core.ir.verifier import verify
from rlx_core.passes import dce
from rlx_core.passes.base import PassContext
from rlx_core.passes.dce import DCE
from tests.passes.helpers import G


def test_drops_unreachable_nodes_and_keeps_order() -> None:
    g = G()
    x = g.input("x", "f32", (4,))
    a = g.op("exp", x)
    dead = g.op("tanh", g.op("neg", a))
    b = g.op("add", a, x)
    c = g.op("mul", b, a)
    out = verify(DCE().run(g.graph(c, a), PassContext()))
    assert [n.out.name for n in out.nodes] == [a.name, b.name, c.name]
    assert dead.name not in {n.out.name for n in out.nodes}
    assert out.inputs == g.graph(c).inputs


def test_hir_graphs_too() -> None:
    g = G()
    x = g.input("x", "f32", (2, 8))
    w = g.input("w", "f32", (4, 8))
    y = g.op("linear", x, w)
    g.op("softmax", y)
    out = verify(DCE().run(g.graph(y, level=Level.HIR), PassContext()))
    assert [n.op for n in out.nodes] == ["linear"] and out.level is Level.HIR


def test_trace_records_each_dropped_node() -> None:
    g = G()
    x = g.input("x", "f32", (4,))
    d1 = g.op("exp", x)
    d2 = g.op("neg", d1)
    trace = CompileTrace()
    DCE().run(g.graph(x), PassContext(trace=trace))
    rules = trace.take_rules()
    assert [r.node for r in rules] == [d1.name, d2.name]
    assert {(r.rule, r.file, r.line) for r in rules} == {
        ("dead_node", *code_location(dce.dead_node))
    }
    assert all(r.after == [] for r in rules)


def test_no_trace_no_records(monkeypatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(PassContext, "record", lambda self, *a, **k: calls.append(a))
    g = G()
    x = g.input("x", "f32", (4,))
    g.op("exp", x)
    out = DCE().run(g.graph(x), PassContext())
    assert calls == [] and out.nodes == ()

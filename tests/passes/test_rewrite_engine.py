"""The rewrite engine: forwarding, node replacement, fixpoint, provenance, outputs, errors, and
the trace of rule firings (recorded with rule name and file:line, nothing when tracing is off)."""

from __future__ import annotations

import pytest

from rlx_core.compile_trace import CompileTrace, code_location
from rlx_core.ir.graph import Graph, Level, Loc, Node
from rlx_core.ir.printer import print_graph
from rlx_core.ir.verifier import verify
from rlx_core.passes.base import PassContext
from rlx_core.passes.dce import DCE
from rlx_core.passes.rewrite_engine import (
    PassLevelError,
    Replacement,
    RewriteError,
    RewritePass,
    RewriteView,
    rewrite,
)
from tests.passes.helpers import G


def live(g: Graph) -> Graph:
    """The engine leaves orphaned nodes for dce (one concept per pass)."""
    return verify(DCE().run(g, PassContext()))


def drop_double_neg(node: Node, view: RewriteView) -> Replacement:
    inner = view.producer(node.inputs[0])
    return inner.inputs[0] if inner is not None and inner.op == "neg" else None


def exp_to_two_nodes(node: Node, view: RewriteView) -> Replacement:
    """exp(x) -> neg(neg(exp...)) is silly but makes two nodes, the last replacing the match."""
    if node.attr("marked"):
        return None
    a = view.emit("neg", [node.inputs[0]])
    b = view.emit("neg", [a.out.name])
    return [a, b]


def sample() -> tuple[Graph, G]:
    g = G()
    x = g.input("x", "f32", (4,))
    n1 = g.op("neg", x, loc=Loc("model.py", 7, "blk", "src", "gelu"))
    n2 = g.op("neg", n1, loc=Loc("model.py", 8, "blk", "src", "gelu"))
    y = g.op("tanh", n2)
    return g.graph(y, n2), g


def test_forwarding_renames_uses_and_outputs() -> None:
    g, _ = sample()
    out = live(rewrite(g, (("neg", drop_double_neg),), PassContext()))
    assert [n.op for n in out.nodes] == ["tanh"]
    tanh = out.nodes[-1]
    assert tanh.inputs == ("x",)
    assert out.outputs == (tanh.out.name, "x")
    assert g.nodes[2].inputs != ("x",)  # the input graph is untouched (passes build new graphs)


def test_replacement_nodes_inherit_loc_and_take_the_matched_name() -> None:
    g = G()
    x = g.input("x", "f32", (4,))
    e = g.op("exp", x, loc=Loc("net.py", 42, "mlp", "h3", "silu"))
    g2 = g.graph(e)
    # exp_to_two_nodes replaces exp by neg(neg(x)); a second rule then removes the pair
    out = live(rewrite(g2, (("exp", exp_to_two_nodes), ("neg", drop_double_neg)), PassContext()))
    assert out.nodes == () and out.outputs == ("x",)
    one_pass = rewrite(g2, (("exp", exp_to_two_nodes),), PassContext())
    verify(one_pass)
    assert [n.op for n in one_pass.nodes] == ["neg", "neg"]
    last = one_pass.nodes[-1]
    assert last.out.name == e.name and one_pass.outputs == (e.name,)
    for n in one_pass.nodes:
        assert n.loc == Loc("net.py", 42, "mlp", "h3", "silu")


def test_fixpoint_across_new_nodes() -> None:
    # four nested negs collapse in the first sweep pairwise, and to x at the fixpoint
    g = G()
    v = g.input("x", "i32", (3,))
    for _ in range(5):
        v = g.op("neg", v)
    out = live(rewrite(g.graph(v), (("neg", drop_double_neg),), PassContext()))
    assert [n.op for n in out.nodes] == ["neg"] and out.nodes[0].inputs == ("x",)


def test_wildcard_rules_see_every_op_in_table_order() -> None:
    seen: list[tuple[str, str]] = []

    def spy_any(node: Node, view: RewriteView) -> Replacement:
        seen.append(("any", node.op))
        return None

    def spy_tanh(node: Node, view: RewriteView) -> Replacement:
        seen.append(("tanh", node.op))
        return None

    g, _ = sample()
    rewrite(g, ((None, spy_any), ("tanh", spy_tanh)), PassContext())
    assert seen == [("any", "neg"), ("any", "neg"), ("any", "tanh"), ("tanh", "tanh")]


def test_trace_records_every_firing_with_rule_location() -> None:
    g, _ = sample()
    trace = CompileTrace()
    rewrite(g, (("neg", drop_double_neg),), PassContext(trace=trace))
    rules = trace.take_rules()
    assert len(rules) == 1
    r = rules[0]
    assert r.rule == "drop_double_neg"
    assert (r.file, r.line) == code_location(drop_double_neg)
    assert r.file.endswith("test_rewrite_engine.py") and r.line > 0
    assert r.node == g.nodes[1].out.name
    assert r.before == [print_graph(g).splitlines()[3].strip()]
    assert r.after == []  # forwarded to the input %x, which no node produces


def test_trace_of_a_replacement_shows_the_new_nodes() -> None:
    g = G()
    x = g.input("x", "f32", (4,))
    e = g.op("exp", x)
    trace = CompileTrace()
    rewrite(g.graph(e), (("exp", exp_to_two_nodes),), PassContext(trace=trace))
    (r,) = trace.take_rules()
    assert r.rule == "exp_to_two_nodes" and r.node == e.name
    assert len(r.after) == 2 and r.after[1].startswith(f"%{e.name} : f32[4] = neg(")


def test_nothing_is_recorded_or_formatted_when_tracing_is_off(monkeypatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(PassContext, "record", lambda self, *a, **k: calls.append(a))
    import rlx_core.passes.base as base

    monkeypatch.setattr(base, "fmt_node", lambda n: calls.append(n) or "")
    g, _ = sample()
    out = rewrite(g, (("neg", drop_double_neg),), PassContext(trace=None))
    assert len(out.nodes) == 2 and calls == []


def test_rule_changing_the_type_is_rejected_naming_the_rule() -> None:
    def to_bool(node: Node, view: RewriteView) -> Replacement:
        return [view.emit("lt", [node.inputs[0], node.inputs[0]])]

    g, _ = sample()
    with pytest.raises(RewriteError) as info:
        rewrite(g, (("tanh", to_bool),), PassContext())
    assert "to_bool" in str(info.value) and "bool[4]" in str(info.value)
    assert info.value.code == "RLX-W001"


def test_rules_that_never_settle_are_stopped() -> None:
    def rebuild(node: Node, view: RewriteView) -> Replacement:
        return [view.emit("tanh", list(node.inputs))]

    g, _ = sample()
    with pytest.raises(RewriteError, match="fixpoint"):
        rewrite(g, (("tanh", rebuild),), PassContext(), max_sweeps=4)


def test_bad_replacements_are_rejected() -> None:
    def unknown(node: Node, view: RewriteView) -> Replacement:
        return "nope"

    def itself(node: Node, view: RewriteView) -> Replacement:
        return node.out.name

    def foreign(node: Node, view: RewriteView) -> Replacement:
        p = view.producer(node.inputs[0])
        return [p] if p is not None else None

    g, _ = sample()
    for rule in (unknown, itself, foreign):
        with pytest.raises(RewriteError):
            rewrite(g, (("tanh", rule),), PassContext())


def test_rewrite_pass_and_level_check() -> None:
    g, _ = sample()
    p = RewritePass("no_double_neg", (("neg", drop_double_neg),))
    out = live(p.run(g, PassContext()))
    assert len(out.nodes) == 1 and out.level is Level.MIR
    lir = Graph(g.name, Level.LIR, g.inputs, g.params, g.nodes, g.outputs)
    with pytest.raises(PassLevelError):
        p.run(lir, PassContext())


def test_rules_may_not_refer_to_later_values() -> None:
    g, _ = sample()
    later = g.nodes[2].out.name  # the tanh, defined after the first neg

    def forward_to_later(node: Node, view: RewriteView) -> Replacement:
        return later if node.out.name == g.nodes[0].out.name else None

    def emit_from_later(node: Node, view: RewriteView) -> Replacement:
        if node.out.name != g.nodes[0].out.name:
            return None
        return [view.emit("neg", [later])]

    for rule in (forward_to_later, emit_from_later):
        with pytest.raises(RewriteError, match="defined"):
            rewrite(g, ((None, rule),), PassContext())

"""CSE: equal nodes merge into the first, deterministically, and results do not change."""

from __future__ import annotations

import numpy as np

from rlx_core.compile_trace import CompileTrace
from rlx_core.ir.graph import Graph, Loc
from rlx_core.ir.printer import print_graph
from rlx_core.ir.verifier import verify
from rlx_core.passes.base import PassContext
from rlx_core.passes.cse import CSE
from tests.passes.helpers import G, run_numpy, same_bits


def program() -> Graph:
    g = G()
    x = g.input("x", "f32", (3,))
    c1 = g.const(2.0, "f32", (3,))
    c2 = g.const(2.0, "f32", (3,))
    a = g.op("mul", x, c1, loc=Loc("m.py", 3))
    b = g.op("mul", x, c2, loc=Loc("m.py", 4))
    ea, eb = g.op("exp", a), g.op("exp", b)
    s = g.op("add", ea, eb)
    r1 = g.op("reduce_sum", s, axes=(0,))
    return g.graph(r1, eb)


def test_merges_cascade_and_keep_the_first() -> None:
    g = program()
    out = verify(CSE().run(g, PassContext()))
    assert [n.op for n in out.nodes] == ["constant", "mul", "exp", "add", "reduce_sum"]
    mul = out.nodes[1]
    assert mul.loc.line == 3  # the first node (and its provenance) is the one kept
    add = out.nodes[3]
    assert add.inputs[0] == add.inputs[1] == out.nodes[2].out.name
    assert out.outputs[1] == out.nodes[2].out.name
    x = np.array([0.5, -1.0, np.nan], np.float32)
    for got, want in zip(run_numpy(out, {"x": x}), run_numpy(g, {"x": x}), strict=True):
        assert same_bits(got, want)


def test_deterministic_and_idempotent() -> None:
    once = CSE().run(program(), PassContext())
    again = CSE().run(program(), PassContext())
    assert print_graph(once) == print_graph(again)
    assert print_graph(CSE().run(once, PassContext())) == print_graph(once)


def test_trace_records_each_merge() -> None:
    trace = CompileTrace()
    CSE().run(program(), PassContext(trace=trace))
    rules = trace.take_rules()
    assert [r.rule for r in rules] == ["merge_equal_nodes"] * 3  # c2, b, eb
    assert all(r.file.endswith("rlx_core/passes/cse.py") and r.line > 0 for r in rules)
    assert all(len(r.before) == 1 and len(r.after) == 1 for r in rules)


def test_no_trace_no_records(monkeypatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(PassContext, "record", lambda self, *a, **k: calls.append(a))
    CSE().run(program(), PassContext())
    assert calls == []

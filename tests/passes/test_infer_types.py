"""infer_types: types are rebuilt from the op rules; ill-typed nodes raise the rule's error."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rlx_core.compile_trace import CompileTrace
from rlx_core.errors import DTypeError, ShapeError, VerifyError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph, Level, Loc, Node, TensorType, Value
from rlx_core.ir.verifier import verify
from rlx_core.passes.base import PassContext
from rlx_core.passes.infer_types import InferTypes
from tests.passes.helpers import G


def mistype(g: Graph, index: int, t: TensorType) -> Graph:
    nodes = list(g.nodes)
    n = nodes[index]
    nodes[index] = replace(n, out=Value(n.out.name, t, n.out.kind))
    return g.with_nodes(nodes)


def chain() -> Graph:
    g = G()
    x = g.input("x", "f16", (2, 3))
    e = g.op("exp", x, loc=Loc("m.py", 5, "blk"))
    t = g.op("transpose", e, perm=(1, 0))
    r = g.op("reduce_sum", t, axes=(1,))
    return g.graph(r)


def test_rebuilds_wrong_types_downstream() -> None:
    good = chain()
    bad = mistype(mistype(good, 0, TensorType(dt.f32, (9,))), 1, TensorType(dt.i8, ()))
    with pytest.raises(VerifyError):
        verify(bad)
    fixed = verify(InferTypes().run(bad, PassContext()))
    assert fixed.nodes == good.nodes  # same types, attrs and provenance as built


def test_fills_default_attributes() -> None:
    g = chain()
    nodes = list(g.nodes)
    iota = Node(Value("io", TensorType(dt.i32, (3,))), "iota", (), (("dim", 0), ("shape", (3,))))
    out = InferTypes().run(g.with_nodes([*nodes, iota]), PassContext())
    assert out.nodes[-1].attr("dtype") == dt.i32
    verify(out)


def test_hir_graph() -> None:
    g = G()
    x = g.input("x", "f32", (2, 8))
    w = g.input("w", "f32", (4, 8))
    y = g.op("linear", x, w)
    hir = g.graph(y, level=Level.HIR)
    bad = mistype(hir, 0, TensorType(dt.f32, (8, 8)))
    assert InferTypes().run(bad, PassContext()).nodes == hir.nodes


def test_ill_typed_node_raises_the_rules_error_naming_it() -> None:
    g = G()
    x = g.input("x", "f32", (2, 3))
    g.input("y", "f32", (3, 2))  # %y is what the bad node adds to %x
    ok = g.op("neg", x)
    graph = g.graph(ok)
    bad_node = Node(
        Value("bad", TensorType(dt.f32, (2, 3))), "add", ("x", "y"), loc=Loc("model.py", 17)
    )
    with pytest.raises(ShapeError) as info:
        InferTypes().run(
            graph.with_nodes([*graph.nodes, bad_node], outputs=("bad",)), PassContext()
        )
    msg = str(info.value)
    assert "%bad" in msg and "model.py:17" in msg and info.value.code == "RLX-T001"
    ints = Node(Value("e", TensorType(dt.i32, (2,))), "exp", ("i",))
    gi = G()
    gi.input("i", "i32", (2,))
    with pytest.raises(DTypeError, match="%e"):
        InferTypes().run(gi.graph().with_nodes([ints], outputs=("e",)), PassContext())


def test_undefined_operand_is_a_verify_error() -> None:
    g = chain()
    n = Node(Value("z", TensorType(dt.f16, (2, 3))), "neg", ("nowhere",))
    with pytest.raises(VerifyError, match="nowhere"):
        InferTypes().run(g.with_nodes([n, *g.nodes]), PassContext())


def test_trace_records_retyped_nodes_only() -> None:
    trace = CompileTrace()
    bad = mistype(chain(), 1, TensorType(dt.i8, ()))
    InferTypes().run(bad, PassContext(trace=trace))
    rules = trace.take_rules()
    assert [r.rule for r in rules] == ["retype_node"]
    assert rules[0].file.endswith("rlx_core/passes/infer_types.py")
    assert "i8[]" in rules[0].before[0] and "f16[3,2]" in rules[0].after[0]
    InferTypes().run(chain(), PassContext(trace=trace))
    assert trace.take_rules() == []

"""The verifier: every check fires once, and its message shows the IR around the culprit."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rlx_core.errors import VerifyError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder
from rlx_core.ir.graph import (
    ArenaPlan,
    BufferSlot,
    Graph,
    Kernel,
    Level,
    Node,
    TensorType,
    Value,
    ValueKind,
)
from rlx_core.ir.parser import parse
from rlx_core.ir.printer import fmt_node, print_graph
from rlx_core.ir.verifier import verify

X = Value("x", TensorType(dt.f32, (2, 3)), ValueKind.INPUT)
W = Value("w", TensorType(dt.f32, (3, 3)), ValueKind.PARAM)


def mir() -> Graph:
    """x -> exp -> matmul with w -> neg: three valid MIR nodes named 0, 1, 2."""
    b = Builder()
    e = b.emit("exp", [X])
    m = b.emit("dot_general", [e, W], {"contract": ((1,), (0,))})
    n = b.emit("neg", [m])
    return Graph("f", Level.MIR, (X,), (W,), tuple(b.nodes), (n.name,))


def lir() -> Graph:
    """The same nodes as two kernels (exp+matmul, neg) with a valid arena plan."""
    g = mir()
    k0 = Kernel("k0", "matmul", g.nodes[:2], ("x", "w"), ("1",))
    k1 = Kernel("k1", "elementwise", g.nodes[2:], ("1",), ("2",))
    plan = ArenaPlan((BufferSlot("1", 0, 24, 0, 1), BufferSlot("2", 64, 24, 1, 1)), 128, 128)
    return Graph("f", Level.LIR, g.inputs, g.params, g.nodes, ("2",), (k0, k1), plan)


def with_node(g: Graph, i: int, **changes: object) -> Graph:
    nodes = list(g.nodes)
    nodes[i] = replace(nodes[i], **changes)
    return g.with_nodes(nodes)


def fails(g: Graph, words: str, node: Node | None = None, **kw: object) -> str:
    """verify(g) raises VerifyError saying ``words``; the IR shown marks ``node`` with '>>'
    (or, for graph-level errors, shows the graph's header)."""
    with pytest.raises(VerifyError) as info:
        verify(g, **kw)
    text = str(info.value)
    assert words in text, text
    assert info.value.code == "RLX-V001"
    if node is not None:
        marked = [ln for ln in text.splitlines() if ln.startswith(">> ")]
        assert len(marked) == 1 and marked[0].strip().endswith(fmt_node(node)), text
    else:
        assert f"{g.level.value} @{g.name} {{" in text, text
    return text


def test_valid_graphs_pass_and_are_returned() -> None:
    for g in (mir(), lir()):
        assert verify(g) is g
        assert parse(print_graph(g)) == g


# ---- node checks ----------------------------------------------------------------------------


def test_value_declared_twice() -> None:
    g = mir()
    fails(
        Graph("f", Level.MIR, (X,), (replace(W, name="x"),), g.nodes, g.outputs),
        "value %x is declared twice",
    )


def test_unknown_op() -> None:
    g = with_node(mir(), 2, op="negate")
    fails(g, "unknown op 'negate'", g.nodes[2])


def test_hir_op_not_allowed_in_mir_unless_native() -> None:
    b = Builder()
    s = b.emit("softmax", [X])
    g = Graph("f", Level.MIR, (X,), (), tuple(b.nodes), (s.name,))
    fails(g, "op 'softmax' is not allowed at level mir", g.nodes[0])
    assert verify(g, native_composites={"softmax"}) is g


def test_use_before_def() -> None:
    g = mir()
    swapped = g.with_nodes((g.nodes[1], g.nodes[0], g.nodes[2]))
    fails(swapped, "%1 uses %0 before it is defined", g.nodes[1])


def test_defined_twice() -> None:
    g = mir()
    dup = replace(g.nodes[2], inputs=("0",))
    twice = g.with_nodes((*g.nodes[:2], replace(dup, out=replace(dup.out, name="0", type=X.type))))
    text = fails(twice, "value %0 is defined twice")
    # context() marks the first line defining %0: with a duplicate name that is the earlier one
    assert ">>   %0 : f32[2,3] = exp(%x)" in text


def test_ill_typed_node() -> None:
    g = with_node(mir(), 1, inputs=("x", "x"))  # (2,3) @ (2,3): axis 1 (3) vs axis 0 (2)
    fails(g, "ill-typed dot_general: dot_general: cannot contract", g.nodes[1])


def test_incomplete_attributes() -> None:
    g = with_node(mir(), 1, attrs=(("contract", ((1,), (0,))),))  # batch left out
    fails(
        g, "dot_general attributes are incomplete (expected keys ['batch', 'contract'])", g.nodes[1]
    )


def test_wrong_declared_type() -> None:
    g = mir()
    bad = replace(g.nodes[0].out, type=TensorType(dt.f16, (2, 3)))
    g = with_node(g, 0, out=bad)
    fails(g, "exp result is declared f16[2,3] but its rule gives f32[2,3]", g.nodes[0])


def test_undefined_output() -> None:
    g = mir()
    fails(g.with_nodes(g.nodes, outputs=("9",)), "output %9 is not defined")


# ---- LIR checks -----------------------------------------------------------------------------


def test_lir_nodes_must_be_kernel_nodes() -> None:
    g = lir()
    k0, k1 = g.kernels
    moved = replace(k1, nodes=(replace(k1.nodes[0], loc=replace(k1.nodes[0].loc, line=7)),))
    fails(replace(g, kernels=(k0, moved)), "LIR nodes must be exactly the kernels' nodes")


def test_kernel_defined_twice() -> None:
    g = lir()
    k0, k1 = g.kernels
    fails(replace(g, kernels=(k0, replace(k1, name="k0"))), "kernel @k0 is defined twice")


def test_kernel_reads_unlisted_value() -> None:
    g = lir()
    k0, k1 = g.kernels
    g = replace(g, kernels=(replace(k0, inputs=("x",)), k1))
    fails(g, "kernel @k0 reads %w but does not list it as input", g.nodes[1])


def test_kernel_reads_value_no_earlier_kernel_writes() -> None:
    g = lir()
    k0, k1 = g.kernels
    fails(
        replace(g, kernels=(replace(k0, inputs=("x", "w", "2")), k1)),
        "kernel @k0 (#0) reads %2, which no earlier kernel writes",
    )


def test_kernel_lists_output_it_does_not_compute() -> None:
    g = lir()
    k0, k1 = g.kernels
    fails(
        replace(g, kernels=(k0, replace(k1, outputs=("2", "1")))),
        "kernel @k1 lists output %1 it does not compute",
    )


def test_graph_output_internal_to_kernel() -> None:
    g = lir()
    fails(replace(g, outputs=("0",)), "output %0 is internal to a kernel")


def test_arena_slot_for_unknown_value() -> None:
    g = lir()
    plan = replace(g.plan, slots=(*g.plan.slots, BufferSlot("nope", 96, 8, 0, 0)))
    fails(replace(g, plan=plan), "arena slot for unknown value %nope")


def test_arena_slot_too_small() -> None:
    g = lir()
    plan = replace(g.plan, slots=(BufferSlot("1", 0, 20, 0, 1), g.plan.slots[1]))
    fails(replace(g, plan=plan), "arena slot %1 is 20 bytes, value needs 24")


def test_arena_slot_past_peak() -> None:
    g = lir()
    fails(replace(g, plan=replace(g.plan, peak_bytes=80)), "arena slot %2 ends past peak 80")


def test_overlapping_live_arena_slots() -> None:
    g = lir()
    plan = replace(g.plan, slots=(g.plan.slots[0], BufferSlot("2", 16, 24, 1, 1)))
    fails(replace(g, plan=plan), "arena slots %1 and %2 are alive together but overlap")
    # the same bytes are fine once the first buffer is dead
    dead = replace(g.plan, slots=(BufferSlot("1", 0, 24, 0, 0), BufferSlot("2", 16, 24, 1, 1)))
    assert verify(replace(g, plan=dead))


def test_only_lir_carries_kernels_and_plan() -> None:
    g = lir()
    fails(replace(g, level=Level.MIR), "only LIR graphs carry kernels and an arena plan")
    fails(replace(mir(), plan=g.plan), "only LIR graphs carry kernels and an arena plan")

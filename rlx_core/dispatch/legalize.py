"""Legalization of a whole graph for one target (first cut: decompose unclaimed composites)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlx_core.compile_trace import CompileTrace
from rlx_core.dispatch.decompositions import DECOMPOSITIONS
from rlx_core.dispatch.lower import expand
from rlx_core.ir.builder import NameGen
from rlx_core.ir.graph import Graph, Level, Node
from rlx_core.ir.ops import HIR_OPS
from rlx_core.ir.verifier import verify


@dataclass
class LegalizeResult:
    graph: Graph
    decisions: list[dict[str, Any]] = field(default_factory=list)


def legalize_graph(g: Graph, target: Any, options: Any = None,
                   trace: CompileTrace | None = None) -> LegalizeResult:
    caps = target.caps
    values = g.values()
    names = NameGen(values)
    out: list[Node] = []
    for n in g.nodes:
        if n.op in HIR_OPS and not caps.claims_op(n.op):
            made = expand(n, values, names, DECOMPOSITIONS[n.op])
            for m in made:
                values[m.out.name] = m.out
            out.extend(made)
        else:
            out.append(n)
    mir = g.with_nodes(out, level=Level.MIR)
    verify(mir, native_composites=caps.native_composites())
    return LegalizeResult(mir)

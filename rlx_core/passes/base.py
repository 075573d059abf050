"""The pass contract: a frozen dataclass with a name and ``run(graph, ctx) -> graph``.

A pass must leave the IR valid for its output level (tests run the verifier after each one).
Passes build new graphs instead of mutating, and record rule firings only when ``ctx.trace``
is set, so tracing costs nothing when it is off.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlx_core.compile_trace import CompileTrace
from rlx_core.ir.graph import Graph, Node
from rlx_core.ir.printer import fmt_node


@dataclass(frozen=True)
class CompileOptions:
    """Knobs of one compile. ``policy`` is a dispatch policy name or per-kind mapping."""

    target: str = "numpy"
    policy: Any = None
    allow_approximate: bool = False  # permit tolerance-changing rewrites (gelu-erf -> gelu-tanh)
    verify: bool = False  # run the verifier after every pass
    # bytes one run may allocate (int, "8G", "50%", "off"); None: RLX_MEMORY_LIMIT or the
    # default fraction of RAM (runtime/memory_budget.py)
    memory_limit: Any = None
    # value ranges promised for integer inputs {name: (lo, hi)}: an i64 input with one is
    # narrowed to i32 on targets without i64 kernels, and every call is checked against it
    input_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    flags: dict[str, Any] = field(default_factory=dict)


@dataclass
class PassContext:
    """What a pass may consult: the options, the target object (or None) and the trace."""

    options: CompileOptions = field(default_factory=CompileOptions)
    target: Any = None
    trace: CompileTrace | None = None

    def record(self, rule: Callable[..., Any] | str, before: list[Node], after: list[Node],
               node: str = "", name: str | None = None) -> None:
        """Record one rule application (a no-op when tracing is off)."""
        if self.trace is not None:
            self.trace.rule(rule, [fmt_node(n) for n in before], [fmt_node(n) for n in after],
                            node=node, name=name)


class Pass(Protocol):
    """A step of the pass pipeline: a ``name`` and ``run``, which takes a valid graph and
    returns a valid graph."""

    name: str

    def run(self, g: Graph, ctx: PassContext) -> Graph: ...

"""The one rewrite engine: rules as data -- (op, function) pairs -- applied to a fixpoint.

A rule is ``(op, fn)``: ``op`` is the op name it matches (``None`` matches every node) and
``fn(node, view)`` returns ``None`` (no match), the *name of an existing value* to forward all
uses of ``node`` to, or a *list of new nodes* made with ``view.emit`` whose last one replaces
``node`` (it takes over ``node``'s name, so graph outputs and later users stay valid)::

    def mul_by_one(node: Node, view: RewriteView) -> Replacement:
        x, y = node.inputs
        return x if view.splat(y) == 1 else None

    RULES: Rules = (("mul", mul_by_one),)
    g = rewrite(g, RULES, ctx)

The engine sweeps the nodes in order; a node's inputs are renamed to their replacements before
any rule sees it, so one sweep usually suffices and a second confirms the fixpoint. New nodes
inherit the matched node's ``loc`` (provenance survives every rewrite). Every firing is
recorded through ``ctx.record`` with the rule function (its file:line comes from the function);
with ``ctx.trace`` None nothing is formatted or kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.ir.builder import Builder, NameGen
from rlx_core.ir.graph import Graph, Level, Loc, Node, TensorType, Value
from rlx_core.passes.base import PassContext

Replacement = str | list[Node] | None
RuleFn = Callable[[Node, "RewriteView"], Replacement]
Rule = tuple[str | None, RuleFn]
Rules = tuple[Rule, ...]

DEFAULT_MAX_SWEEPS = 32


class RewriteError(RlxError):
    """A rewrite rule broke the engine's contract (wrong type, unknown value, no fixpoint)."""

    code = "RLX-W001"


class PassLevelError(RlxError):
    """A pass was given a graph of a level it does not work on."""

    code = "RLX-W002"


def require_level(
    g: Graph, pass_name: str, levels: tuple[Level, ...] = (Level.HIR, Level.MIR)
) -> None:
    """Raise PassLevelError unless ``g`` is at one of ``levels``."""
    if g.level not in levels:
        raise PassLevelError(
            f"pass {pass_name!r} works on {'/'.join(lv.value for lv in levels)} graphs, "
            f"got {g.level.value} @{g.name}",
            hint="run graph optimisations before kernel formation (see passes/pipeline.py)",
        )


def _rule_where(fn: RuleFn) -> str:
    from rlx_core.compile_trace import code_location

    file, line = code_location(fn)
    return f"{getattr(fn, '__name__', fn)} ({file}:{line})"


class RewriteView:
    """What a rule may look at and make: producers and types of values, graph outputs, and
    ``emit`` for new nodes (typed by the op's shape rule, stamped with the matched node's loc)."""

    def __init__(self, g: Graph):
        self._types: dict[str, TensorType] = {v.name: v.type for v in (*g.inputs, *g.params)}
        # values defined so far in the sweep: rules may only refer back, never forward
        self._defined: set[str] = set(self._types)
        self._producers: dict[str, Node] = {}
        # readers of each value at the start of the sweep (+ graph outputs), kept up to date
        # for the nodes rules make
        self._uses: dict[str, int] = {}
        for n in g.nodes:
            self._types[n.out.name] = n.out.type
            for i in n.inputs:
                self._uses[i] = self._uses.get(i, 0) + 1
        for o in g.outputs:
            self._uses[o] = self._uses.get(o, 0) + 1
        self.names = NameGen(self._types)
        self.outputs: tuple[str, ...] = g.outputs
        self._loc: Loc = Loc()
        self._made: list[Node] = []

    # ---- looking --------------------------------------------------------------------------
    def producer(self, name: str) -> Node | None:
        """The node computing ``name`` (None for inputs and parameters)."""
        return self._producers.get(name)

    def type_of(self, name: str) -> TensorType:
        return self._types[name]

    def is_output(self, name: str) -> bool:
        return name in self.outputs

    def uses(self, name: str) -> int:
        """How many node inputs (and graph outputs) read ``name``: a rule that absorbs its
        producer checks for 1, or the producer would stay for the other readers as well."""
        return self._uses.get(name, 0)

    def splat(self, name: str) -> Any:
        """The single value every element of ``name`` has, when it is a constant (seen through
        broadcasts and reshapes of one); None otherwise."""
        from rlx_core.passes.const_eval import read_constant

        node = self._producers.get(name)
        while node is not None and node.op in ("broadcast_in_dim", "reshape", "transpose"):
            node = self._producers.get(node.inputs[0])
        if node is None:
            return None
        data = read_constant(node)
        return None if data is None else data.uniform()

    # ---- making ---------------------------------------------------------------------------
    def emit(self, op: str, inputs: Sequence[str], attrs: dict[str, Any] | None = None) -> Node:
        """A new node ``op(inputs) {attrs}`` with a fresh name; put it in the returned list."""
        later = [i for i in inputs if i not in self._defined]
        if later:
            raise RewriteError(
                f"a rule emitted {op}(%{later[0]}), a value not defined before the matched node",
                hint="new nodes may only use operands of the match or values defined earlier",
            )
        b = Builder(self.names, self._loc)
        b.emit(op, [Value(i, self._types[i]) for i in inputs], attrs)
        node = b.nodes[0]
        for i in inputs:
            self._uses[i] = self._uses.get(i, 0) + 1
        self._types[node.out.name] = node.out.type
        self._defined.add(node.out.name)
        self._producers[node.out.name] = node
        self._made.append(node)
        return node

    # ---- engine side ----------------------------------------------------------------------
    def _enter(self, node: Node) -> None:
        loc = node.loc
        if not loc.origin:  # keep the chain back to the matched node even for bare locs
            loc = loc.with_origin(node.out.name, node.op)
        self._loc = loc
        self._made = []
        self._producers[node.out.name] = node

    def _settle(self, node: Node) -> None:
        self._producers[node.out.name] = node
        self._types[node.out.name] = node.out.type
        self._defined.add(node.out.name)


def _index_rules(rules: Rules) -> dict[str | None, list[RuleFn]]:
    """Rules per op, each list in table order with the wildcard rules merged in place."""
    ops = {op for op, _ in rules if op is not None}
    table: dict[str | None, list[RuleFn]] = {op: [] for op in ops}
    table[None] = []
    for op, fn in rules:
        for key in table:
            if op is None or op == key:
                table[key].append(fn)
    return table


def _sweep(
    g: Graph, table: dict[str | None, list[RuleFn]], ctx: PassContext | None
) -> tuple[Graph, list[RuleFn]]:
    view = RewriteView(g)
    tracing = ctx is not None and ctx.trace is not None
    forward: dict[str, str] = {}
    fired: list[RuleFn] = []
    out: list[Node] = []

    def resolve(name: str) -> str:
        while name in forward:
            name = forward[name]
        return name

    for node in g.nodes:
        if forward and any(i in forward for i in node.inputs):
            node = replace(node, inputs=tuple(resolve(i) for i in node.inputs))
        view._enter(node)
        rules = table.get(node.op, table[None])
        for fn in rules:
            rep = fn(node, view)
            if rep is None:
                continue
            if isinstance(rep, str):
                target = resolve(rep)
                if target not in view._defined:
                    raise RewriteError(
                        f"rule {_rule_where(fn)} forwarded %{node.out.name} to %{target}, "
                        "which is not another defined value",
                        hint="return the name of an operand or earlier value, or None",
                    )
                _check_type(fn, node, view.type_of(target))
                forward[node.out.name] = target
                after = [p] if (p := view.producer(target)) is not None else []
            else:
                new = _adopt(fn, node, rep, view)
                out.extend(new)
                after = new
                view._settle(new[-1])
            if tracing:
                ctx.record(fn, [node], after, node=node.out.name)  # type: ignore[union-attr]
            fired.append(fn)
            break
        else:
            out.append(node)
            view._settle(node)
    outputs = tuple(resolve(o) for o in g.outputs)
    return g.with_nodes(out, outputs=outputs), fired


def _check_type(fn: RuleFn, node: Node, got: TensorType) -> None:
    if got != node.out.type:
        raise RewriteError(
            f"rule {_rule_where(fn)} replaced %{node.out.name} : {node.out.type} "
            f"with a value of type {got}",
            hint="a rewrite must keep the result type; insert a cast or reshape in the rule",
        )


def _adopt(fn: RuleFn, node: Node, rep: list[Node], view: RewriteView) -> list[Node]:
    """The rule's new nodes, the last renamed to the matched node's name."""
    if not rep or not isinstance(rep, list):
        raise RewriteError(
            f"rule {_rule_where(fn)} returned {rep!r}",
            hint="return None, a value name, or a non-empty list of new nodes",
        )
    made = {id(n) for n in view._made}
    if any(id(n) not in made for n in rep):
        raise RewriteError(
            f"rule {_rule_where(fn)} returned a node it did not make",
            hint="make replacement nodes with view.emit(...)",
        )
    last = rep[-1]
    _check_type(fn, node, last.out.type)
    renamed = replace(last, out=Value(node.out.name, last.out.type))
    return [*rep[:-1], renamed]


def rewrite(
    g: Graph, rules: Rules, ctx: PassContext | None = None, max_sweeps: int = DEFAULT_MAX_SWEEPS
) -> Graph:
    """Apply ``rules`` to ``g`` until none fires; a new graph of the same level."""
    table = _index_rules(rules)
    for _ in range(max_sweeps):
        g, fired = _sweep(g, table, ctx)
        if not fired:
            return g
    names = sorted({getattr(fn, "__name__", str(fn)) for fn in fired})
    raise RewriteError(
        f"rewriting @{g.name} did not reach a fixpoint in {max_sweeps} sweeps "
        f"(still firing: {', '.join(names)})",
        hint="two rules undo each other, or a rule rebuilds the node it matched",
    )


@dataclass(frozen=True)
class RewritePass:
    """A pass that is nothing but a rule table run by the engine."""

    name: str
    rules: Rules
    levels: tuple[Level, ...] = (Level.HIR, Level.MIR)

    def run(self, g: Graph, ctx: PassContext) -> Graph:
        require_level(g, self.name, self.levels)
        return rewrite(g, self.rules, ctx)

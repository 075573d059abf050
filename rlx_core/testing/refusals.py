"""What a target refused, read from its typed error, and what the generator stops drawing then.

A typed rejection of a well-typed graph names the nodes it refuses: a ``LegalizationError``
lists every failing node with the HIR node it came from (``Decision.origin``), the int8
firmware's errors have one line per node (``FirmwareLegalizationError.lines``), a renderer
names the value it cannot emit. ``refused_pairs`` turns that into ``(op, dtype)`` pairs (the
dtype of the node's first operand, as ``Profile.claims`` keys them), so every rejection teaches
the generator at the cost of reading a message: no shrinking (which took minutes per rejection,
so only the first 12 per target were used). A refusal of a fused kernel (``FUSED_CODES``: the
firmware runs each of its ops alone) teaches nothing: stopping its ops would over-refuse (the
firmware's old ``no int8 kernel for reduce neg`` stopped ``neg`` and ``argmax`` on every int
dtype).

``learn`` adds the pairs to a profile and maps a refused MIR pair back to the HIR ops that lower
to it on the target: each HIR op the generator draws is probed once per dtype (a few instances
as the generator draws them, legalized for the target, ``lowered_pairs``); one whose lowering
holds a refused pair is refused too. Without that, a MIR refusal (``neg`` on f32) left every
HIR op decomposing into it (``gelu``, ``layer_norm``) to be drawn, and refused, again.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.ir.graph import Graph, Node
from rlx_core.testing.generator import FLOAT_HIR, QUANT_HIR, hir_instance
from rlx_core.testing.profile import ZERO_SIZE, Profile, profile_for

Pair = tuple[str, str]
# codes that refuse tensors with no elements, whatever their op (the int8 firmware)
ZERO_SIZE_CODES = frozenset({"RLX-U014"})
# codes that refuse how ops were fused into one kernel, not any op (the int8 firmware: a
# ``neg`` feeding an ``argmax``): nothing to stop drawing, each op runs alone
FUSED_CODES = frozenset({"RLX-U015"})
_NAMED = re.compile(r"%([\w.]+)")
_DTYPE = re.compile(r"([a-z]+\d*)\[")
PROBES = 3  # instances drawn per (HIR op, dtype): attributes change the lowering (gelu's tanh)


def pair_of(g: Graph, node: Node) -> Pair:
    """``(op, dtype)`` as the generator claims it: the first operand's dtype (else the result's;
    a float composite's first float operand: embedding's table, not its ids)."""
    types = [g.type_of(i).dtype for i in node.inputs]
    if node.op in FLOAT_HIR:
        types = [t for t in types if t.is_float] or types
    return node.op, (types[0] if types else node.type.dtype).name


def refused_pairs(err: BaseException, g: Graph) -> list[Pair]:
    """The ``(op, dtype)`` pairs the typed error ``err`` refuses in ``g`` (HIR nodes of ``g`` and
    the MIR nodes their lowering made), ``ZERO_SIZE`` for a refusal of empty tensors; [] when the
    error names no node of ``g``."""
    prod = g.producers()
    out: list[Pair] = []

    def add(p: Pair) -> None:
        if p not in out:
            out.append(p)

    failures = list(getattr(err, "failures", None) or ())
    for f in failures:
        d = f.decision
        hir = prod.get(str(d.origin).lstrip("%"))
        if hir is not None:
            add(pair_of(g, hir))
        if hir is None or d.op != hir.op:  # a MIR node of a decomposition: refused itself too
            m = _DTYPE.search(d.types)
            if m:
                add((d.op, m.group(1)))
    lines = list(getattr(err, "lines", None) or ())
    for line in lines:
        code, _, rest = str(line).partition(" ")
        if code in ZERO_SIZE_CODES:
            add(ZERO_SIZE)
            continue
        if code in FUSED_CODES:
            continue
        m = _NAMED.match(rest)
        if m and m.group(1) in prod:
            add(pair_of(g, prod[m.group(1)]))
    if not failures and not lines:  # a renderer's or compiler's message: the first node named
        named = next((n for n in _NAMED.findall(str(err)) if n in prod), None)
        if named is not None:
            add(pair_of(g, prod[named]))
    return out


def fused_only(err: BaseException) -> bool:
    """Does ``err`` refuse only fused kernels (every line a ``FUSED_CODES`` one)? Nothing to
    learn and nothing to shrink: the error already says what it refused."""
    codes = [str(line).split(" ", 1)[0] for line in getattr(err, "lines", None) or ()]
    return bool(codes) and all(c in FUSED_CODES for c in codes)


@functools.cache
def _base(target: str) -> Profile:
    return profile_for(target)


@functools.cache
def lowered_pairs(target: str, op: str, dtype: str | None) -> tuple[Pair | None, frozenset[Pair]]:
    """(the HIR op's own pair, the pairs of what it lowers to on ``target``), over ``PROBES``
    instances drawn as the generator draws them; a failing node of the lowering counts too."""
    from rlx_core.dispatch.legalize import legalize_graph
    from rlx_core.targets.registry import get_target

    own: Pair | None = None
    pairs: set[Pair] = set()
    try:
        tgt = get_target(target)
    except Exception:  # noqa: BLE001 - a target that cannot load has nothing to probe
        return None, frozenset()
    for seed in range(PROBES):
        g = hir_instance(_base(target), op, dtype, seed)
        if g is None:
            continue
        own = own or pair_of(g, g.nodes[-1])
        try:
            res = legalize_graph(g, target=tgt, raise_errors=False)
        except Exception:  # noqa: BLE001 - a probe that cannot legalize teaches nothing
            continue
        if res.graph is not None:
            pairs.update(pair_of(res.graph, n) for n in res.graph.nodes)
        for f in res.failures:
            m = _DTYPE.search(f.decision.types)
            if m:
                pairs.add((f.decision.op, m.group(1)))
    return own, frozenset(pairs)


def _probes(p: Profile) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = [(op, d) for op in FLOAT_HIR if op in p.hir
                                         for d in p.floats]
    if {"f32", "i32"} <= set(p.dtypes):
        out += [(op, None) for op in QUANT_HIR if op in p.hir]
    return out


def learn(p: Profile, pairs: list[Pair] | set[Pair]) -> tuple[Profile, list[Pair]]:
    """``p`` with ``pairs`` refused, and every HIR op whose lowering on the target holds a refused
    pair; returns the new profile and the pairs it added (in order: ``pairs`` first)."""
    new = [tuple(x) for x in pairs if tuple(x) not in p.refused]
    if not new:
        return p, []
    p = p.without(set(new))  # type: ignore[arg-type]
    added: list[Any] = list(dict.fromkeys(new))
    more: set[Pair] = set()
    for op, d in _probes(p):
        own, low = lowered_pairs(p.target, op, d)
        if own is None or own in p.refused or own in more:
            continue
        if (low - {own}) & p.refused:
            more.add(own)
    if more:
        p = p.without(more)
        added += sorted(more)
    return p, added


def recheck_fused(target: str, rejections: list[dict[str, Any]]) -> int:
    """Mark each firmware rejection (``RLX-U`` codes) whose graph the current strict check
    refuses only as fused kernels (``fused_now``): a shard written before RLX-U015 learned its
    ops as refused pairs. Legalization only, nothing built. Returns how many were marked."""
    import rlx_core as rlx
    from rlx_core.ir.parser import parse
    from rlx_core.targets.registry import get_target

    try:
        tgt = get_target(target)
    except Exception:  # noqa: BLE001 - a target that cannot load has nothing to re-check
        return 0
    if not hasattr(tgt, "firmware_source"):
        return 0
    from rlx_core.targets.cortex_m.legalize import legalize

    marked = 0
    for r in rejections:
        if "[RLX-U" not in r.get("detail", "") or r.get("fused") or not r.get("ir"):
            continue
        try:
            lir = rlx.lower(parse(r["ir"]), target=target, record=False)[2]
            codes = [p.code for p in legalize(lir).problems]
        except RlxError as err:  # refused before the LIR: by the HIR check, not fused
            codes = [str(line).split(" ", 1)[0] for line in getattr(err, "lines", ())] or [
                err.code]
        except Exception:  # noqa: BLE001 - a record that no longer parses stays as it ran
            continue
        if codes and all(c in FUSED_CODES for c in codes):
            r["fused_now"] = True
            marked += 1
    return marked


def overlearned(rejections: list[dict[str, Any]]) -> list[Pair]:
    """Pairs named only by rejections marked ``fused_now``: stopped by the run, though the
    firmware runs them alone."""
    def pairs(r: dict[str, Any]) -> list[Pair]:
        return [tuple(x) for x in (r.get("named") or ([r["refused"]] if r.get("refused")
                                                       else []))]  # type: ignore[misc]

    fused = {p for r in rejections if r.get("fused_now") for p in pairs(r)}
    kept = {p for r in rejections if not r.get("fused_now") for p in pairs(r)}
    return sorted(fused - kept)

"""Numerics lens: every HIR node's value on every executing target against a high-precision
oracle — max absolute and relative error, the activation range and histogram, where
quantization (or a narrowing cast) enters and how the error grows downstream.

The oracle is the same HIR graph evaluated node by node on the numpy reference with every
float widened to f64 (``oracle="f64"``) or f32, and with precision-losing steps made
transparent: a float -> float ``cast`` passes its input on, ``quantize`` passes on the real
value it would round, saturated to the range its integers represent (so the oracle is the
model without the rounding; the fraction clipped is reported per quantize node), ``dequantize`` of such
a value passes it on, and layout ops (reshape, transpose, slices, max pooling...) carry it.
An op of the integer domain (``int_linear``, ``requantize``) has no real-valued counterpart
there, so it and what it feeds have no oracle value; integer values outside quantization
(indices, shapes) are compared exactly.

A graph rewritten from another one (rlx.quant.ptq's int8 chains, an AMP graph) is better
judged against its source: ``reference=`` that float graph. Each rewritten node names the
source node it came from (``loc.origin``); the last float node of each origin with the
source node's shape (a layer's dequantized output) is compared with the source's value in
the oracle precision, so the error at every layer boundary is measured end to end.

Each target runs the graph with every node made an output (one compile per target), so the
values are the target's own kernels' values, not a replay. A target's integer value that
stands for a quantized real (a ``quantize`` output, per tensor) is compared after
dequantizing it with that node's scale and zero point.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph, Node, TensorType

FLOATS = ("f16", "bf16", "f32", "f64")
# ops whose output holds (a rearrangement or a selection of) their input's values
CARRY = frozenset({"reshape", "transpose", "broadcast_in_dim", "slice", "concat", "pad",
                   "reduce_max", "reduce_min", "max", "min", "reduce_window_max", "gather",
                   "select", "squeeze", "expand_dims", "reverse", "copy"})
INTEGER_DOMAIN = frozenset({"int_linear", "requantize"})
ENTRY_OPS = frozenset({"quantize", "int4_linear", "fake_quantize"})
BINS = 24


def _np() -> Any:
    import numpy as np

    return np


def _host(a: Any) -> Any:
    np = _np()
    for attr in ("numpy", "to_numpy"):
        f = getattr(a, attr, None)
        if callable(f):
            return np.asarray(f())
    return np.asarray(a)


def _param_arrays(g: Graph) -> dict[str, Any]:
    from rlx_core.targets.numpy_ref.semantics import host_dtype

    np = _np()
    out = {}
    for v in g.params:
        data = g.param_data.get(v.name)
        if data is None:
            continue
        out[v.name] = np.asarray(data, dtype=host_dtype(v.type.dtype)).reshape(v.type.shape)
    return out


def _wide(t: TensorType, oracle: Any) -> TensorType:
    return TensorType(oracle, t.shape) if t.dtype.name in FLOATS else t


class _Oracle:
    """The node-by-node high-precision evaluation (see the module docstring)."""

    def __init__(self, g: Graph, args: Sequence[Any], oracle: str) -> None:
        from rlx_core.targets.numpy_ref.semantics import eval_op

        np = _np()
        self.dtype = dt.get(oracle)
        self.real: dict[str, bool] = {}  # value -> an integer-typed value carried as its real
        self.env: dict[str, Any] = {}
        self.note: dict[str, str] = {}
        for v, a in zip(g.inputs, args, strict=False):
            self.env[v.name] = self._widen(_host(a), v.type)
        for name, arr in _param_arrays(g).items():
            self.env[name] = self._widen(arr, g.type_of(name))
        for n in g.nodes:
            ins = [self.env.get(i) for i in n.inputs]
            name = n.out.name
            if any(x is None for x in ins):
                self.env[name] = None
                self.note[name] = "no oracle: fed by the integer domain"
                continue
            carried = [self.real.get(i, False) for i in n.inputs]
            try:
                if n.op == "quantize":
                    self.env[name] = _saturated(n, ins)
                    self.real[name] = True
                elif n.op == "cast" and n.type.dtype.name in FLOATS \
                        and g.type_of(n.inputs[0]).dtype.name in FLOATS:
                    self.env[name] = ins[0]
                elif n.op == "dequantize" and carried[0]:
                    self.env[name] = ins[0]
                elif any(carried):
                    if n.op not in CARRY:
                        self.env[name] = None
                        self.note[name] = f"no oracle: {n.op} on quantized integers"
                        continue
                    wide = TensorType(self.dtype, n.type.shape)
                    args_w = [x.astype(np.float64) if c else x for x, c in zip(
                        ins, carried, strict=True)]
                    self.env[name] = eval_op(n.op, n.a, args_w, wide)
                    self.real[name] = True
                elif n.op in INTEGER_DOMAIN:
                    self.env[name] = None
                    self.note[name] = f"no oracle: {n.op} computes in the integer domain"
                else:
                    wide = _wide(n.type, self.dtype)
                    args_w = [self._widen(x, g.type_of(i)) for x, i in zip(
                        ins, n.inputs, strict=True)]
                    self.env[name] = eval_op(n.op, n.a, args_w, wide)
            except (RlxError, ValueError, TypeError, KeyError) as err:
                self.env[name] = None
                self.note[name] = f"no oracle: {type(err).__name__}: {str(err)[:100]}"

    def _widen(self, x: Any, t: TensorType) -> Any:
        np = _np()
        if t.dtype.name in FLOATS:
            return np.asarray(x, dtype=np.float64 if self.dtype == dt.f64 else np.float32)
        return np.asarray(x)


def _saturated(n: Node, ins: list[Any]) -> Any:
    """The oracle of ``quantize``: its input unrounded but saturated to the real range the
    integers represent (a relu that ONNX Runtime folded into the quantize's clamp stays a
    relu; the clipped fraction is reported on its own)."""
    from rlx_core.ir.ops.quant import qrange
    from rlx_core.targets.numpy_ref.quant_semantics import along

    np = _np()
    x, s, z = (np.asarray(v, np.float64) for v in ins)
    lo, hi = qrange(n.type.dtype)
    axis = int(n.attr("axis", -1))
    s, z = along(s, x.ndim, axis), along(z, x.ndim, axis)
    return np.clip(x, (lo - z) * s, (hi - z) * s)


def _qparams(g: Graph, env: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Per-tensor (scale, zero point) of each quantize output and what carries it."""
    out: dict[str, tuple[float, float]] = {}
    for n in g.nodes:
        if n.op == "quantize":
            s, z = env.get(n.inputs[1]), env.get(n.inputs[2])
            if s is not None and z is not None and s.size == 1:
                out[n.out.name] = (float(s.reshape(-1)[0]), float(z.reshape(-1)[0]))
        elif n.op in CARRY and n.inputs and n.inputs[0] in out and n.type.dtype.name \
                not in FLOATS:
            out[n.out.name] = out[n.inputs[0]]
    return out


def _run_target(g: Graph, args: Sequence[Any], target: str,
                names: list[str]) -> tuple[dict[str, Any], str]:
    """Every listed node's value as ``target`` computes it, or the reason it could not run."""
    import rlx_core as rlx

    gx = g.with_nodes(g.nodes, outputs=tuple(names))
    try:
        exe = rlx.compile(gx, *args, target=target, record=False)
        outs = exe(*args)
    except RlxError as err:
        return {}, err.message.splitlines()[0]
    outs = outs if isinstance(outs, tuple) else (outs,)
    return {n: _host(o) for n, o in zip(names, outs, strict=True)}, ""


def _stats(ref: Any) -> dict[str, Any]:
    np = _np()
    r = np.asarray(ref, dtype=np.float64).reshape(-1)
    r = r[np.isfinite(r)]
    if not r.size:
        return {"min": 0.0, "max": 0.0, "hist": [], "edges": []}
    lo, hi = float(r.min()), float(r.max())
    counts, edges = np.histogram(r, bins=BINS, range=(lo, hi if hi > lo else lo + 1.0))
    return {"min": lo, "max": hi, "hist": [int(c) for c in counts],
            "edges": [float(edges[0]), float(edges[-1])]}


def _error(got: Any, want: Any) -> dict[str, float]:
    np = _np()
    a = np.asarray(got, dtype=np.float64)
    b = np.asarray(want, dtype=np.float64)
    if a.shape != b.shape or not b.size:
        return {"max_abs": float("nan"), "rel": float("nan"), "rms": float("nan")}
    with np.errstate(all="ignore"):
        d = np.abs(a - b)
        d = np.where(np.isnan(a) & np.isnan(b), 0.0, d)  # NaN where the oracle has NaN too
        scale = float(np.nanmax(np.abs(b))) if np.isfinite(b).any() else 0.0
        max_abs = float(np.nanmax(d)) if d.size else 0.0
        if np.isnan(d).any():
            max_abs = float("inf")
        return {"max_abs": max_abs, "rel": max_abs / scale if scale > 0 else max_abs,
                "rms": float(np.sqrt(np.nanmean(d * d)))}


def _entry(n: Node, g: Graph) -> str:
    """Why precision is lost at this node ('' where it is not)."""
    if n.op in ENTRY_OPS:
        return f"{n.op}: rounds to {n.type.dtype if n.op == 'quantize' else 'a quantized grid'}"
    if n.op == "cast" and n.type.dtype.name in FLOATS:
        src = g.type_of(n.inputs[0]).dtype
        if _BITS.get(src.name, 0) > _BITS[n.type.dtype.name]:
            return f"cast {src} -> {n.type.dtype}"
    return ""


# mantissa bits: a cast to fewer rounds (f16 and bf16 also narrow the range)
_BITS = {"f64": 53, "f32": 24, "f16": 11, "bf16": 8}


def _dequantized(v: Any, qp: tuple[float, float] | None) -> Any:
    np = _np()
    if qp is None:
        return v
    return (np.asarray(v, np.float64) - qp[1]) * qp[0]


def _clip_range(n: Node, qp: tuple[float, float] | None) -> list[float] | None:
    """The real range a quantize node can represent: [(qmin - z) s, (qmax - z) s]."""
    from rlx_core.ir.ops.quant import qrange

    if n.op != "quantize" or qp is None:
        return None
    lo, hi = qrange(n.type.dtype)
    return [(lo - qp[1]) * qp[0], (hi - qp[1]) * qp[0]]


def _by_origin(g: Graph, ref: Graph) -> dict[str, list[str]]:
    """Node of ``g`` -> the ``ref`` nodes it may stand for: its origin, and the origin's
    same-shaped users (a rewrite that folds the next op in — a relu after a linear — yields
    that op's value under the linear's origin). See the module docstring."""
    shapes = {n.out.name: n.type.shape for n in ref.nodes if n.type.dtype.name in FLOATS}
    users = ref.users()
    last: dict[str, str] = {}
    for n in g.nodes:
        o = n.loc.origin
        if o in shapes and n.type.dtype.name in FLOATS and n.type.shape == shapes[o]:
            last[o] = n.out.name
    return {mine: [o] + [u.out.name for u in users.get(o, [])
                         if shapes.get(u.out.name) == shapes[o]]
            for o, mine in last.items()}


def numerics_view(g: Graph, args: Sequence[Any], targets: Sequence[str] = ("numpy", "cpu"),
                  hir_view: dict[str, Any] | None = None, oracle: str = "f64",
                  max_nodes: int = 600, reference: Graph | None = None) -> dict[str, Any]:
    """The numerics lens of HIR graph ``g`` at ``args`` (JSON-able; see the module docstring).

    ``hir_view`` (views/graphs.graph_view of ``g``) gives each row the node id the other
    views select by. Graphs with more than ``max_nodes`` nodes are refused (one output per
    node on every target)."""
    np = _np()
    if oracle not in ("f64", "f32"):
        raise ValueError(f"oracle must be 'f64' or 'f32', got {oracle!r}")
    if len(g.nodes) > max_nodes:
        return {"present": False, "reason": f"{len(g.nodes)} nodes (the lens runs every node "
                                            f"as an output; at most {max_nodes})"}
    ora = _Oracle(g, args, oracle)
    qparams = _qparams(g, _Oracle(g, args, "f32").env)  # scales as the graph holds them
    names = [n.out.name for n in g.nodes]
    runs: dict[str, dict[str, Any]] = {}
    unavailable: dict[str, str] = {}
    for t in targets:
        vals, why = _run_target(g, args, t, names)
        if why:
            unavailable[t] = why
        else:
            runs[t] = vals
    if reference is not None:
        ref = _Oracle(reference, args, oracle)
        ref_ops = {n.out.name: n.op for n in reference.nodes}
        first = next(iter(runs.values()), {})
        for mine, cands in _by_origin(g, reference).items():
            cands = [c for c in cands if ref.env.get(c) is not None]
            if not cands:
                continue
            got = first.get(mine)
            best = min(cands, key=lambda c: _error(got, ref.env[c])["rel"]) \
                if got is not None else cands[0]
            ora.env[mine] = ref.env[best]
            ora.note[mine] = f"against %{best} = {ref_ops[best]} of the reference graph"
            ora.real.pop(mine, None)
    ids = {n["name"]: n["id"] for n in (hir_view or {}).get("nodes", [])}
    rows: list[dict[str, Any]] = []
    worst: dict[str, float] = {}  # node -> the largest relative error over targets
    upstream: dict[str, float] = {}  # node -> the largest error measured on its way in
    for n in g.nodes:
        name = n.out.name
        want = ora.env.get(name)
        qp = qparams.get(name)
        carried = ora.real.get(name, False)
        row: dict[str, Any] = {"name": name, "id": ids.get(name, ""), "op": n.op,
                               "type": str(n.type), "entry": _entry(n, g),
                               "loc": f"{n.loc.file}:{n.loc.line}" if n.loc.file else "",
                               "note": ora.note.get(name, ""), "errors": {},
                               "quant": {"scale": qp[0], "zero_point": qp[1]} if qp else None}
        if want is not None:
            row["stats"] = _stats(want)
            clip = _clip_range(n, qp)
            seen = ora.env.get(n.inputs[0]) if n.inputs else None
            if clip is not None and seen is not None:  # what the quantize was given
                w = np.asarray(seen, np.float64)
                row["clip"] = {"range": clip, "clipped": float(((w < clip[0]) |
                                                                 (w > clip[1])).mean())}
        for t, vals in runs.items():
            got = vals.get(name)
            if got is None or want is None:
                continue
            if carried and qp is None:
                continue  # per-channel integers: no single scale to read them with
            row["errors"][t] = _error(_dequantized(got, qp) if carried else got, want)
        rels = [e["rel"] for e in row["errors"].values() if np.isfinite(e["rel"])]
        before = max([upstream.get(i, 0.0) for i in n.inputs] or [0.0])
        worst[name] = max(rels) if rels else 0.0
        upstream[name] = worst[name] if row["errors"] else before
        row["worst_rel"] = worst[name]
        # growth: this node's error over the largest measured on the way in (through nodes
        # with no oracle value, e.g. an int8 chain); 1 = passed on unchanged
        row["upstream_rel"] = before
        row["growth"] = worst[name] / before if row["errors"] and before > 0 else None
        rows.append(row)
    entries = [r["name"] for r in rows if r["entry"]]
    return {"present": True, "oracle": oracle, "targets": list(runs), "unavailable": unavailable,
            "nodes": rows, "entries": entries,
            "outputs": [{"name": o, "worst_rel": worst.get(o, 0.0)} for o in g.outputs]}

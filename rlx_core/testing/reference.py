"""The oracle: evaluate a graph node by node with the reference semantics (``eval_op``), and
summarise, for each output, the cone of values it depends on - what the tolerance needs.

The tolerance is a first-order error bound. Each op contributes a rounding budget in ulps of the
least precise float dtype in the cone; ops with a large condition number (exp, pow, softmax,
layer_norm of a nearly constant row) multiply the bound by it; the absolute part scales with the
largest finite magnitude in the cone (cancellation: a sum's error is relative to its terms, not
to its result). An output whose cone is *exact* must match bit for bit (NaN matching NaN).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph, Node, TensorType
from rlx_core.targets.numpy_ref.executor import bind
from rlx_core.targets.numpy_ref.semantics import eval_op

MOVEMENT = {"broadcast_in_dim", "reshape", "transpose", "slice", "pad", "concat", "gather",
            "iota", "constant", "embedding"}
# ops every target must compute bit for bit from exact operands
EXACT_OPS = MOVEMENT | {"neg", "abs", "logical_not", "floor", "ceil", "round", "sign", "max",
                        "min", "and", "or", "xor", "select", "cast", "reduce_max", "reduce_min",
                        "rem",  # fmod is exact in IEEE arithmetic (and discontinuous in y)
                        "argmax", "max_pool2d", "eq", "ne", "lt", "le", "gt", "ge"}
_ROUNDED = {"add": 1, "sub": 1, "mul": 1, "div": 1, "sqrt": 1, "rsqrt": 2, "reciprocal": 1}
_TRANSCENDENTAL = {"exp", "log", "tanh", "erf", "logistic", "sin", "cos", "pow"}
# ops whose relative output error grows with the magnitude of their operand
_AMPLIFY = {"exp", "logistic", "erf", "softmax", "log_softmax", "gelu", "silu", "attention", "pow"}


def exact_op(op: str, in_types: list[TensorType], out: TensorType) -> bool:
    """Is ``op`` computed bit for bit on every target (given exact operands)?"""
    if op in ("abs", "sign") and any(t.dtype.is_complex for t in in_types):
        return False  # |z| = hypot(re, im) and z / |z| round (a target's cabsf may differ by an ulp)
    if op in EXACT_OPS:
        return True
    return not out.dtype.is_inexact and not any(t.dtype.is_inexact for t in in_types)


def eps_of(d: dt.DType) -> float:
    if d == dt.bf16:
        return 2.0 ** -7
    if d.is_complex:
        return float(np.finfo(np.float32).eps)
    return float(np.finfo(dt.to_numpy_name(d)).eps)


def tiny_of(d: dt.DType) -> float:
    """The smallest positive subnormal of ``d`` (bf16: 2^-133)."""
    if d == dt.bf16:
        return 2.0 ** -133
    return float(_finfo(d).smallest_subnormal)


def _finfo(d: dt.DType) -> Any:
    return np.finfo(np.float32 if d in (dt.bf16, dt.c64) else dt.to_numpy_name(d))


@dataclass(frozen=True)
class ConeStats:
    """What one value depends on (itself included)."""

    exact: bool = True
    ulps: float = 0.0  # rounding budget, in ulps of ``eps``
    cond: float = 1.0  # condition-number amplification
    scale: float = 0.0  # largest finite magnitude in the cone
    eps: float = 0.0  # machine epsilon of the least precise float dtype in the cone (0: none)
    tiny: float = 0.0  # its smallest subnormal: the absolute error of a rounding near 0
    ops: frozenset[str] = field(default_factory=frozenset)
    nonfinite: bool = False  # a NaN or infinity somewhere in the cone
    subnormal: bool = False  # a subnormal float somewhere in the cone
    near_overflow: bool = False  # a value within 2^6 of its dtype's overflow threshold
    # "op:dtype" of each node (its result's dtype): a target's rule for one op in one dtype
    typed_ops: frozenset[str] = field(default_factory=frozenset)

    def merge(self, other: ConeStats) -> ConeStats:
        return ConeStats(
            self.exact and other.exact, self.ulps + other.ulps, self.cond * other.cond,
            max(self.scale, other.scale), max(self.eps, other.eps),
            max(self.tiny, other.tiny), self.ops | other.ops,
            self.nonfinite or other.nonfinite, self.subnormal or other.subnormal,
            self.near_overflow or other.near_overflow, self.typed_ops | other.typed_ops)


def _value_stats(x: np.ndarray, d: dt.DType) -> ConeStats:
    if not d.is_inexact or x.size == 0:
        return ConeStats()
    a = np.abs(x).astype(np.float64)
    finite = np.isfinite(a)
    fin = a[finite]
    info = _finfo(d)
    big = float(fin.max()) if fin.size else 0.0
    sub = bool(((fin > 0) & (fin < float(info.tiny))).any())
    return ConeStats(scale=big, eps=eps_of(d), tiny=tiny_of(d), nonfinite=not bool(finite.all()), subnormal=sub,
                     near_overflow=big > float(info.max) / 64)


def _scores_near_overflow(args: list[np.ndarray], a: dict[str, Any], d: dt.DType) -> bool:
    """Whether attention's scaled scores q . k^T * scale come within 2^6 of ``d``'s overflow."""
    q, k = (np.asarray(x, np.float64) for x in args[:2])
    if q.size == 0 or k.size == 0 or q.ndim != 4 or k.ndim != 4:
        return False
    if a.get("layout") == "bshd":
        q, k = q.swapaxes(1, 2), k.swapaxes(1, 2)
    scale = float(a.get("scale") or 0.0) or 1.0 / math.sqrt(q.shape[3])
    with np.errstate(all="ignore"):
        s = np.abs(np.einsum("bhqd,bhkd->bhqk", q, k) * scale)
    s = s[np.isfinite(s)]
    return bool(s.size) and float(s.max()) > float(_finfo(d).max) / 64


def _prod_leaves_range(x: np.ndarray, axes: Any, d: dt.DType) -> bool:
    """Whether some partial product of a reduce_prod group of ``x`` (over ``axes``) falls
    outside ``d``'s normal range: the product of a group's small (|v| < 1) finite factors
    below the smallest normal, or of its large ones above max / 64."""
    if x.size == 0 or x.dtype.kind not in "fc":
        return False
    info = _finfo(d)
    with np.errstate(all="ignore"):
        a = np.abs(x).astype(np.float64)
        ok = np.isfinite(a) & (a > 0)
        logs = np.where(ok, np.log2(np.where(ok, a, 1.0)), 0.0)
    ax = tuple(int(i) % x.ndim for i in axes) if x.ndim else ()
    low = np.sum(np.minimum(logs, 0.0), axis=ax)
    high = np.sum(np.maximum(logs, 0.0), axis=ax)
    return bool((low < math.log2(float(info.tiny))).any()
                or (high > math.log2(float(info.max) / 64)).any())


def _node_budget(n: Node, args: list[np.ndarray], in_types: list[TensorType]) -> tuple[float, float]:
    """(ulps, cond) one node adds."""
    op = n.op
    if exact_op(op, in_types, n.type):
        return 0.0, 1.0
    x = args[0] if args else np.zeros(0)
    mag = 1.0
    if x.size and np.issubdtype(x.dtype, np.number):
        fin = np.abs(x[np.isfinite(x)]) if x.dtype.kind in "fc" else np.abs(x)
        mag = max(1.0, float(fin.max())) if fin.size else 1.0
    if op in _ROUNDED:
        return float(_ROUNDED[op]), 1.0
    if op == "pow" and len(args) == 2 and args[1].size:
        y = np.abs(args[1][np.isfinite(args[1])]) if args[1].dtype.kind == "f" else np.abs(args[1])
        ymax = float(y.max()) if y.size else 1.0
        return 8.0, max(1.0, ymax * max(1.0, math.log(mag)))
    if op in _TRANSCENDENTAL:
        return 8.0, mag if op in _AMPLIFY else 1.0
    a = n.a
    if op in ("reduce_sum", "reduce_prod"):
        return float(max(1, x.size // max(1, n.type.size))) + 1, 1.0
    if op == "dot_general":
        return float(math.prod(in_types[0].shape[i] for i in a["contract"][0])) + 1, 1.0
    if op == "scatter_add":
        return float(args[1].size) + 2, 1.0
    if op == "cast":
        return 1.0, 1.0
    last = in_types[0].shape[-1] if in_types[0].rank else 1
    if op == "linear":
        return float(last) + 2, 1.0
    if op in ("layer_norm", "rms_norm"):
        cond = 1.0
        if op == "layer_norm" and x.size:
            xf = x.astype(np.float64)
            with np.errstate(all="ignore"):
                std = np.sqrt(np.nanmin(np.var(xf, axis=-1)) + a["eps"])
            cond = mag / std if np.isfinite(std) and std > 0 else 1.0
        return 3.0 * last + 10, max(1.0, cond)
    if op in ("softmax", "log_softmax"):
        return 2.0 * in_types[0].shape[a["axis"]] + 10, mag
    if op == "attention":
        return 2.0 * (in_types[0].shape[-1] + in_types[1].shape[-2]) + 20, mag * mag
    if op == "conv2d":
        w = in_types[1].shape
        return float(w[1] * w[2] * w[3]) + 2, 1.0
    if op == "avg_pool2d":
        k = a["kernel"]
        return float(k[0] * k[1]) + 2, 1.0
    return 16.0, mag if op in _AMPLIFY else 1.0


# ops whose error grows as an operand nears 0: the operand's index
_DIVIDES = {"div": 1, "reciprocal": 0, "rsqrt": 0, "log": 0, "pow": 0}


def _divisor_cond(y: np.ndarray, c: ConeStats) -> float:
    """1 + S/min|y| for an inexact ``y``: its error is relative to its cone's magnitude S, not
    to itself, so dividing by a small (cancelled) y amplifies it; inf when y may be 0."""
    if c.exact or not np.issubdtype(y.dtype, np.inexact) or y.size == 0:
        return 1.0
    a = np.abs(y[np.isfinite(y)]).astype(np.float64)
    if a.size == 0:
        return 1.0
    small = float(a.min())
    return 1.0 + c.scale / small if small > 0 else math.inf


@dataclass
class Reference:
    """The reference outputs of a graph and the cone statistics of each."""

    outputs: list[np.ndarray]
    stats: list[ConeStats]
    values: dict[str, np.ndarray]


def evaluate(g: Graph, inputs: list[Any]) -> Reference:
    """Run ``g`` on the reference, keeping every intermediate value and each one's cone."""
    env = bind(g, inputs, {})  # parameters: their Graph.param_data
    types = {v.name: v.type for v in (*g.inputs, *g.params)}
    cone: dict[str, ConeStats] = {v.name: _value_stats(env[v.name], v.type.dtype)
                                  for v in (*g.inputs, *g.params)}
    for n in g.nodes:
        args = [env[i] for i in n.inputs]
        in_types = [types[i] for i in n.inputs]
        with np.errstate(all="ignore"):
            env[n.name] = eval_op(n.op, n.a, args, n.type)
        types[n.name] = n.type
        with np.errstate(all="ignore"):
            ulps, cond = _node_budget(n, args, in_types)
        own = _value_stats(np.asarray(env[n.name]), n.type.dtype)
        if n.op in ("layer_norm", "rms_norm") and n.type.dtype.is_float and args[0].size:
            # the sum of squares inside the norm, in the dtype it is computed in (f32 for
            # f16/bf16, docs/reliability.md 'Overflow in f32'): near its max, the targets'
            # working-precision sum and the f64 reference may disagree
            x = args[0].astype(np.float64)
            if n.op == "layer_norm":
                x = x - np.nanmean(x, axis=-1, keepdims=True)
            with np.errstate(all="ignore"):
                sq = np.nansum(x * x, axis=-1)
            work = dt.f64 if n.type.dtype == dt.f64 else dt.f32
            if float(np.nanmax(sq, initial=0.0)) > float(_finfo(work).max) / 64:
                own = replace(own, near_overflow=True)
        if n.op == "attention" and n.type.dtype.is_float and _scores_near_overflow(
                args, n.a, n.type.dtype):
            # q . k in the working dtype (f16: 65504) can overflow where this f64 reference's
            # scores stay finite; an inf score makes the softmax row NaN on every target
            own = replace(own, near_overflow=True)
        if n.op == "reduce_prod" and n.type.dtype.is_float and _prod_leaves_range(
                args[0], n.a.get("axes", ()), n.type.dtype):
            # a partial product that under- or overflows in the working dtype makes the
            # result depend on the order of the multiplications (inf * (tiny * tiny) is NaN
            # in f32 where a left-to-right product stays inf): order decides, as for sums
            own = replace(own, near_overflow=True)
        if n.op in _DIVIDES:  # x / y with y inexact: y's absolute error, relative to |y|
            y = n.inputs[_DIVIDES[n.op]]
            cond *= _divisor_cond(env[y], cone[y])
        own = replace(own, exact=exact_op(n.op, in_types, n.type), ulps=ulps, cond=cond,
                      ops=frozenset({n.op}), typed_ops=frozenset({f"{n.op}:{n.type.dtype.name}"}))
        for i in n.inputs:
            own = own.merge(cone[i])
        cone[n.name] = own
    outs = [np.array(env[o], copy=True) for o in g.outputs]
    return Reference(outs, [cone[o] for o in g.outputs], env)

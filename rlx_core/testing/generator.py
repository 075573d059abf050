"""Random well-typed graphs (NNSmith-style): grow a pool of values by applying random ops whose
shape/dtype rules accept them, over every MIR primitive and HIR op a target claims.

Two rules keep the comparison meaningful without hiding anything:
- a value is *exact* when every target must compute it bit for bit (inputs, data movement,
  max/min/select/compare, integer arithmetic, casts of exact values); ops that are discontinuous
  in their operand (floor/ceil/round/sign, comparisons, float->int casts, argmax) only read exact
  values, so a last-ulp difference upstream cannot flip their answer;
- integer divisors are never 0 or -1 and shifts do not exist, so no C undefined behaviour is
  generated (the reference pins 0 for x/0, C traps or leaves it open).

Some graphs bind their weight operands (a matmul's B, a linear's or a convolution's weight and
bias, both filters of a projection shortcut, the integer ops' weights) as graph *parameters*
with data (``Graph.param_data``) instead of inputs: a target may treat a parameter as a
constant of the program (the cpu prepacks a GEMM's B and a convolution's filter once,
cpu/prepack.py), a path that inputs never reach. Such a weight is sometimes wide or deep
enough for those kernels (``WIDE``, ``WIDE_CONV``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx_core.errors import RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder, NameGen
from rlx_core.ir.graph import Graph, Level, Loc, TensorType, Value, ValueKind
from rlx_core.ir.ops.mir import BINARY, COMPARE, REDUCE, UNARY
from rlx_core.testing import values
from rlx_core.testing.profile import Profile
from rlx_core.testing.reference import exact_op

_DISCONTINUOUS = {"floor", "ceil", "round", "sign"}  # (and rem, handled in binary)
# unary ops whose shape rule takes complex operands but the reference defines on reals only
# (the verifier should refuse them: noted in the fuzzing report)
_REAL_ONLY = {"erf", "floor", "ceil"}
_DOMAIN = {"log", "sqrt", "rsqrt", "reciprocal"}  # ops with a restricted real domain


# the HIR ops the generator draws: float composites (at the operand's float dtype) and the
# integer quantization ops (their dtypes are fixed by the op)
FLOAT_HIR = ("linear", "layer_norm", "rms_norm", "softmax", "log_softmax", "gelu", "silu",
             "attention", "embedding", "conv2d", "conv2d_fused", "conv2d_pair", "max_pool2d",
             "avg_pool2d")
QUANT_HIR = ("quantize", "dequantize", "requantize", "int_linear", "fake_quantize",
             "int4_linear", "int_conv2d")
PARAM_GRAPHS = 0.5  # the share of graphs that bind weights as parameters
PARAM_WEIGHTS = 0.8  # in those, the share of weight operands bound
# in those, the actions that draw weights are drawn this much more often
PARAM_ACTIONS = {"dot": 3.0, "hir": 1.5, "quant": 1.5}
WEIGHT_HIR = ("linear", "conv2d", "conv2d_fused", "conv2d_pair")  # (half their HIR draws)
# a bound weight's output count, sometimes: past the cpu's narrow-GEMM threshold (its own GEMM,
# on prepacked panels, takes 32 columns or more: sgemm.MIN_N), odd ones included
WIDE = (32, 33, 40, 64)
# an f32 convolution's input (channels, rows, columns), sometimes, with a bound filter: enough
# channels and pixels for the blocked direct kernel and Winograd (cpu/conv_blocked.py, winograd.py)
WIDE_CONV = ((16, 17, 24), (6, 8, 10), (6, 8, 10))


@dataclass
class Case:
    """One random graph and its inputs. ``seed`` regenerates it."""

    graph: Graph
    inputs: list[np.ndarray]
    seed: tuple[int, ...] = ()

    @property
    def ops(self) -> list[str]:
        return [n.op for n in self.graph.nodes]


class _Gen:
    def __init__(self, profile: Profile, rng: np.random.Generator, max_ops: int):
        self.p = profile
        self.rng = rng
        self.max_ops = max_ops
        self.names = NameGen()
        self.b = Builder(self.names, loc=Loc("fuzz.py", 1))
        self.inputs: list[Value] = []
        self.arrays: list[np.ndarray] = []
        self.params: list[Value] = []
        self.param_data: dict[str, np.ndarray] = {}
        self.pool: list[Value] = []
        self.exact: dict[str, bool] = {}
        self.zero_dims = rng.random() < 0.12 and profile.zero_size
        self.specials = profile.specials and rng.random() < 0.6
        self.binds = rng.random() < PARAM_GRAPHS  # weights bound as parameters (module notes)

    # ---- helpers --------------------------------------------------------------------------
    def choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def dim(self) -> int:
        if self.zero_dims and self.rng.random() < 0.25:
            return 0
        return int(self.choice([1, 1, 2, 3, 4, 5, 7]))

    def shape(self, rank: int | None = None) -> tuple[int, ...]:
        r = int(self.choice([0, 1, 1, 2, 2, 3, 3, 4])) if rank is None else rank
        return tuple(self.dim() for _ in range(r))

    def fresh(self, d: str, shape: tuple[int, ...], kind: str = "any") -> Value:
        v = Value(self.names.claim(f"in{len(self.inputs)}"), TensorType(dt.get(d), tuple(shape)),
                  ValueKind.INPUT)
        self.inputs.append(v)
        self.arrays.append(values.array(d, tuple(shape), self.rng, specials=self.specials,
                                        kind=kind))
        self.exact[v.name] = True
        return v

    def bound(self) -> bool:
        """Is the next weight operand a parameter? (Only in graphs that bind weights.)"""
        return self.binds and self.rng.random() < PARAM_WEIGHTS

    def weight(self, d: str, shape: tuple[int, ...], bound: bool, kind: str = "any") -> Value:
        """A weight operand: a parameter with data when ``bound``, else a fresh input."""
        if not bound:
            return self.fresh(d, shape, kind)
        v = Value(self.names.claim(f"p{len(self.params)}"), TensorType(dt.get(d), tuple(shape)),
                  ValueKind.PARAM)
        self.params.append(v)
        self.param_data[v.name] = values.array(d, tuple(shape), self.rng,
                                               specials=self.specials, kind=kind)
        self.exact[v.name] = True
        return v

    def outputs_of(self, bound: bool) -> int:
        """A weight's output count (never 0): sometimes ``WIDE`` when it is bound."""
        if bound and self.rng.random() < 0.5:
            return int(self.choice(WIDE))
        return self.dim() or 1

    def emit(self, op: str, ins: list[Value], **attrs) -> Value:
        out = self.b.emit(op, ins, attrs)
        self.exact[out.name] = exact_op(op, [v.type for v in ins], out.type) and all(
            self.exact[v.name] for v in ins)
        self.pool.append(out)
        return out

    def pick(self, ok: Callable[[Value], bool] = lambda v: True) -> Value | None:
        cands = [v for v in self.pool + self.inputs if ok(v)]
        if not cands:
            return None
        # prefer recent values: deeper graphs
        w = np.arange(1, len(cands) + 1, dtype=float) ** 1.5
        return cands[int(self.rng.choice(len(cands), p=w / w.sum()))]

    def is_exact(self, v: Value) -> bool:
        return self.exact[v.name]

    def const(self, d: str, shape: tuple[int, ...], value: float) -> Value:
        return self.emit("constant", [], value=value, shape=tuple(shape), dtype=dt.get(d))

    def positive(self, x: Value) -> Value:
        """|x| + 0.5: keeps log/sqrt/division in their finite domain."""
        a = self.emit("abs", [x])
        return self.emit("add", [a, self.const(x.type.dtype.name, x.type.shape, 0.5)])

    def partner(self, x: Value, kind: str = "any") -> Value:
        """A value of x's type: from the pool, fresh, or broadcast from a smaller fresh input."""
        t = x.type
        r = self.rng.random()
        if kind == "any" and r < 0.4:
            same = self.pick(lambda v: v.type == t and v.name != x.name)
            if same is not None:
                return same
        if kind == "any" and r < 0.7 and t.rank:
            keep = [i for i in range(t.rank) if self.rng.random() < 0.6]
            small = tuple(t.shape[i] if self.rng.random() < 0.5 else 1 for i in keep)
            y = self.fresh(t.dtype.name, small)
            return self.emit("broadcast_in_dim", [y], shape=t.shape, dims=tuple(keep))
        return self.fresh(t.dtype.name, t.shape, kind)

    # ---- actions --------------------------------------------------------------------------
    def unary(self) -> Value | None:
        x = self.pick()
        d = x.type.dtype.name
        ops = [op for op in UNARY if self.p.claims(op, d)
               and (self.is_exact(x) or op not in _DISCONTINUOUS)
               and not (x.type.dtype.is_complex and op in _REAL_ONLY)]
        if not ops:
            return None
        op = self.choice(ops)
        if op in _DOMAIN and x.type.dtype.is_float and (not self.specials or self.rng.random() < .5):
            x = self.positive(x)
        return self.emit(op, [x])

    def binary(self) -> Value | None:
        x = self.pick()
        d = x.type.dtype
        ops = [op for op in BINARY if self.p.claims(op, d.name)]
        if not ops:
            return None
        op = self.choice(ops)
        if op == "rem" and d.is_inexact and not self.is_exact(x):
            return None  # rem jumps where x/y crosses an integer: exact operands only
        if d.is_int and op in ("div", "rem"):
            y = self.fresh(d.name, x.type.shape, "nonzero")
        elif d.is_int and op == "pow":
            y = self.fresh(d.name, x.type.shape, "small")
        else:
            y = self.partner(x)
        if op == "rem" and d.is_inexact and not self.is_exact(y):
            y = self.fresh(d.name, x.type.shape)
        if d.is_float and (not self.specials or self.rng.random() < 0.5):
            if op == "div":
                y = self.positive(y)
            elif op == "pow":
                x = self.positive(x)
        return self.emit(op, [x, y])

    def compare(self) -> Value | None:
        x = self.pick(self.is_exact)
        if x is None:
            return None
        ops = [op for op in COMPARE if self.p.claims(op, x.type.dtype.name)]
        if not ops:
            return None
        y = self.partner(x)
        if not self.is_exact(y):
            y = self.fresh(x.type.dtype.name, x.type.shape)
        return self.emit(self.choice(ops), [x, y])

    def select(self) -> Value | None:
        x = self.pick()
        if not self.p.claims("select", x.type.dtype.name):
            return None
        pred = self.pick(lambda v: v.type.dtype == dt.bool_ and v.type.shape == x.type.shape)
        if pred is None:
            pred = self.fresh("bool", x.type.shape)
        return self.emit("select", [pred, x, self.partner(x)])

    def cast(self) -> Value | None:
        x = self.pick()
        to = self.choice([d for d in self.p.dtypes if dt.get(d) != dt.c64 or x.type.dtype.is_inexact])
        if not self.p.claims("cast", x.type.dtype.name, to):
            return None
        if x.type.dtype.is_inexact and not dt.get(to).is_inexact and not self.is_exact(x):
            return None
        return self.emit("cast", [x], dtype=dt.get(to))

    def reduce(self) -> Value | None:
        x = self.pick(lambda v: v.type.rank > 0)
        if x is None:
            return None
        ops = [op for op in REDUCE if self.p.claims(op, x.type.dtype.name)]
        if not ops:
            return None
        op = self.choice(ops)
        axes = tuple(i for i in range(x.type.rank) if self.rng.random() < 0.5) or (
            int(self.rng.integers(x.type.rank)),)
        return self.emit(op, [x], axes=axes)

    def argmax(self) -> Value | None:
        x = self.pick(lambda v: self.is_exact(v) and v.type.rank > 0 and v.type.dtype != dt.bool_)
        if x is None or not self.p.claims("argmax", x.type.dtype.name):
            return None
        axes = [i for i, n in enumerate(x.type.shape) if n > 0]
        if not axes:
            return None
        return self.emit("argmax", [x], axis=self.choice(axes),
                         index_dtype=dt.get(self.p.index_dtype))

    def movement(self) -> Value | None:
        x = self.pick()
        t = x.type
        kind = self.choice(["reshape", "transpose", "slice", "pad", "concat", "broadcast"])
        if not self.p.claims(kind if kind != "broadcast" else "broadcast_in_dim", t.dtype.name):
            return None
        if kind == "reshape":
            return self.emit("reshape", [x], shape=self.factor(t.size))
        if kind == "transpose":
            return self.emit("transpose", [x],
                             perm=tuple(int(i) for i in self.rng.permutation(t.rank)))
        if kind == "broadcast":
            pos = int(self.rng.integers(t.rank + 1))
            shape = tuple(self.dim() if n == 1 and self.rng.random() < 0.5 else n
                          for n in t.shape)
            shape = shape[:pos] + (int(self.choice([1, 2, 3])),) + shape[pos:]
            dims = tuple(i if i < pos else i + 1 for i in range(t.rank))
            return self.emit("broadcast_in_dim", [x], shape=shape, dims=dims)
        if t.rank == 0:
            return None
        if kind == "slice":
            start, limit, stride = [], [], []
            for n in t.shape:
                if self.p.zero_size:
                    s = int(self.rng.integers(n + 1))
                    e = int(self.rng.integers(s, n + 1))
                else:  # the target refuses empty tensors: a slice keeps at least one element
                    s = int(self.rng.integers(n))
                    e = int(self.rng.integers(s + 1, n + 1))
                start.append(s)
                limit.append(e)
                stride.append(int(self.choice([1, 1, 2, 3])))
            return self.emit("slice", [x], start=tuple(start), limit=tuple(limit),
                             stride=tuple(stride))
        if kind == "pad":
            low = tuple(int(self.rng.integers(3)) for _ in t.shape)
            high = tuple(int(self.rng.integers(3)) for _ in t.shape)
            value = float(self.choice([0.0, 1.0, -2.5]))
            return self.emit("pad", [x], low=low, high=high, value=value)
        ax = int(self.rng.integers(t.rank))
        others = []
        for _ in range(int(self.rng.integers(1, 3))):
            shape = t.shape[:ax] + (self.dim(),) + t.shape[ax + 1:]
            same = self.pick(lambda v: v.type.dtype == t.dtype and v.type.rank == t.rank and all(
                a == b for i, (a, b) in enumerate(zip(v.type.shape, t.shape, strict=True)) if i != ax))
            others.append(same if same is not None and self.rng.random() < 0.5
                          else self.fresh(t.dtype.name, shape))
        return self.emit("concat", [x, *others], axis=ax)

    def factor(self, size: int) -> tuple[int, ...]:
        """A random shape with ``size`` elements."""
        if size == 0:
            shape = [self.dim() or 1 for _ in range(int(self.rng.integers(1, 4)))]
            shape[int(self.rng.integers(len(shape)))] = 0
            return tuple(shape)
        out, left = [], size
        for p in (2, 3, 5, 7):
            while left % p == 0 and self.rng.random() < 0.7:
                out.append(p)
                left //= p
        out.append(left)
        self.rng.shuffle(out)
        if self.rng.random() < 0.3:
            out.insert(int(self.rng.integers(len(out) + 1)), 1)
        return tuple(int(v) for v in out if v != 1 or self.rng.random() < 0.5) or (size,)

    def gather(self) -> Value | None:
        x = self.pick(lambda v: v.type.rank > 0 and any(n > 0 for n in v.type.shape))
        if x is None or not self.p.claims("gather", x.type.dtype.name, self.p.index_dtype):
            return None
        ax = self.choice([i for i, n in enumerate(x.type.shape) if n > 0])
        idx = self.fresh(self.p.index_dtype, self.shape(int(self.choice([0, 1, 1, 2]))),
                         f"index:{x.type.shape[ax]}")
        return self.emit("gather", [x, idx], axis=ax)

    def scatter_add(self) -> Value | None:
        x = self.pick(lambda v: v.type.rank > 0 and any(n > 0 for n in v.type.shape))
        if x is None or not self.p.claims("scatter_add", x.type.dtype.name, self.p.index_dtype):
            return None
        t = x.type
        ax = self.choice([i for i, n in enumerate(t.shape) if n > 0])
        idx = self.fresh(self.p.index_dtype, (int(self.rng.integers(1, 5)),),
                         f"index:{t.shape[ax]}")
        upd = self.fresh(t.dtype.name, t.shape[:ax] + idx.type.shape + t.shape[ax + 1:])
        return self.emit("scatter_add", [x, idx, upd], axis=ax)

    def dot(self) -> Value | None:
        x = self.pick(lambda v: v.type.rank > 0 and v.type.dtype != dt.bool_)
        if x is None or not self.p.claims("dot_general", x.type.dtype.name):
            return None
        t = x.type
        c = int(self.rng.integers(t.rank))
        bound = self.bound()
        n = self.outputs_of(bound)
        rest = [i for i in range(t.rank) if i != c]
        if rest and self.rng.random() < 0.4:
            bi = self.choice(rest)
            y = self.weight(t.dtype.name, (t.shape[bi], t.shape[c], n), bound)
            return self.emit("dot_general", [x, y],
                             contract=((c,), (1,)), batch=((bi,), (0,)))
        y = self.weight(t.dtype.name, (t.shape[c], n), bound)
        return self.emit("dot_general", [x, y],
                         contract=((c,), (0,)), batch=((), ()))

    def source(self) -> Value | None:
        d = self.choice(self.p.dtypes)
        if self.rng.random() < 0.5:
            shape = self.shape() or (3,)
            if not self.p.claims("iota", d) or dt.get(d) == dt.bool_:
                return None
            return self.emit("iota", [], shape=shape,
                             dim=int(self.rng.integers(len(shape))), dtype=dt.get(d))
        if not self.p.claims("constant", d):
            return None
        t = dt.get(d)
        v = (bool(self.rng.random() < .5) if t == dt.bool_ else int(self.rng.integers(-3, 4))
             if t.kind is dt.Kind.INT else int(self.rng.integers(0, 7)) if t.is_int
             else float(self.choice([0.0, 1.0, -1.5, 0.25, 3.0])))
        return self.const(d, self.shape(), v)

    def hir(self) -> Value | None:
        if not self.p.floats:
            return None
        pool = WEIGHT_HIR if self.binds and self.rng.random() < 0.5 else FLOAT_HIR
        return self.hir_op(self.choice(pool))

    def hir_op(self, op: str, dtype: str | None = None) -> Value | None:
        """Draw the float HIR op ``op`` (at ``dtype``: a probe's, else the operand's)."""
        if op not in self.p.hir:
            return None
        x = self.pick(lambda v: v.type.dtype.is_float and dtype in (None, v.type.dtype.name))
        d = x.type.dtype.name if x is not None else dtype or self.choice(self.p.floats)
        if (op, d) in self.p.refused:  # the target refused this op at this dtype in this run
            return None
        if x is None or (op in ("conv2d", "conv2d_fused", "conv2d_pair", "max_pool2d",
                                "avg_pool2d") and x.type.rank != 4):
            x = self.fresh(d, (self.choice([1, 2]), self.choice([1, 2, 3]), self.choice([3, 4, 5]),
                               self.choice([3, 4, 6])))
        t = x.type
        if op == "linear":
            if t.rank == 0:
                return None
            bound = self.bound()
            o = self.outputs_of(bound)
            ins = [x, self.weight(d, (o, t.shape[-1]), bound)]
            if self.rng.random() < 0.5:
                ins.append(self.weight(d, (o,), bound))
            return self.emit(op, ins)
        if op in ("layer_norm", "rms_norm"):
            if t.rank == 0:
                return None
            k = int(self.rng.integers(1, 3 if op == "rms_norm" else 4))
            return self.emit(op, [x] + [self.fresh(d, (t.shape[-1],)) for _ in range(k - 1)],
                             eps=float(self.choice([1e-5, 1e-6, 0.1])))
        if op in ("softmax", "log_softmax"):
            if t.rank == 0:
                return None
            return self.emit(op, [x], axis=int(self.rng.integers(-t.rank, t.rank)))
        if op == "gelu":
            return self.emit(op, [x], approximate=self.choice(["none", "tanh"]))
        if op == "silu":
            return self.emit(op, [x])
        if op == "attention":
            layout = self.choice(["bhsd", "bshd"])
            b, h, s, e = self.choice([1, 2]), self.choice([1, 2]), self.choice([1, 3, 4]), \
                self.choice([2, 4])
            sk = self.choice([s, 2, 5])
            shp = (lambda seq, dd: (b, h, seq, dd) if layout == "bhsd" else (b, seq, h, dd))
            q, k, v = (self.fresh(d, shp(s, e)), self.fresh(d, shp(sk, e)),
                       self.fresh(d, shp(sk, self.choice([e, 3]))))
            return self.emit(op, [q, k, v], mask=self.choice(["none", "causal"]),
                             scale=float(self.choice([0.0, 0.5])), layout=layout)
        if op == "embedding":
            num = self.choice([1, 3, 5])
            table = x if t.rank == 2 and t.shape[0] > 0 else self.fresh(d, (num, self.choice([2, 3])))
            ids = self.fresh(self.p.index_dtype, self.shape(int(self.choice([0, 1, 2]))),
                             f"index:{table.type.shape[0]}")
            return self.emit(op, [table, ids][::-1])
        bound = self.bound()
        if bound and d == "f32" and op in ("conv2d", "conv2d_fused") and \
                self.rng.random() < 0.3:
            x = self.fresh(d, (self.choice([1, 2]), *(self.choice(c) for c in WIDE_CONV)))
            t = x.type
        n, c, hh, ww = t.shape
        if op == "conv2d_pair":  # the cpu's projection shortcut: a second 1x1 conv summed
            o, s = self.choice([1, 2, 3]), self.choice([1, 2])
            oh, ow = (hh - 1) // s + 1, (ww - 1) // s + 1
            c1 = self.choice([1, 2, 3])  # the first conv's input: z, at the output's size
            ins = [self.fresh(d, (n, c1, oh, ow)), self.weight(d, (o, c1, 1, 1), bound),
                   self.fresh(d, (o,)), x, self.weight(d, (o, c, 1, 1), bound),
                   self.fresh(d, (o,))]
            if bound:  # as a model writes it, which the cpu pairs (passes/conv_epilogue.py)
                return self.shortcut_sum(ins, s)
            return self.emit(op, ins, stride2=(s, s), act=self.choice(["none", "max", "clip"]),
                             lo=0.0, hi=6.0)
        if op in ("conv2d", "conv2d_fused"):
            g = self.choice([g for g in (1, 2, 3) if c % g == 0])
            o = g * self.choice([1, 2] if c < WIDE_CONV[0][0] else [1, 8, 16])
            kh, kw = self.choice([1, 2, 3]), self.choice([1, 2, 3])
            w = self.weight(d, (o, c // g, kh, kw), bound)
            ins = [x, w] + ([self.weight(d, (o,), bound)] if self.rng.random() < 0.5 else [])
            wide = c >= WIDE_CONV[0][0]  # mostly stride 1 and no dilation: enough pixels
            st = (self.choice([1, 1, 1, 2] if wide else [1, 2]),
                  self.choice([1, 1, 1, 2] if wide else [1, 2]))
            pd = (self.choice([0, 1]), self.choice([0, 1]))
            dil = (self.choice([1, 1, 1, 2] if wide else [1, 2]), 1)
            attrs: dict[str, Any] = {"stride": st, "padding": pd, "dilation": dil, "groups": g}
            if op == "conv2d_fused":  # the cpu's fused epilogue: act(conv + bias + residual)
                oh = (hh + 2 * pd[0] - dil[0] * (kh - 1) - 1) // st[0] + 1
                ow = (ww + 2 * pd[1] - dil[1] * (kw - 1) - 1) // st[1] + 1
                if oh < 1 or ow < 1:
                    return None
                act = self.choice(["none", "max", "min", "clip"])
                lo, hi = float(self.choice([0.0, -1.0])), float(self.choice([6.0, 1.0]))
                residual = len(ins) == 3 and self.rng.random() < 0.5
                if residual:
                    ins.append(self.fresh(d, (n, o, oh, ow)))
                attrs.update(act=act, lo=lo, hi=hi, residual=residual)
            return self.emit(op, ins, **attrs)
        kh, kw = self.choice([1, 2, 3]), self.choice([1, 2, 3])
        return self.emit(op, [x], kernel=(kh, kw),
                         stride=(self.choice([1, 2]), self.choice([1, 2])),
                         padding=(self.choice([0, kh // 2]), self.choice([0, kw // 2])))

    def shortcut_sum(self, ins: list[Value], s: int) -> Value:
        """``conv2d(z, w, b) + conv2d(x, ws, bs) {stride s}`` (both 1x1, ``ins`` as
        conv2d_pair's), sometimes through a ReLU: a graph's own conv2d_pair is legalized to
        primitives, so only this form reaches a target's pair kernel."""
        one = {"padding": (0, 0), "dilation": (1, 1), "groups": 1}
        a = self.emit("conv2d", ins[:3], stride=(1, 1), **one)
        b = self.emit("conv2d", ins[3:], stride=(s, s), **one)
        out = self.emit("add", [a, b])
        if self.rng.random() < 0.5:
            out = self.emit("max", [out, self.const(out.type.dtype.name, out.type.shape, 0.0)])
        return out

    def qparams(self, x: Value, zp_dtype: str = "i32") -> tuple[Value, Value, int]:
        """Constant scale (> 0) and zero point, per tensor or per channel along an axis."""
        per_channel = x.type.rank > 0 and x.type.shape[-1] > 0 and self.rng.random() < 0.4
        n = x.type.shape[-1] if per_channel else 0
        shape = (n,) if per_channel else ()
        scales = tuple(float(self.choice([0.05, 0.1, 0.25, 1.0, 3.0])) for _ in range(n or 1))
        zps = tuple(int(self.rng.integers(-3, 4)) for _ in range(n or 1))
        zps = tuple(float(z) for z in zps) if zp_dtype == "f32" else zps
        scale = self.emit("constant", [], value=scales if n else scales[0], shape=shape,
                          dtype=dt.f32)
        zp = self.emit("constant", [], value=zps if n else zps[0], shape=shape,
                       dtype=dt.get(zp_dtype))
        return scale, zp, -1

    def quant(self) -> Value | None:
        """The integer quantization ops (HIR, rlx_core/ir/ops/quant.py)."""
        if not {"f32", "i32"} <= set(self.p.dtypes):
            return None
        return self.quant_op(self.choice(QUANT_HIR))

    def quant_op(self, op: str) -> Value | None:
        """Draw the quantization op ``op``."""
        if op not in self.p.hir or any(r[0] == op for r in self.p.refused):
            return None  # (their dtypes are fixed by the op: a refusal drops the op)
        if op == "int_conv2d":
            return self.int_conv2d()
        if op == "int4_linear":  # f32 x, u8 (out, in/2) packed nibbles, scale per group
            x = self.pick(lambda v: v.type.dtype == dt.f32 and v.type.rank > 0
                          and v.type.shape[-1] > 0 and v.type.shape[-1] % 2 == 0)
            x = x if x is not None else self.fresh("f32", (self.dim(), self.choice([2, 4, 6, 8])))
            k, n = x.type.shape[-1], int(self.choice([1, 2, 3, 4]))
            g = self.choice([v for v in (2, 4, k) if k % v == 0])
            bound = self.bound()
            ins = [x, self.weight("u8", (n, k // 2), bound),
                   self.weight("f32", (n, k // g), bound)]
            if self.rng.random() < 0.5:
                ins.append(self.weight("i8", (n, k // g), bound, "small"))
            return self.emit(op, ins, group=g)
        if op in ("quantize", "fake_quantize"):
            x = self.pick(lambda v: v.type.dtype == dt.f32 and self.is_exact(v))
            x = x if x is not None else self.fresh("f32", self.shape())
            if op == "fake_quantize":
                scale, zp, axis = self.qparams(x, "f32")
                return self.emit(op, [x, scale, zp], axis=axis)
            scale, zp, axis = self.qparams(x)
            to = self.choice([d for d in ("i8", "u8", "i32") if d in self.p.dtypes] or ["i32"])
            return self.emit(op, [x, scale, zp], axis=axis, dtype=dt.get(to))
        if op == "dequantize":
            q = self.pick(lambda v: v.type.dtype.name in ("i8", "u8", "i32"))
            q = q if q is not None else self.fresh("i8" if "i8" in self.p.dtypes else "i32",
                                                   self.shape())
            scale, zp, axis = self.qparams(q)
            return self.emit(op, [q, scale, zp], axis=axis)
        if op == "requantize":
            acc = self.pick(lambda v: v.type.dtype == dt.i32) or self.fresh("i32", self.shape())
            to = self.choice([d for d in ("i8", "u8", "i16") if d in self.p.dtypes] or ["i8"])
            mult = (int(self.rng.integers(2**30, 2**31)),)
            shift = (int(self.rng.integers(-8, 3)),)
            lo, hi = (0, 255) if to == "u8" else (-128, 127)
            return self.emit(op, [acc], multiplier=mult, shift=shift,
                             zero_point=int(self.rng.integers(lo, hi + 1)), dtype=dt.get(to))
        d = self.choice([d for d in ("i8", "u8") if d in self.p.dtypes] or ["i8"])
        x = self.pick(lambda v: v.type.dtype.name == d and v.type.rank > 0)
        x = x if x is not None else self.fresh(d, self.shape(int(self.choice([1, 2, 3]))) or (3,))
        bound = self.bound()
        o = self.outputs_of(bound)
        ins = [x, self.weight(d, (o, x.type.shape[-1]), bound)]
        if self.rng.random() < 0.5:
            ins.append(self.weight("i32", (o,), bound))
        lo, hi = (0, 255) if d == "u8" else (-128, 127)
        return self.emit(op, ins, a_zero_point=int(self.rng.integers(max(lo, -3), min(hi, 3) + 1)),
                         b_zero_point=int(self.rng.integers(max(lo, -3), min(hi, 3) + 1)))

    def int_conv2d(self) -> Value | None:
        """An i8/u8 NCHW input (reused when one is in the pool) and OIHW weight, the geometry
        conv2d's fuzzing draws (groups, stride, padding, dilation), zero points, i32 bias."""
        d = self.choice([d for d in ("i8", "u8") if d in self.p.dtypes] or ["i8"])
        x = self.pick(lambda v: v.type.dtype.name == d and v.type.rank == 4
                      and min(v.type.shape) > 0)
        x = x if x is not None else self.fresh(d, (self.choice([1, 2]), self.choice([1, 2, 3]),
                                                   self.choice([3, 4, 5]), self.choice([3, 4])))
        n, c, hh, ww = x.type.shape
        g = self.choice([g for g in (1, 2, 3) if c % g == 0])
        o = g * self.choice([1, 2])
        kh, kw = self.choice([1, 2, 3]), self.choice([1, 2, 3])
        st, pd = (self.choice([1, 2]), self.choice([1, 2])), (self.choice([0, 1]),
                                                              self.choice([0, 1]))
        dil = (self.choice([1, 2]), 1)
        if (hh + 2 * pd[0] - dil[0] * (kh - 1) - 1) < 0 or (ww + 2 * pd[1] - kw) < 0:
            return None
        bound = self.bound()
        ins = [x, self.weight(d, (o, c // g, kh, kw), bound)]
        if self.rng.random() < 0.5:
            ins.append(self.weight("i32", (o,), bound))
        lo, hi = (0, 255) if d == "u8" else (-128, 127)
        return self.emit("int_conv2d", ins, stride=st, padding=pd, dilation=dil, groups=g,
                         a_zero_point=int(self.rng.integers(max(lo, -3), min(hi, 3) + 1)),
                         b_zero_point=int(self.rng.integers(max(lo, -3), min(hi, 3) + 1)))

    # ---- the graph ------------------------------------------------------------------------
    ACTIONS = (("unary", 3.0), ("binary", 4.0), ("compare", 1.0), ("select", 1.0),
               ("cast", 1.0), ("reduce", 2.0), ("argmax", 0.5), ("movement", 3.0),
               ("gather", 0.7), ("scatter_add", 0.5), ("dot", 1.0), ("source", 0.5),
               ("hir", 2.0), ("quant", 0.6))

    def run(self) -> tuple[Graph, list[np.ndarray]]:
        start = self.p.floats * 3 + self.p.dtypes if self.p.floats else self.p.dtypes
        # a dtype with no claimed arithmetic (f32 on the int8 firmware: argmax, broadcast and
        # constants only) would leave only the fallback op below, which the target refuses
        useful = [x for x in start if any(self.p.claims(op, x) for op in UNARY + BINARY)]
        d = self.choice(useful or start)
        shape = self.shape()
        self.fresh(d, shape)
        if self.rng.random() < 0.5:
            self.fresh(d, shape)
        names = [a for a, _ in self.ACTIONS]
        w = np.array([wt * (PARAM_ACTIONS.get(a, 1.0) if self.binds else 1.0)
                      for a, wt in self.ACTIONS])
        steps = int(self.rng.integers(1, self.max_ops + 1))
        for _ in range(steps * 3):
            if len(self.pool) >= steps:
                break
            action = names[int(self.rng.choice(len(names), p=w / w.sum()))]
            try:
                getattr(self, action)()
            except RlxError:
                continue  # a combination the op's rule rejects: try another
        if not self.pool:  # nothing drawn: one op on the first input, one the target claims
            x = self.inputs[0]
            op = "neg" if x.type.dtype != dt.bool_ else "logical_not"
            if not self.p.claims(op, x.type.dtype.name):
                op = next((o for o in ("neg", "abs", "logical_not", "reshape", "broadcast_in_dim")
                           if self.p.claims(o, x.type.dtype.name)), op)
            if op == "reshape":
                self.emit(op, [x], shape=x.type.shape)
            elif op == "broadcast_in_dim":
                self.emit(op, [x], shape=x.type.shape, dims=tuple(range(x.type.rank)))
            else:
                self.emit(op, [x])
        outs = [self.pool[-1]]
        for v in self.pool[:-1]:
            if self.rng.random() < 0.25 and len(outs) < 3:
                outs.append(v)
        g = Graph("fuzz", Level.HIR, tuple(self.inputs), tuple(self.params), tuple(self.b.nodes),
                  tuple(dict.fromkeys(o.name for o in outs)), param_data=dict(self.param_data))
        return g, self.arrays


def generate(profile: Profile, seed: tuple[int, ...], max_ops: int = 6) -> Case:
    """The random case for ``seed`` (deterministic: the same seed gives the same case)."""
    rng = np.random.default_rng(list(seed))
    g, arrays = _Gen(profile, rng, max_ops).run()
    return Case(g, arrays, tuple(seed))


def hir_instance(profile: Profile, op: str, dtype: str | None, seed: int) -> Graph | None:
    """One HIR node ``op`` (at float ``dtype``; quantization ops draw their own), as the
    generator draws it, in a graph of its own: what a probe of its lowering legalizes."""
    gen = _Gen(profile, np.random.default_rng([seed]), 1)
    gen.binds = False  # the op itself on inputs (a bound conv2d_pair is drawn as two convs)
    try:
        out = gen.hir_op(op, dtype) if op in FLOAT_HIR else gen.quant_op(op)
    except RlxError:
        return None
    if out is None:
        return None
    return Graph("probe", Level.HIR, tuple(gen.inputs), tuple(gen.params), tuple(gen.b.nodes),
                 (out.name,), param_data=dict(gen.param_data))


def graph_size(g: Graph) -> int:
    return sum(math.prod(n.type.shape) for n in g.nodes)

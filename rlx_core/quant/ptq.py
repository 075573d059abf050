"""Post-training quantization: a traced f32 graph in, an HIR graph with integer ops out.

Every ``linear`` whose weight is known at trace time (a parameter or a constant) is replaced:

dynamic (``quantize_dynamic``; no calibration): the activation's scale is computed per call,
``s_x = max|x| / 127``; ``quantize(x, s_x) -> int_linear(x_q, w_q) -> dequantize(acc,
s_x * s_w)`` + the f32 bias. Weights are i8, symmetric, per output channel by default.

static (``quantize_static``; observers over a calibration iterator): every activation has a
fixed scale and zero point, so the integer chain never leaves int8 between two linears::

    quantize(x, s_x, zp_x) -> int_linear(x_q, w_q, bias_i32, a_zero_point=zp_x)
        -> requantize(acc, M = s_x s_w / s_y as (multiplier, shift), zp_y)   [-> max(q, zp_y)]
        -> int_linear of the next layer ...

A ``relu`` right after a linear is folded into the requantized output (observed after the
relu; ``max(q, zp_y)`` on the integers). The bias is quantized to i32 with scale
``s_x * s_w``. A linear whose output leaves the integer chain (the graph's outputs, or an op
other than a linear) is dequantized with the exact i32 accumulator scale ``s_x * s_w``.

The result is an ordinary HIR graph: ``print(q.graph)`` shows each quantize / int_linear /
requantize, ``rlx.compile(q.graph, ...)`` lowers it (``exe.trace`` holds MIR, LIR, kernels),
and ``q.layers`` lists every layer's parameters.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder, NameGen
from rlx_core.ir.graph import Graph, Node, Value, ValueKind
from rlx_core.quant.errors import CalibrationError, QuantConfigError
from rlx_core.quant.observers import Observer, make_observer
from rlx_core.quant.params import QParams, qparams_from_range, qrange_of, quantize_multiplier


@dataclass
class LayerReport:
    """What PTQ did to one linear: its weight and activation parameters."""

    node: str
    weight: str
    mode: str  # "dynamic" or "static"
    weight_scale: Any
    input: QParams | None = None
    output: QParams | None = None
    fused_relu: bool = False
    requantized: bool = False


@dataclass
class QuantizedGraph:
    """A quantized HIR graph and a report of every layer it changed."""

    graph: Graph
    layers: list[LayerReport] = field(default_factory=list)

    def __str__(self) -> str:
        return str(self.graph)


# ---- reading the f32 graph ------------------------------------------------------------------


def host_value(g: Graph, name: str) -> Any:
    """The host array behind a parameter or a constant node, or None for a computed value."""
    import numpy as np

    vals = g.values()
    v = vals[name]
    if v.kind is ValueKind.PARAM:
        return np.asarray(g.param_data[name], dtype=dt.to_numpy_name(v.type.dtype))
    node = g.producers().get(name)
    if node is not None and node.op == "constant":
        val = node.attr("value")
        arr = np.array(val) if isinstance(val, tuple) else np.full(v.type.shape, val)
        return arr.reshape(v.type.shape).astype(dt.to_numpy_name(v.type.dtype))
    return None


def _is_zero(g: Graph, name: str) -> bool:
    """Is ``name`` a splat of 0 (through broadcasts)? -- relu's second operand."""
    prod = g.producers()
    node = prod.get(name)
    while node is not None and node.op == "broadcast_in_dim":
        node = prod.get(node.inputs[0])
    return node is not None and node.op == "constant" and not isinstance(
        node.attr("value"), tuple) and float(node.attr("value")) == 0.0


def quantizable(g: Graph) -> list[Node]:
    """The linears PTQ replaces: f32, with a weight known at trace time."""
    return [n for n in g.nodes if n.op == "linear" and n.type.dtype == dt.f32
            and host_value(g, n.inputs[1]) is not None
            and (len(n.inputs) < 3 or host_value(g, n.inputs[2]) is not None)]


def quantizable_layers(g: Graph) -> list[Node]:
    """What static PTQ replaces: the quantizable linears and the f32 ``conv2d`` nodes whose
    weight (and bias) are known at trace time (-> ``int_conv2d``), in graph order."""
    lins = {n.name for n in quantizable(g)}
    return [n for n in g.nodes if n.name in lins or (
        n.op == "conv2d" and n.type.dtype == dt.f32 and host_value(g, n.inputs[1]) is not None
        and (len(n.inputs) < 3 or host_value(g, n.inputs[2]) is not None))]


def _stays_int(g: Graph, name: str, layers: set[str], users: dict[str, list[Node]]) -> bool:
    """Does every reader of ``name`` take it as an integer: a quantized layer's input, or a
    ``reshape`` (a flatten between a conv and a linear) or ``max_pool2d`` (a max commutes
    with the monotone quantization: same scale and zero point) whose readers all do?"""
    readers = users.get(name)
    if not readers or name in g.outputs:
        return False
    return all((u.name in layers and u.inputs[0] == name) or (
        u.op in _INT_PASSTHROUGH and _stays_int(g, u.name, layers, users)) for u in readers)


# ops that carry a quantized value unchanged in scale and zero point, run on the integers
_INT_PASSTHROUGH = ("reshape", "max_pool2d")


def fused_relu(g: Graph, lin: Node) -> Node | None:
    """The relu (``max(y, 0)``) that is the only consumer of a linear's output, if any."""
    users = g.users().get(lin.name, [])
    if len(users) != 1 or lin.name in g.outputs:
        return None
    u = users[0]
    if u.op == "max" and len(u.inputs) == 2:
        other = u.inputs[1] if u.inputs[0] == lin.name else u.inputs[0]
        if _is_zero(g, other):
            return u
    return None


def weight_qparams(w: Any, per_channel: bool, dtype: str = "i8", bits: int = 8) -> QParams:
    """Symmetric weight parameters (narrow range: i8 in [-127, 127]), per output channel.
    ``bits`` < 8: i8 codes in the narrower ``[-(2^(bits-1) - 1), 2^(bits-1) - 1]``."""
    import numpy as np

    if per_channel:  # one scale per output channel: a linear's row, a conv's filter
        amax = np.abs(w).reshape(w.shape[0], -1).max(axis=1)
        p = qparams_from_range(-amax, amax, dtype, "symmetric", axis=0, narrow=True)
    else:
        amax = float(np.abs(w).max())
        p = qparams_from_range(-amax, amax, dtype, "symmetric", None, narrow=True)
    if bits == 8:
        return p
    qmax = float(2 ** (bits - 1) - 1)
    scale = (np.asarray(amax, np.float64) / qmax).astype(np.float32)
    return QParams(np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32),
                   p.zero_point, p.dtype, p.axis)


def quantize_array(x: Any, p: QParams, axis: int = 0) -> Any:
    """The reference quantize of a host array (weights), in the same f32 arithmetic."""
    import numpy as np

    from rlx_core.targets.numpy_ref.quant_semantics import quantize

    q = quantize(np.asarray(x, np.float32), p.scale, p.zero_point,
                 axis if p.axis is not None else -1, p.dtype)
    return q.astype(dt.to_numpy_name(dt.get(p.dtype)))


# ---- building the quantized graph -----------------------------------------------------------


class _Rewriter:
    """Copies ``g`` node by node into a new builder, replacing the chosen linears."""

    def __init__(self, g: Graph):
        self.g = g
        self.b = Builder(NameGen(g.values()))
        self.map: dict[str, Value] = {v.name: v for v in (*g.inputs, *g.params)}
        self.params: list[Value] = list(g.params)
        self.data: dict[str, Any] = dict(g.param_data)

    def v(self, name: str) -> Value:
        return self.map[name]

    def copy(self, n: Node) -> None:
        self.b.loc = n.loc
        self.map[n.name] = self.b.emit(n.op, [self.v(i) for i in n.inputs], n.a)

    def replacing(self, names: Container[str]) -> Iterator[Node]:
        """The graph's nodes in order: every one not in ``names`` is copied; each one in it is
        yielded, the builder at its location, for the caller to emit its replacement (and map
        its name to it)."""
        for n in self.g.nodes:
            if n.name not in names:
                self.copy(n)
                continue
            self.b.loc = n.loc
            yield n

    def param(self, name: str, data: Any) -> Value:
        v = Value(self.b.names.claim(name), _type_of(data), ValueKind.PARAM)
        self.params.append(v)
        self.data[v.name] = data
        return v

    def const(self, arr: Any, dtype: dt.DType) -> Value:
        import numpy as np

        a = np.asarray(arr)
        value = tuple(a.reshape(-1).tolist()) if a.ndim else a.item()
        return self.b.emit("constant", [], {"value": value, "shape": a.shape, "dtype": dtype})

    def splat(self, value: float | int, dtype: dt.DType, shape: tuple[int, ...]) -> Value:
        return self.b.emit("constant", [], {"value": value, "shape": shape, "dtype": dtype})

    def finish(self) -> Graph:
        used = {i for n in self.b.nodes for i in n.inputs} | set(self.g.outputs)
        params = tuple(p for p in self.params if p.name in used)
        return Graph(self.g.name + "_int8", self.g.level, self.g.inputs, params,
                     tuple(self.b.nodes), tuple(self.map[o].name for o in self.g.outputs),
                     param_data={p.name: self.data[p.name] for p in params})


def _type_of(data: Any) -> Any:
    from rlx_core.ir.graph import TensorType

    return TensorType(dt.get(data.dtype.name), tuple(data.shape))


GRANULARITIES = ("tensor", "token")


def quantize_dynamic(fn: Callable[..., Any] | Graph, *example_args: Any,
                     per_channel: bool = True, granularity: str = "tensor",
                     keep_f32: Iterable[str] = (), weight_bits: Bits | None = None,
                     activation_bits: Bits | None = None, target: str = "cpu",
                     ) -> QuantizedGraph:
    """Dynamic int8 PTQ: weights quantized now, activations per call (no calibration).

    ``granularity``: ``"tensor"``, one activation scale per call (``max|x| / 127`` over the
    whole input, as ONNX Runtime's ``DynamicQuantizeLinear``), or ``"token"``, one per row of
    the input (per token of a transformer; ``max|x_i| / 127``), so that a row of small values
    keeps its precision beside a row with an outlier. ``keep_f32``: substrings of weight names
    whose linears stay f32 (sensitive layers). ``weight_bits`` / ``activation_bits`` (8 or 7):
    7 keeps the codes in [-63, 63] (scale ``max / 63``), which lets the cpu's AVX2 tile add
    two groups of products in 16 bits exactly (docs/quantization.md); the default
    (``None``) is ``fast_bits(granularity, target)``: 7 for per-token graphs on a CPU with
    AVX2 but no VNNI, else 8. Weights may also be 6 bits (the faster w66 / w77 tiles). Either
    may be a mapping ``{weight-name substring: bits, "*": default}`` (first match wins), a
    width per layer (``layer_bits``)."""
    import numpy as np

    from rlx_core.frontend.tracer import trace

    if granularity not in GRANULARITIES:
        raise QuantConfigError(f"unknown activation granularity {granularity!r}",
                               hint=f"use one of {', '.join(GRANULARITIES)}")
    auto = fast_bits(granularity, target)
    weight_bits = auto if weight_bits is None else weight_bits
    activation_bits = auto if activation_bits is None else activation_bits
    g = fn if isinstance(fn, Graph) else trace(fn, *example_args)
    keep = tuple(keep_f32)
    lins = {n.name: n for n in quantizable(g) if not any(k in n.inputs[1] for k in keep)}
    rw = _Rewriter(g)
    reports: list[LayerReport] = []
    tiny = np.float32(1e-30)
    for n in rw.replacing(lins):
        b = rw.b
        x = rw.v(n.inputs[0])
        w = host_value(g, n.inputs[1])
        wb, ab = (layer_bits(weight_bits, n.inputs[1]), layer_bits(activation_bits, n.inputs[1]))
        check_bits(wb, ab)
        q127 = np.float32(2 ** (ab - 1) - 1)
        wp = weight_qparams(w, per_channel, bits=wb)
        wq = rw.param(f"{n.inputs[1]}.q", quantize_array(w, wp))
        out_n, k = w.shape
        # the weight scales (and the bias below) as parameters, not constants: a broadcast
        # parameter is read in place by the fused epilogue loop, where a broadcast tuple
        # constant is filled into an (rows, out) buffer on every call
        sw = rw.param(f"{n.inputs[1]}.scale",
                      np.broadcast_to(wp.scale, (out_n,)).astype(np.float32).copy())
        zeros_n = rw.splat(0, dt.i32, (out_n,))
        if granularity == "token":
            # x as (rows, k): one scale per row, s_i = max(max_k |x_ik|, tiny) / 127
            rows = x.type.size // max(k, 1)
            x2 = x if x.type.rank == 2 else b.emit("reshape", [x], {"shape": (rows, k)})
            amax = b.emit("reduce_max", [b.emit("abs", [x2])], {"axes": (1,)})
            sx = b.emit("div", [b.emit("max", [amax, rw.splat(float(tiny), dt.f32, (rows,))]),
                                rw.splat(float(q127), dt.f32, (rows,))])
            xq = b.emit("quantize", [x2, sx, rw.splat(0, dt.i32, (rows,))],
                        {"dtype": dt.i8, "axis": 0})
            acc = b.emit("int_linear", [xq, wq])
            # acc * s_w[j] (per column), then * s_i (per row), at x's own rank: the epilogue
            # then fuses with what follows (bias, GELU, a residual add)
            lead = x.type.shape[:-1]
            if x.type.rank != 2:
                acc = b.emit("reshape", [acc], {"shape": lead + (out_n,)})
                sx = b.emit("reshape", [sx], {"shape": lead})
            y = b.emit("dequantize", [acc, sw, zeros_n], {"axis": -1})
            y = b.emit("mul", [y, b.emit("broadcast_in_dim", [sx], {
                "shape": lead + (out_n,), "dims": tuple(range(len(lead)))})])
        else:
            # s_x = max(max|x|, tiny) / 127 as a scalar tensor
            amax = b.emit("reduce_max", [b.emit("abs", [x])],
                          {"axes": tuple(range(x.type.rank))})
            sx = b.emit("div", [b.emit("max", [amax, rw.const(tiny, dt.f32)]),
                                rw.const(q127, dt.f32)])
            xq = b.emit("quantize", [x, sx, rw.const(np.int32(0), dt.i32)], {"dtype": dt.i8})
            acc = b.emit("int_linear", [xq, wq])
            sxv = b.emit("broadcast_in_dim", [sx], {"shape": (out_n,), "dims": ()})
            y = b.emit("dequantize", [acc, b.emit("mul", [sxv, sw]), zeros_n])
        if len(n.inputs) == 3:  # the f32 bias as the graph holds it (a parameter, usually)
            y = b.emit("add", [y, b.emit("broadcast_in_dim", [rw.v(n.inputs[2])], {
                "shape": y.type.shape, "dims": (y.type.rank - 1,)})])
        rw.map[n.name] = y
        reports.append(LayerReport(n.name, n.inputs[1], f"dynamic-{granularity}", wp.scale))
    return QuantizedGraph(rw.finish(), reports)


Bits = int | Mapping[str, int]


def layer_bits(bits: Bits, weight: str) -> int:
    """The code width ``bits`` gives the layer of weight ``weight``: an int for every layer,
    or the first ``{substring: bits}`` entry whose key is in the weight's name (``"*"``: the
    default, else 8)."""
    if isinstance(bits, int):
        return bits
    for key, v in bits.items():
        if key != "*" and key in weight:
            return int(v)
    return int(bits.get("*", 8))


def check_bits(weight_bits: int, activation_bits: int) -> None:
    """Code widths PTQ writes: weights 8, 7 or 6 bits, activations 8 or 7 (a typed error
    otherwise)."""
    if weight_bits not in (6, 7, 8):
        raise QuantConfigError(f"weight_bits={weight_bits!r}: int8 PTQ weights are 8, 7 or 6 "
                               "bits", hint="pass 8 (exact int8), 7 or 6 (the faster AVX2 "
                               "tiles, docs/quantization.md)")
    if activation_bits not in (7, 8):
        raise QuantConfigError(f"activation_bits={activation_bits!r}: int8 PTQ activations "
                               "are 8 or 7 bits",
                               hint="pass 8 (exact int8) or 7 (the fast AVX2 tile)")


def fast_bits(granularity: str, target: str = "cpu") -> int:
    """The code width per-token dynamic int8 uses by default: 7 on a CPU with AVX2 but no VNNI
    (where 7-bit weights and activations run the cpu's w77 tile, ~1.6x the 8-bit one), else 8.
    ``RLX_INT8_BITS=8`` (or 7) overrides it."""
    env = os.environ.get("RLX_INT8_BITS", "")
    if env in ("7", "8"):
        return int(env)
    if granularity != "token" or target != "cpu":
        return 8
    from rlx_core.targets.cpu.igemm import isa_here

    return 7 if isa_here() == "avx2" else 8


def quantize_int4_weights(fn: Callable[..., Any] | Graph, *example_args: Any, group: int = 32,
                          zero_point: bool = False, search: bool = True) -> QuantizedGraph:
    """Weight-only int4: every quantizable linear's weight packed two codes a byte with one
    scale (and zero, ``zero_point=True``) per ``group`` inputs; activations stay f32, the
    matmul dequantizes inside (``int4_linear``), the f32 bias is added after. ``search``: each
    group's range with the least round-trip error (rlx.quant.int4), not its min-max one."""
    import numpy as np

    from rlx_core.frontend.tracer import trace
    from rlx_core.quant.int4 import quantize_int4

    g = fn if isinstance(fn, Graph) else trace(fn, *example_args)
    lins = {n.name: n for n in quantizable(g)}
    rw = _Rewriter(g)
    reports: list[LayerReport] = []
    for n in rw.replacing(lins):
        b = rw.b
        q = quantize_int4(host_value(g, n.inputs[1]), group, zero_point, search)
        args = [rw.v(n.inputs[0]), rw.param(f"{n.inputs[1]}.q4", q.packed),
                rw.param(f"{n.inputs[1]}.q4_scale", q.scale.astype(np.float32))]
        if zero_point:
            args.append(rw.param(f"{n.inputs[1]}.q4_zero", q.zero.astype(np.int8)))
        y = b.emit("int4_linear", args, {"group": group})
        if len(n.inputs) == 3:
            bias = rw.const(host_value(g, n.inputs[2]).astype(np.float32), dt.f32)
            y = b.emit("add", [y, b.emit("broadcast_in_dim", [bias], {
                "shape": y.type.shape, "dims": (y.type.rank - 1,)})])
        rw.map[n.name] = y
        reports.append(LayerReport(n.name, n.inputs[1], f"int4-g{group}", q.scale))
    return QuantizedGraph(rw.finish(), reports)


# ---- static: calibration, then the integer chain ---------------------------------------------


def _batches(data: Iterable[Any]) -> Iterable[tuple[Any, ...]]:
    for item in data:
        yield item if isinstance(item, tuple) else (item,)


def calibrate(g: Graph, values: list[str], observers: dict[str, Observer],
              data: Iterable[Any], target: str = "cpu") -> int:
    """Run ``g`` over ``data`` (batches of its inputs) and feed every value in ``values`` to
    its observer; returns the number of batches seen (CalibrationError when none)."""
    import rlx_core.api as api

    probe = g.with_nodes(g.nodes, outputs=tuple(values))
    exes: dict[Any, Any] = {}
    seen = 0
    for args in _batches(data):
        key = tuple(getattr(a, "shape", ()) for a in args)
        if key not in exes:
            exes[key] = api.compile(_with_shapes(probe, args), target=target, record=False)
        outs = exes[key](*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        for name, arr in zip(values, outs, strict=True):
            observers[name].observe(arr)
        seen += 1
    if not seen:
        raise CalibrationError("the calibration iterator yielded no batches",
                               hint="pass an iterable of input batches (e.g. a list of arrays)")
    return seen


def _with_shapes(g: Graph, args: tuple[Any, ...]) -> Graph:
    """``g`` as traced at other batch shapes: only the inputs' leading size may change."""
    if tuple(tuple(v.type.shape) for v in g.inputs) == tuple(tuple(a.shape) for a in args):
        return g
    raise QuantConfigError(
        "calibration batches must have the shapes the model was traced with "
        f"({[list(v.type.shape) for v in g.inputs]}, got {[list(a.shape) for a in args]})",
        hint="trace with one calibration batch, and drop or pad a short last batch")


def quantize_static(fn: Callable[..., Any] | Graph, *example_args: Any, data: Iterable[Any],
                    method: str = "minmax", per_channel: bool = True,
                    activation_dtype: str = "u8", activation_scheme: str = "asymmetric",
                    target: str = "cpu", observer_options: dict[str, Any] | None = None,
                    weight_bits: Bits = 8, activation_bits: Bits = 8) -> QuantizedGraph:
    """Static int8 PTQ: observe every quantized linear's input and output over ``data``
    (an iterable of input batches shaped like ``example_args``), then rewrite to integers.

    ``weight_bits`` / ``activation_bits`` (8 or 7): 7 keeps the codes in 7 bits (weights in
    [-63, 63]; u8 activations in [0, 127], i8 in [-64, 63]; the observers choose their ranges
    for 128 levels), which the cpu's AVX2 tiles add in 16 bits (docs/quantization.md); weights
    may also be 6 bits (the w77 pairing for 8-bit activations, w66 for 7-bit). Either may be
    a mapping ``{weight-name substring: bits, "*": default}`` (``layer_bits``): an activation
    read by several layers (q, k and v's input) keeps the widest width they ask for."""
    from rlx_core.frontend.tracer import trace

    g = fn if isinstance(fn, Graph) else trace(fn, *example_args)
    lins = quantizable_layers(g)
    width: dict[str, int] = {}  # watched value -> its activation code width
    for n in lins:
        wb, ab = (layer_bits(weight_bits, n.inputs[1]), layer_bits(activation_bits, n.inputs[1]))
        check_bits(wb, ab)
        for v in (n.inputs[0], post_value(g, n)):
            width[v] = max(width.get(v, 0), ab)
    if not lins:
        check_bits(layer_bits(weight_bits, ""), layer_bits(activation_bits, ""))
    watched = list(width)
    opts = observer_options or {}
    obs = {v: make_observer(method, dtype=activation_dtype, scheme=activation_scheme,
                            bits=None if width[v] == 8 else width[v], **opts)
           for v in watched}
    calibrate(g, watched, obs, data, target)
    return convert_static(g, {v: o.qparams() for v, o in obs.items()}, per_channel=per_channel,
                          weight_bits=weight_bits)


def post_value(g: Graph, lin: Node) -> str:
    """The value a linear's output is quantized at: after its fused relu, if it has one."""
    r = fused_relu(g, lin)
    return r.name if r is not None else lin.name


def convert_static(g: Graph, act: dict[str, QParams], weights: dict[str, QParams] | None = None,
                   per_channel: bool = True, weight_bits: Bits = 8) -> QuantizedGraph:
    """Rewrite ``g``'s linears and convolutions to the integer chain with fixed activation
    parameters ``act`` (by value name: every layer's input, and its post value where its
    output stays an integer) and, optionally, fixed weight parameters (by weight value name;
    else symmetric min-max per channel). QAT converts with its learned scales through here.
    A ``conv2d`` becomes ``int_conv2d`` (per-channel weights and requantize along axis 1); a
    ``reshape`` (a flatten) or ``max_pool2d`` between two quantized layers runs on the integers. An
    activation whose QParams has narrower ``bits`` is clamped to them after its quantize (or
    requantize): ``min`` / ``max`` on the integers; ``weight_bits`` narrows the weights."""
    import numpy as np

    lins = quantizable_layers(g)
    relu = {n.name: fused_relu(g, n) for n in lins}
    post = {n.name: post_value(g, n) for n in lins}
    users = g.users()
    names = {n.name for n in lins}
    # a layer's output stays an integer when every consumer of it is a quantized layer
    # (through reshapes)
    chained = {n.name for n in lins if post[n.name] in act
               and _stays_int(g, post[n.name], names, users)}
    rw = _Rewriter(g)
    ints: dict[str, tuple[Value, QParams]] = {}  # f32 value -> its int8 twin and params
    reports: list[LayerReport] = []
    skip = {relu[n].name for n in relu if relu[n] is not None and n in chained}
    by_name = {n.name: n for n in lins}
    for n in g.nodes:
        if n.name in skip:
            continue
        if n.op in _INT_PASSTHROUGH and n.inputs[0] in ints:  # a flatten or max pool of
            xq, xp = ints[n.inputs[0]]  # integers: every reader is a quantized layer
            ints[n.name] = (rw.b.emit(n.op, [xq], n.a), xp)  # (_stays_int), so no f32 copy
            continue
        if n.name not in by_name:
            rw.copy(n)
            continue
        b = rw.b
        b.loc = n.loc
        conv = n.op == "conv2d"
        axis = 1 if conv else -1  # the output channel of the accumulator
        xname = n.inputs[0]
        if xname in ints:
            xq, xp = ints[xname]
        else:
            xp = act[xname]
            xq = _narrow(rw, b.emit("quantize", [rw.v(xname), rw.const(xp.scale, dt.f32),
                                                 rw.const(xp.zero_point, dt.i32)],
                                    {"dtype": dt.get(xp.dtype)}), xp)
        w = host_value(g, n.inputs[1])
        wp = (weights or {}).get(n.inputs[1]) or weight_qparams(
            w, per_channel, bits=layer_bits(weight_bits, n.inputs[1]))
        wq = rw.param(f"{n.inputs[1]}.q", quantize_array(w, wp))
        sx = float(xp.scale)
        acc_scale = (np.float64(sx) * np.broadcast_to(wp.scale, (w.shape[0],)).astype(
            np.float64))
        args = [xq, wq]
        if len(n.inputs) == 3:
            bias = host_value(g, n.inputs[2]).astype(np.float64)
            bq = np.clip(np.round(bias / acc_scale), -(2**31), 2**31 - 1).astype(np.int32)
            args.append(rw.param(f"{n.inputs[2]}.q", bq))
        if conv:
            acc = b.emit("int_conv2d", args, {**{k: n.attr(k) for k in (
                "stride", "padding", "dilation", "groups")}, "a_zero_point": int(xp.zero_point)})
        else:
            acc = b.emit("int_linear", args, {"a_zero_point": int(xp.zero_point)})
        rep = LayerReport(n.name, n.inputs[1], "static", wp.scale, xp, None,
                          relu[n.name] is not None and n.name in chained, n.name in chained)
        if n.name in chained:
            yp = act[post[n.name]]
            pairs = [quantize_multiplier(float(s) / float(yp.scale)) for s in acc_scale]
            mult, shift = zip(*pairs, strict=True)
            yq = _narrow(rw, b.emit("requantize", [acc], {
                "multiplier": mult, "shift": shift, "zero_point": int(yp.zero_point),
                "dtype": dt.get(yp.dtype), "axis": axis}), yp)
            if relu[n.name] is not None:
                yq = b.emit("max", [yq, rw.splat(int(yp.zero_point), yq.type.dtype,
                                                 yq.type.shape)])
            ints[post[n.name]] = (yq, yp)
            rep.output = yp
            # the f32 view, for any other reader (dead code otherwise)
            rw.map[post[n.name]] = b.emit("dequantize", [yq, rw.const(yp.scale, dt.f32),
                                                         rw.const(yp.zero_point, dt.i32)])
            rw.map[n.name] = rw.map[post[n.name]]
        else:
            out_n = w.shape[0]
            rw.map[n.name] = b.emit("dequantize", [acc, rw.const(
                acc_scale.astype(np.float32), dt.f32), rw.const(np.zeros(out_n, np.int32),
                                                               dt.i32)], {"axis": axis})
        reports.append(rep)
    return QuantizedGraph(rw.finish(), reports)


def _narrow(rw: _Rewriter, q: Value, p: QParams) -> Value:
    """``q`` clamped to ``p``'s codes where they are narrower than its dtype (7-bit codes)."""
    if p.bits is None:
        return q
    qmin, qmax = p.qrange
    lo, hi = qrange_of(p.dtype)
    if qmax < hi:
        q = rw.b.emit("min", [q, rw.splat(qmax, q.type.dtype, q.type.shape)])
    if qmin > lo:
        q = rw.b.emit("max", [q, rw.splat(qmin, q.type.dtype, q.type.shape)])
    return q

"""The legalized int8 LIR (the cortex-m rules, targets/cortex_m/legalize.py) as the chain of
fully connected layers the datapath implements.

The datapath is a chain ``[quantize] -> (int_linear -> requantize [-> relu])* -> int_linear
[-> requantize [-> relu]] [-> argmax | -> dequantize]`` at batch 1: each layer's output feeds
the next, relu is folded into the requantize clamp, the input zero point into the bias.
Anything else (another op, a branch, a weight zero point, batch > 1) is a NoDatapathError
naming the node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlx_core.ir.graph import Graph
from rlx_core.ir.ops.quant import qrange
from rlx_core.targets.cortex_m.emitter import FirmwareSource
from rlx_core.targets.cortex_m.legalize import Step, splat_values
from rlx_core.targets.fpga.errors import NoDatapathError


@dataclass
class Layer:
    """One int8 fully connected layer of the datapath: its sizes, weights, bias (the input zero
    point folded in) and requantize."""

    k: int
    n: int
    x_signed: bool
    weight: Any  # (n, k) int8
    bias: Any  # (n,) int32, the input zero point folded in
    requant: bool
    multiplier: Any = None  # (n,) int32
    shift: Any = None  # (n,) int32
    zero_point: int = 0
    lo: int = 0
    hi: int = 0

    @property
    def weight_bits(self) -> int:
        """4 when every weight fits a signed nibble (4-bit quantized weights), else 8: the
        width of a weight in the layer's ROM and multipliers."""
        import numpy as np

        w = np.asarray(self.weight)
        return 4 if w.size and int(w.min()) >= -8 and int(w.max()) <= 7 else 8


@dataclass
class Datapath:
    """The chain of layers the FPGA datapath computes and what it streams out."""

    layers: list[Layer]
    argmax: bool  # the stream carries the index of the largest output (else every output)
    out_value: str  # the value the datapath streams out (before any host dequantize)


def _fail(step: Step | None, why: str) -> NoDatapathError:
    where = f" at %{step.node.name} ({step.node.op})" if step is not None else ""
    return NoDatapathError(f"the FPGA datapath cannot build this graph{where}: {why}",
                           hint="the datapath is a chain of int8 fully connected layers "
                                "(int_linear -> requantize -> relu) at batch 1, ending in "
                                "logits or argmax; run other graphs on cortex-m or cpu")


def extract(g: Graph, steps: list[Step], src: FirmwareSource) -> Datapath:
    """The layers of ``g`` (its legalized steps) in order, or NoDatapathError."""
    import numpy as np

    host = {p.name: np.asarray(g.param_data[p.name]) for p in g.params}
    for s in steps:
        if s.kind == "const":
            from rlx_core.targets.cortex_m.emitter import _const_value

            for n in s.kernel.nodes:
                host[n.name] = _const_value(n)
    types = g.values()
    layers: list[Layer] = []
    argmax = False
    current = src.inputs[0].value if len(src.inputs) == 1 else None
    if current is None:
        raise _fail(None, f"{len(src.inputs)} inputs (the stream carries one)")
    if types[current].type.dtype.name not in ("u8", "i8"):
        raise _fail(None, f"the input is {types[current].type.dtype.name}, not u8/i8")
    for s in steps:
        n = s.node
        if s.kind in ("const", "in", "out"):
            continue
        if n.op == "reshape" or s.kind == "reshape":
            if n.inputs[0] != current:
                raise _fail(s, "a branch (the reshape reads another value)")
            current = n.name
            continue
        if argmax:
            raise _fail(s, "an op after argmax")
        if s.kind == "fc":
            x, w = n.inputs[0], n.inputs[1]
            if x != current:
                raise _fail(s, "a branch (the layer reads another value than the previous one)")
            if types[x].type.shape[0] != 1 or types[x].type.rank != 2:
                raise _fail(s, f"input {types[x].type} (the datapath runs batch 1, rank 2)")
            if int(n.attr("b_zero_point") or 0) != 0:
                raise _fail(s, "a weight zero point (quantize weights symmetrically)")
            wv = host[w].astype(np.int64)
            nout, k = wv.shape
            za = int(n.attr("a_zero_point") or 0)
            bias = host[n.inputs[2]].astype(np.int64) if len(n.inputs) == 3 else np.zeros(nout)
            folded = ((bias - za * wv.sum(axis=1) + 2**31) % 2**32 - 2**31).astype(np.int32)
            layers.append(Layer(k, nout, types[x].type.dtype.name == "i8", host[w].astype(
                np.int8), folded, False))
        elif s.kind == "requant":
            last = layers[-1] if layers else None
            if last is None or n.inputs[0] != current or last.requant:
                raise _fail(s, "requantize not right after a fully connected layer")
            if int(n.attr("axis")) not in (-1, 1):
                raise _fail(s, "per-channel parameters on an axis other than the features")
            mult = list(n.attr("multiplier"))
            shift = list(n.attr("shift"))
            if any(not -63 <= v <= 31 for v in shift):
                raise _fail(s, "a shift outside [-63, 31]")
            last.requant = True
            last.multiplier = np.asarray(mult * (last.n if len(mult) == 1 else 1), np.int64)
            last.shift = np.asarray(shift * (last.n if len(shift) == 1 else 1), np.int64)
            last.zero_point = int(n.attr("zero_point"))
            last.lo, last.hi = qrange(n.attr("dtype"))
            if n.attr("dtype").name not in ("u8", "i8"):
                raise _fail(s, "requantize to a dtype other than u8 / i8")
        elif s.kind == "ewise":
            body = [m for m in s.kernel.nodes if m.name not in splat_values(s.kernel)]
            splats = splat_values(s.kernel)
            last = layers[-1] if layers else None
            ok = (len(body) == 1 and body[0].op == "max" and last is not None and last.requant
                  and current in body[0].inputs and any(i in splats for i in body[0].inputs))
            if not ok:
                raise _fail(s, "an elementwise op other than relu after requantize")
            c = next(i for i in body[0].inputs if i in splats)
            last.lo = max(last.lo, int(splats[c].attr("value")))  # relu folded into the clamp
        elif s.kind == "argmax":
            if n.inputs[0] != current or int(n.attr("axis")) != types[current].type.rank - 1:
                raise _fail(s, "argmax of another value or axis")
            argmax = True
        else:
            raise _fail(s, f"no datapath unit for {n.op}")
        current = n.name
    if not layers:
        raise _fail(None, "no fully connected layer")
    if src.outputs[0].value != current or len(src.outputs) != 1:
        raise _fail(None, "the graph returns something other than the chain's end")
    for a, b in zip(layers, layers[1:], strict=False):
        if not a.requant or a.n != b.k:
            raise _fail(None, "a hidden layer that is not requantized to 8 bits")
    return Datapath(layers, argmax, current)

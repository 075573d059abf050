"""Legalized int8 LIR -> the firmware's model.c / model.h (C99, calls into csrc/rlx_nn.h).

Weights and every compile-time constant become ``const`` arrays (flash). Every activation
lives in one static ``rlx_arena``, at the offset the LIR memory planner (passes/plan_arena.py)
gives it for the kernels the firmware runs: the host-quantized inputs are written first, so
they are planned as written before the first kernel; values the firmware hands back (graph
outputs, the integer tensor under an output ``dequantize``) get buffers of their own.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import ArenaPlan, Graph, Node
from rlx_core.ir.ops.quant import qrange
from rlx_core.passes.base import PassContext
from rlx_core.passes.plan_arena import PlanArena
from rlx_core.targets.cortex_m.conv_step import SCRATCH_IN, SCRATCH_OUT, conv_code
from rlx_core.targets.cortex_m.legalize import Step, splat_values
from rlx_core.targets.cortex_m.pool_step import pool_code

CTYPE = {"u8": "uint8_t", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t",
         "i64": "int64_t", "f32": "float", "bool": "uint8_t"}
SUFFIX = {"u8": "u8", "i8": "s8", "i16": "s16", "i32": "s32", "i64": "s64", "f32": "f32"}
ALIGNMENT = 8  # the arena's slot alignment on a 32-bit MCU (LDRD / 64-bit outputs)


@dataclass
class IoSpec:
    """One firmware input or output: the value it carries and how the host converts it."""

    value: str
    dtype: str
    shape: tuple[int, ...]
    graph_index: int
    boundary: Node | None = None  # the host-side quantize / dequantize, if any

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * dt.get(self.dtype).bits // 8


@dataclass
class FirmwareSource:
    """The C the emitter writes for one model (model.c, model.h), with its inputs and outputs,
    arena plan and sizes."""

    model_c: str
    model_h: str
    inputs: list[IoSpec]
    outputs: list[IoSpec]
    plan: ArenaPlan
    const_bytes: int
    io_bytes: int
    consts: dict[str, Any] = field(default_factory=dict)  # host arrays of boundary params
    kernels: list[str] = field(default_factory=list)  # one line per step, for the explorer
    scratch_bytes: int = 0  # the conv steps' static layout buffers (conv_step.py)


def _ident(name: str) -> str:
    return "v_" + re.sub(r"[^0-9A-Za-z_]", "_", name)


def _const_value(node: Node) -> Any:
    import numpy as np

    val = node.attr("value")
    shape = node.type.shape
    npt = dt.to_numpy_name(node.type.dtype)
    arr = np.array(val) if isinstance(val, tuple) else np.full(shape, val)
    return arr.reshape(shape).astype(npt)


def _c_array(name: str, ctype: str, arr: Any) -> str:
    flat = arr.ravel().tolist()
    if ctype == "float":
        import numpy as np

        items = [f"{float(np.float32(v)).hex()}f" if v == v else "0.0f" for v in flat] or ["0"]
    else:
        items = [str(int(v)) for v in flat] or ["0"]
    rows = [", ".join(items[i:i + 24]) for i in range(0, len(items), 24)]
    body = ",\n  ".join(rows)
    return f"static const {ctype} {name}[{max(len(flat), 1)}] __attribute__((aligned(8))) = {{\n  {body}\n}};\n"


def _split(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    """(outer, extent, inner) of ``shape`` around ``axis``."""
    axis %= max(len(shape), 1)
    outer = inner = 1
    for d in shape[:axis]:
        outer *= d
    for d in shape[axis + 1:]:
        inner *= d
    return outer, shape[axis] if shape else 1, inner


def _broadcast_index(n: Node, types: dict[str, Any]) -> str:
    """The flat index into a broadcast's operand for flat output index ``i``."""
    out = n.type.shape
    src = types[n.inputs[0]].type.shape
    terms = []
    for j, d in enumerate(n.attr("dims") or ()):
        if src[j] == 1:
            continue
        ostride = 1
        for e in out[d + 1:]:
            ostride *= e
        sstride = 1
        for e in src[j + 1:]:
            sstride *= e
        terms.append(f"((i / {ostride}) % {out[d]}) * {sstride}")
    return " + ".join(terms) or "0"


def _ewise_loop(s: Step, types: dict[str, Any], ref: Any) -> list[str]:
    """One loop over the output for integer max / min / neg nodes and broadcasts; splat
    constants are literals, every other operand has the output's shape."""
    splats = splat_values(s.kernel)
    body = [n for n in s.kernel.nodes if n.name not in splats]
    local = {n.name for n in body}
    size = types[s.kernel.outputs[0]].type.size

    def operand(name: str) -> str:
        if name in splats:
            v = splats[name].attr("value")  # a splat: one number (the tensor may be empty)
            if types[name].type.dtype.name == "f32":
                return f"{float(v).hex()}f" if v == v else "(0.0f / 0.0f)"
            return f"({CTYPE[types[name].type.dtype.name]})({int(v)}LL)"
        return "t" + _ident(name)[1:] if name in local else f"{ref(name)}[i]"

    lines = [f"    for (int i = 0; i < {size}; i++) {{"]
    for n in body:
        ctype = CTYPE[n.type.dtype.name]
        if n.op == "broadcast_in_dim":
            x = n.inputs[0]
            expr = operand(x) if x in splats else f"{ref(x)}[{_broadcast_index(n, types)}]"
        elif n.op == "neg":  # wraps, as numpy does: negate in unsigned 64-bit, then narrow
            expr = f"(uint64_t)0 - (uint64_t){operand(n.inputs[0])}"
        else:
            a, b = (operand(x) for x in n.inputs)
            expr = f"{a} > {b} ? {a} : {b}" if n.op == "max" else f"{a} < {b} ? {a} : {b}"
        lines.append(f"        const {ctype} {operand(n.name)} = ({ctype})({expr});")
    lines += [f"        {ref(o)}[i] = {operand(o)};" for o in s.kernel.outputs]
    return lines + ["    }"]


def plan_arena(g: Graph, steps: list[Step], returned: list[str]) -> ArenaPlan:
    """The LIR planner on the kernels the firmware runs: inputs first, returned values out."""
    ins = [s.kernel for s in steps if s.kind == "in"]
    run = [s.kernel for s in steps if s.kind not in ("in", "out", "const")]
    planning = dataclasses.replace(g, kernels=tuple(ins + run),
                                   outputs=tuple(dict.fromkeys(list(g.outputs) + returned)),
                                   plan=None)
    return PlanArena(alignment=ALIGNMENT).run(planning, PassContext()).plan  # type: ignore[return-value]


def emit(g: Graph, steps: list[Step]) -> FirmwareSource:
    """The firmware source for a legalized graph."""
    import numpy as np

    types = g.values()
    host: dict[str, Any] = {}  # compile-time values: params and constant kernels
    for p in g.params:
        host[p.name] = np.asarray(g.param_data[p.name], dt.to_numpy_name(p.type.dtype))
    for s in steps:
        if s.kind == "const":
            for n in s.kernel.nodes:
                host[n.name] = _const_value(n)

    inputs = [IoSpec(s.node.name, types[s.node.name].type.dtype.name,
                     types[s.node.name].type.shape,
                     [v.name for v in g.inputs].index(s.node.inputs[0]), s.node)
              for s in steps if s.kind == "in"]
    covered = {s.node.inputs[0] for s in steps if s.kind == "in"}
    for i, v in enumerate(g.inputs):  # an integer graph input the firmware reads directly
        if v.name not in covered:
            inputs.append(IoSpec(v.name, v.type.dtype.name, v.type.shape, i))
    outputs: list[IoSpec] = []
    out_step = {s.node.name: s.node for s in steps if s.kind == "out"}
    for i, o in enumerate(g.outputs):
        node = out_step.get(o)
        src = node.inputs[0] if node is not None else o
        outputs.append(IoSpec(src, types[src].type.dtype.name, types[src].type.shape, i, node))
    returned = [o.value for o in outputs]
    plan = plan_arena(g, steps, returned)
    slots = {s.value: s for s in plan.slots}

    decls: list[str] = []
    const_bytes = 0
    used_consts: set[str] = set()

    def ref(name: str) -> str:
        ctype = CTYPE[types[name].type.dtype.name]
        if name in host:
            used_consts.add(name)
            return _ident(name)
        if name in slots:
            return f"(({ctype} *)(rlx_arena + {slots[name].offset}))"
        return _ident(name)

    body: list[str] = []
    lines: list[str] = []
    scratch_in = scratch_out = 0
    for s in steps:
        n = s.node
        t = types[n.name].type
        if s.kind in ("const", "in", "out"):
            continue
        lines.append(f"{s.kind} %{n.name} = {n.op} {t}")
        body.append(f"    /* {s.kernel.name}: %{n.name} = {n.op} -> {t} */")
        if s.kind == "fc":
            x, w = n.inputs[0], n.inputs[1]
            wv = host[w].astype(np.int64)
            nout, k = wv.shape
            rows = types[x].type.size // k
            za, zb = int(n.attr("a_zero_point") or 0), int(n.attr("b_zero_point") or 0)
            bias = host[n.inputs[2]].astype(np.int64) if len(n.inputs) == 3 else np.zeros(nout,
                                                                                          np.int64)
            folded = bias - za * wv.sum(axis=1) + k * za * zb  # CMSIS-NN's kernel-sum folding
            folded = ((folded + 2**31) % 2**32 - 2**31).astype(np.int32)
            bname = _ident(n.name) + "_bias"
            decls.append(_c_array(bname, "int32_t", folded))
            const_bytes += folded.nbytes
            xs = SUFFIX[types[x].type.dtype.name]
            body.append(f"    rlx_fc_{xs}({ref(x)}, {ref(w)}, {bname}, {zb}, {ref(n.name)}, "
                        f"{rows}, {k}, {nout});")
        elif s.kind in ("conv", "pool"):
            code = (conv_code(n, types, host, ref, _ident(n.name), _c_array, SUFFIX)
                    if s.kind == "conv" else pool_code(n, types, ref, SUFFIX))
            decls.extend(code.decls)
            body.extend(code.body)
            const_bytes += code.const_bytes
            scratch_in = max(scratch_in, code.scratch_in)
            scratch_out = max(scratch_out, code.scratch_out)
        elif s.kind == "requant":
            mult = [int(m) for m in n.attr("multiplier")]
            shift = [int(v) for v in n.attr("shift")]
            lo, hi = qrange(n.attr("dtype"))
            _, c, inner = _split(t.shape, int(n.attr("axis")))
            c = c if len(mult) > 1 else 1
            for suffix, vals in (("mult", mult), ("shift", shift)):
                decls.append(_c_array(f"{_ident(n.name)}_{suffix}", "int32_t",
                                      np.asarray(vals, np.int32)))
                const_bytes += 4 * len(vals)
            body.append(f"    rlx_requantize_{SUFFIX[t.dtype.name]}({ref(n.inputs[0])}, "
                        f"{ref(n.name)}, {t.size}, {inner}, {c}, {_ident(n.name)}_mult, "
                        f"{_ident(n.name)}_shift, {int(n.attr('zero_point'))}, {lo}, {hi});")
        elif s.kind == "ewise":
            body.extend(_ewise_loop(s, types, ref))
        elif s.kind == "argmax":
            src = n.inputs[0]
            st = types[src].type
            outer, ext, inner = _split(st.shape, int(n.attr("axis")))
            body.append(f"    rlx_argmax_{SUFFIX[st.dtype.name]}_{t.dtype.name}({ref(src)}, "
                        f"{ref(n.name)}, {outer}, {ext}, {inner});")
        elif s.kind == "dequant":
            q, sc, zp = n.inputs
            scale = np.asarray(host[sc], np.float32).ravel()
            zps = np.asarray(host[zp], np.int32).ravel()
            _, c, inner = _split(t.shape, int(n.attr("axis")))
            c = c if scale.size > 1 else 1
            used_consts.update((sc, zp))
            body.append(f"    rlx_dequantize_{SUFFIX[types[q].type.dtype.name]}({ref(q)}, "
                        f"{ref(n.name)}, {t.size}, {inner}, {c}, {_ident(sc)}, {_ident(zp)}, "
                        f"{int(zps.size > 1)});")
        elif s.kind == "reshape":
            src = n.inputs[0]
            if not (plan.is_alias(n.name)):
                body.append(f"    __builtin_memcpy({ref(n.name)}, {ref(src)}, {t.nbytes});")
    io = inputs + outputs

    def ptr(o: IoSpec) -> str:
        return f"(uint8_t *){ref(o.value)}"

    in_ptrs, out_ptrs = [ptr(o) for o in inputs], [ptr(o) for o in outputs]
    for name in sorted(used_consts):
        arr = host[name]
        decls.insert(0, _c_array(_ident(name), CTYPE[types[name].type.dtype.name], arr))
        const_bytes += arr.nbytes
    own = [o for o in io if o.value not in slots and o.value not in host]
    bufs = [f"static {CTYPE[o.dtype]} {_ident(o.value)}[{max(1, o.nbytes // max(1, dt.get(o.dtype).bits // 8))}] "
            f"__attribute__((aligned(8)));" for o in own]
    io_bytes = sum(o.nbytes for o in own)
    bufs += [f"static uint8_t {name}[{size}] __attribute__((aligned(8)));"
             for name, size in ((SCRATCH_IN, scratch_in), (SCRATCH_OUT, scratch_out)) if size]

    model_c = "\n".join([
        f"/* generated by rlx (targets/cortex_m) from LIR @{g.name} */",
        '#include "model.h"', '#include "rlx_nn.h"', "",
        f"static uint8_t rlx_arena[{max(plan.peak_bytes, 8)}] __attribute__((aligned(8)));",
        *bufs, "", *decls, "",
        f"uint8_t *const rlx_in_ptr[{max(1, len(inputs))}] = {{{', '.join(in_ptrs) or '0'}}};",
        f"const uint32_t rlx_in_size[{max(1, len(inputs))}] = {{{', '.join(str(o.nbytes) for o in inputs) or '0'}}};",
        f"uint8_t *const rlx_out_ptr[{max(1, len(outputs))}] = {{{', '.join(out_ptrs)}}};",
        f"const uint32_t rlx_out_size[{max(1, len(outputs))}] = {{{', '.join(str(o.nbytes) for o in outputs)}}};",
        "", "void rlx_model(void) {", *body, "}", ""])
    model_h = "\n".join([
        "#ifndef RLX_MODEL_H", "#define RLX_MODEL_H", "#include <stdint.h>",
        f"#define RLX_N_IN {len(inputs)}", f"#define RLX_N_OUT {len(outputs)}",
        f"extern uint8_t *const rlx_in_ptr[{max(1, len(inputs))}];",
        f"extern const uint32_t rlx_in_size[{max(1, len(inputs))}];",
        f"extern uint8_t *const rlx_out_ptr[{max(1, len(outputs))}];",
        f"extern const uint32_t rlx_out_size[{max(1, len(outputs))}];",
        "void rlx_model(void);", "#endif", ""])
    boundary = {}
    for o in io:
        if o.boundary is not None:
            for i in o.boundary.inputs[1:]:
                boundary[i] = host[i]
    return FirmwareSource(model_c, model_h, inputs, outputs, plan, const_bytes, io_bytes,
                          boundary, lines, scratch_in + scratch_out)



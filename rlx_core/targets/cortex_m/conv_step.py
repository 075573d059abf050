"""One ``int_conv2d`` step of the firmware: the IR's NCHW / OIHW convolution on the NHWC
kernels of csrc/rlx_conv.h.

The weight is transposed on the host, once (OIHW -> OHWI for conv2d, (C, 1, KH, KW) -> HWC
for a depthwise conv), and goes to flash with the i32 bias. The activations stay NCHW in the
arena, as every other step reads them: an input with more than one channel is transposed to
NHWC into a scratch buffer, the kernel writes its NHWC i32 sums into a second one, which is
transposed back into the step's arena slot. Both scratch buffers are static (shared by every
conv step, sized by the largest) and counted in the firmware's RAM.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlx_core.ir.graph import Node

SCRATCH_IN, SCRATCH_OUT = "rlx_conv_in", "rlx_conv_out"


@dataclass
class ConvCode:
    """What a conv step adds to model.c: flash arrays, body lines, scratch sizes (bytes)."""

    decls: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    const_bytes: int = 0
    scratch_in: int = 0
    scratch_out: int = 0


def window_open(out: ConvCode, xt: Any, src: str, xs: str,
                window: tuple[int, ...]) -> tuple[list[str], str]:
    """The opening of a windowed step over an NCHW input of type ``xt``: the ``rlx_win_t``
    geometry (``window``: oh, ow, kh, kw, sh, sw, ph, pw) and, with more than one channel,
    the copy to NHWC in the input scratch (recorded in ``out``). Returns the body lines and
    the C expression the NHWC kernel reads."""
    bn, c, h, wd = xt.shape
    ctype = "uint8_t" if xs == "u8" else "int8_t"
    geometry = ", ".join(str(v) for v in (bn, h, wd, c, *window))
    body = [f"    {{ static const rlx_win_t g = {{{geometry}}};"]
    if c > 1:  # NCHW -> NHWC (one channel: the same bytes)
        body.append(f"      rlx_nchw_to_nhwc_{xs}({src}, ({ctype} *){SCRATCH_IN}, {bn}, {c}, "
                    f"{h * wd});")
        src = f"({ctype} *){SCRATCH_IN}"
        out.scratch_in = xt.nbytes
    return body, src


def conv_code(n: Node, types: dict[str, Any], host: dict[str, Any], ref: Callable[[str], str],
              ident: str, c_array: Callable[[str, str, Any], str],
              suffix: dict[str, str]) -> ConvCode:
    """The C for ``n`` (an int_conv2d the legalization accepted)."""
    import numpy as np

    out = ConvCode()
    x, w = n.inputs[0], n.inputs[1]
    xt, yt = types[x].type, types[n.name].type
    bn, c, h, wd = xt.shape
    o, _, kh, kw = host[w].shape
    oh, ow = yt.shape[2:]
    (sh, sw), (ph, pw) = tuple(n.attr("stride")), tuple(n.attr("padding"))
    depthwise = int(n.attr("groups")) != 1
    wv = np.asarray(host[w], np.int8)
    wl = wv[:, 0].transpose(1, 2, 0) if depthwise else wv.transpose(0, 2, 3, 1)
    wname, bname = ident + "_ohwi", ident + "_bias"
    out.decls.append(c_array(wname, "int8_t", np.ascontiguousarray(wl)))
    out.const_bytes += wl.size
    bias = "0"
    if len(n.inputs) == 3:
        out.decls.append(c_array(bname, "int32_t", np.asarray(host[n.inputs[2]], np.int32)))
        out.const_bytes += 4 * o
        bias = bname
    xs = suffix[xt.dtype.name]
    za, zb = int(n.attr("a_zero_point") or 0), int(n.attr("b_zero_point") or 0)
    body, src = window_open(out, xt, ref(x), xs, (oh, ow, kh, kw, sh, sw, ph, pw))
    direct = o == 1 or oh * ow == 1  # NHWC is NCHW already
    dst = ref(n.name) if direct else f"(int32_t *){SCRATCH_OUT}"
    if depthwise:
        body.append(f"      rlx_dwconv_nhwc_{xs}({src}, {wname}, {bias}, {za}, {zb}, {dst}, &g);")
    else:
        body.append(f"      rlx_conv_nhwc_{xs}({src}, {wname}, {bias}, {za}, {zb}, {dst}, &g, "
                    f"{o});")
    if not direct:
        body.append(f"      rlx_nhwc_to_nchw_s32({dst}, {ref(n.name)}, {bn}, {o}, {oh * ow});")
        out.scratch_out = yt.nbytes
    out.body = body + ["    }"]
    return out

"""One int8 ``max_pool2d`` step of the firmware: the IR's NCHW pooling on the NHWC kernel of
csrc/rlx_conv.h (``rlx_maxpool_nhwc_*``).

Max commutes with a monotone requantization, so the int8 values pool as they are (their scale
and zero point pass through) and padding never wins (the kernel takes the max of the taps
inside the image, the reference pads with the dtype's least value). As a conv step does
(conv_step.py), a multi-channel input goes NCHW -> NHWC through the shared scratch buffers and
the result comes back to NCHW in the step's arena slot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlx_core.ir.graph import Node
from rlx_core.ir.ops.quant import qrange
from rlx_core.targets.cortex_m.conv_step import SCRATCH_OUT, ConvCode, window_open


def pool_code(n: Node, types: dict[str, Any], ref: Callable[[str], str],
              suffix: dict[str, str]) -> ConvCode:
    """The C for ``n`` (an i8 / u8 max_pool2d the legalization accepted)."""
    out = ConvCode()
    xt, yt = types[n.inputs[0]].type, types[n.name].type
    bn, c, _, _ = xt.shape
    oh, ow = yt.shape[2:]
    (kh, kw), (sh, sw), (ph, pw) = (tuple(n.attr(a)) for a in ("kernel", "stride", "padding"))
    xs = suffix[xt.dtype.name]
    ctype = "uint8_t" if xs == "u8" else "int8_t"
    lo, hi = qrange(xt.dtype.name)  # no clamp: the full range of the dtype
    dst = ref(n.name)
    body, src = window_open(out, xt, ref(n.inputs[0]), xs, (oh, ow, kh, kw, sh, sw, ph, pw))
    direct = c == 1 or oh * ow == 1  # NHWC is NCHW already
    kdst = dst if direct else f"({ctype} *){SCRATCH_OUT}"
    body.append(f"      rlx_maxpool_nhwc_{xs}({src}, {kdst}, &g, {lo}, {hi});")
    if not direct:
        body.append(f"      rlx_nhwc_to_nchw_{xs}({kdst}, {dst}, {bn}, {c}, {oh * ow});")
        out.scratch_out = yt.nbytes
    out.body = body + ["    }"]
    return out

"""Capability table of the fpga target: the int8 fully connected datapath.

The same int8 rules as cortex-m (the strict check and the boundary, targets/cortex_m): the
quantization ops whole, relu as an integer ``max`` folded into the requantize clamp, argmax at
the end, constants. The datapath itself is narrower (a chain of layers at batch 1,
fpga/layers.py). Labelled ``simulated``: Verilator runs the generated Verilog cycle by cycle.
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import Capabilities, OpClaim, native_dtypes
from rlx_core.targets.cortex_m.caps import DTYPES, INTS, QUANT_OPS


def caps(verification: str) -> Capabilities:
    return Capabilities(
        target="fpga",
        verification=verification,
        claims=(OpClaim(QUANT_OPS, ("i8", "u8", "i32", "f32"),
                        note="int_linear as a MAC array per layer, requantize in the datapath; "
                             "quantize / dequantize at the stream boundary (host)"),
                OpClaim(("max", "reshape", "argmax"), INTS,
                        note="relu folded into the requantize clamp; argmax over the last "
                             "layer's integers"),
                OpClaim(("constant", "broadcast_in_dim"), DTYPES, note="ROM init files")),
        dtype_rules=native_dtypes(DTYPES),
        note="synthesizable Verilog-2005 (targets/fpga), simulated by Verilator, synthesized "
             "by yosys synth_ice40 + nextpnr-ice40",
    )


CAPS = caps("simulated")

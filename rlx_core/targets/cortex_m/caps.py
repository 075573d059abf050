"""Capability table of the cortex-m target (int8 C99 kernels for Cortex-M4 / M33 firmware).

It claims exactly what the firmware runs: the quantization ops whole (``int_linear`` as a
fully connected layer, ``int_conv2d`` as a
convolution (groups 1 or depthwise), ``max_pool2d`` on i8 / u8, ``requantize`` with TFLite's multiplier and shift, ``quantize`` /
``dequantize`` at the graph boundary, where the host applies the reference's rule), integer
``max`` (relu on quantized values), ``argmax`` and ``reshape``. Everything else fails before
dispatch in the target's strict check (``check.py``), which lists every offending node with a
fix (quantize the model, drop a softmax before argmax, ...).
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import (
    Capabilities,
    DTypeRule,
    Limits,
    OpClaim,
    native_dtypes,
)

DTYPES: tuple[str, ...] = ("f32", "i64", "i32", "i16", "i8", "u8")
INTS: tuple[str, ...] = ("i8", "u8", "i16", "i32", "i64")
QUANT_OPS: tuple[str, ...] = ("int_linear", "requantize", "quantize", "dequantize")


def caps(verification: str) -> Capabilities:
    """The table, labelled with how this machine verifies it."""
    return Capabilities(
        target="cortex-m",
        verification=verification,
        claims=(OpClaim(QUANT_OPS, ("i8", "u8", "i16", "i32", "f32"),
                        note="CMSIS-NN-style int8 kernels (fully connected with SMLAD where the "
                             "core has the DSP extension, requantize); quantize/dequantize only "
                             "at the graph boundary"),
                OpClaim(("int_conv2d",), ("i8", "u8", "i32"),
                        note="conv2d (groups 1) and depthwise conv as the NHWC kernels of "
                             "csrc/rlx_conv.h; OHWI weights transposed at compile time, the "
                             "NCHW activations through a scratch buffer"),
                OpClaim(("max_pool2d",), ("i8", "u8"),
                        note="max pooling on the quantized values (scale and zero point pass "
                             "through) as rlx_maxpool_nhwc of csrc/rlx_conv.h, NCHW through the "
                             "conv steps' scratch buffers"),
                OpClaim(("max", "min", "neg", "reshape"), INTS,
                        note="one generated loop per kernel; relu on quantized values is max "
                             "with the zero point"),
                OpClaim(("constant", "broadcast_in_dim"), DTYPES,
                        note="constants go to flash (scales, zero points, splats)"),
                OpClaim(("argmax",), INTS + ("f32",),
                        note="f32 only over logits the firmware dequantized (exact f32 steps)")),
        dtype_rules=native_dtypes(DTYPES) + (
            DTypeRule("f64", "unsupported", code="RLX-U001",
                      hint="quantize the model (rlx_core.quant.ptq.quantize_static)"),
            DTypeRule("f16", "unsupported", code="RLX-U001",
                      hint="quantize the model (rlx_core.quant.ptq.quantize_static)"),
            DTypeRule("bf16", "unsupported", code="RLX-U001",
                      hint="quantize the model (rlx_core.quant.ptq.quantize_static)"),
        ),
        # the kernels index with int: one tensor holds at most 2^31 - 1 elements
        limits=Limits(max_elements=2**31 - 1, index_type="int32", source="cortex-m kernels"),
        note="C99 int8 kernels (targets/cortex_m), arm-none-eabi-gcc -Os, run under "
             "qemu-system-arm (mps2-an386 Cortex-M4, mps2-an505 Cortex-M33) with semihosting",
    )


CAPS = caps("executes (emulated)")

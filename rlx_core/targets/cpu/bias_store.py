"""A GEMM whose epilogue is a linear layer's bias, with or without a ReLU and the ReLU's
gradient mask, stores that straight from its register tiles (``rlx_sgemm_bias``, sgemm.py).

The kernel is ``out = dot + b`` (b broadcast along the rows), ``out = max(dot + b, 0)``, and
in a training step also ``mask = (dot + b) >= 0`` (the ReLU's backward pass selects with it).
As a tile epilogue (tile_epilogue.py) each finished 8 x 32 tile was stored, then read back by
a function called through a pointer, which added the bias, took the max, wrote the mask and
stored the tile again. Here the tile's registers get the bias, the mask and the max before
the one store: per 16 floats an add, two compares, a masked move and a 16-byte mask store.

The bits are the tile epilogue's: ``t = dot + b`` in one rounding, ``max(t, 0)`` as the C
prelude's ``rlx_max_f`` (NaN kept, -0 to +0: a compare "not less or equal, unordered" keeps
t, every other lane is +0), ``t >= 0`` ordered (NaN gives 0).

The MLP 784-128-10/128 step's forward GEMM (k0: 128 x 128 x 784, one thread's two column
chunks, the step's C in a harness, Emerald Rapids, both forms in one process in turns of 20
calls, SCHED_FIFO, slowed host): 1.0-2.0% less time than the tile epilogue (B/A 0.980-0.990
over six rounds), bits and mask identical. In the step itself (RLX_CPU_PROFILE=thread, both
builds in one process in turns, FIFO) the forward GEMM took 0.955-0.969 of its time with the
tile epilogue, and the whole step (2 threads, turns of 20 calls, five rounds of 4,000, FIFO,
load ~11) 0.976-0.981 of main's p50 together with the W^T pack of sgemm.rlx_sgemm_acc_wt.
"""

from __future__ import annotations

import math

from rlx_core.ir import dtypes as dt
from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.c_common.matmul import BlockEpilogue, GemmSpec
from rlx_core.targets.cpu.env import env_flag
from rlx_core.targets.cpu.update_store import scalar_value

SUFFIX = "_bias"  # rlx_sgemm_bias / rlx_sgemm_packed_bias


# the largest C (bytes) stored this way. Measured in the 784-512-512-10 steps (both builds
# in one process in turns, FIFO, slowed host): at batch 128 (C 256 KB per layer) the step
# was 0.6-1.1% slower with it, at batch 1024 (2 MB) 0-3% (p10 0.5-5.7%); per kernel
# (RLX_CPU_PROFILE=thread) the two forward GEMMs were 2.5-5.5% faster, but the two kernels
# that read the masks back (select(mask, g W^T, 0)) 5-15% slower, which is not explained
# yet. The 784-128-10/128 step (C 64 KB) gains with it: see above
MAX_C_BYTES = 128 * 1024


def enabled() -> bool:
    """``RLX_NO_BIAS_STORE=1`` keeps such epilogues as tile epilogues (for A/B timing)."""
    return not env_flag("RLX_NO_BIAS_STORE", False)


def _zero(node) -> bool:
    """Is ``node`` a constant splat of +0.0 (``max(t, -0.0)`` keeps -0: not this form)?"""
    value = scalar_value(node)
    return value == 0 and math.copysign(1.0, value) > 0


class BiasStore:
    """The bias, ReLU and mask of one GEMM kernel: ``args`` is what a GEMM call adds (the bias,
    the mask at the call's C offset or 0, the ReLU flag)."""

    suffix = SUFFIX

    def __init__(self, bias_ptr: str, c_ptr: str, mask_ptr: str | None, relu: bool):
        self.bias_ptr, self.c_ptr, self.mask_ptr, self.relu = bias_ptr, c_ptr, mask_ptr, relu

    @staticmethod
    def make(env: KernelEnv, spec: GemmSpec, epilogue: BlockEpilogue | None) -> BiasStore | None:
        """The bias store of ``epilogue``, or None unless the kernel is exactly ``t = dot + b``
        (b an f32 kernel input of one dimension, the columns of C, broadcast along the rows)
        with the kernel's f32 output t or ``max(t, 0)`` in C's own buffer, and optionally
        ``t >= 0`` as a bool output; f32, one batch, C at most MAX_C_BYTES."""
        if epilogue is None or not enabled() or spec.dtype != dt.f32 or spec.batch != 1:
            return None
        if epilogue.norm is not None:
            return None
        k, dot = env.kernel, epilogue.dot
        shape = dot.type.shape
        if dot.type.nbytes > MAX_C_BYTES or len(shape) < 2 or spec.n != shape[-1]:
            return None
        by_op: dict[str, list] = {}
        for node in k.nodes:
            if node is not dot:
                by_op.setdefault(node.op, []).append(node)
        if not set(by_op) <= {"broadcast_in_dim", "add", "constant", "max", "ge"} \
                or any(len(v) != 1 for v in by_op.values()) or "add" not in by_op:
            return None
        (add,) = by_op["add"]
        (bc,) = by_op.get("broadcast_in_dim", [None])
        if bc is None or set(add.inputs) != {dot.name, bc.name} or len(add.inputs) != 2:
            return None
        bias = env.inputs.get(bc.inputs[0])
        if bias is None or bias.type.dtype != dt.f32 or bias.type.shape != (shape[-1],) \
                or tuple(bc.attr("dims")) != (len(shape) - 1,):
            return None
        zero = by_op.get("constant", [None])[0]
        mx, ge = by_op.get("max", [None])[0], by_op.get("ge", [None])[0]
        if (mx or ge) and (zero is None or not _zero(zero)):
            return None
        if zero is not None and not (mx or ge):
            return None
        # max(t, 0) and t >= 0 in this order (max(0, t) turns -0 the other way)
        if mx is not None and list(mx.inputs) != [add.name, zero.name]:
            return None
        if ge is not None and list(ge.inputs) != [add.name, zero.name]:
            return None
        result = mx or add
        if set(k.outputs) != {result.name} | ({ge.name} if ge else set()):
            return None
        out = env.outputs[result.name]
        if out.type.dtype != dt.f32 or spec.c != out.ptr:
            return None
        if ge is not None and env.outputs[ge.name].type.dtype != dt.bool_:
            return None
        mask = env.outputs[ge.name].ptr if ge is not None else None
        epilogue.emitted = True  # the GEMM's tiles write it
        return BiasStore(bias.ptr, spec.c, mask, mx is not None)

    def declare(self, w: Writer) -> None:
        """Nothing to hold per thread (a tile epilogue's context is written here)."""

    def args(self, w: Writer, bb: str, r0: str, c: str) -> str:
        """The GEMM call's extra arguments: the bias, the mask at the call's C offset (or 0),
        and the ReLU flag."""
        mask = f"{self.mask_ptr} + (({c}) - {self.c_ptr})" if self.mask_ptr else "0"
        return f", {self.bias_ptr}, {mask}, {int(self.relu)}"

"""A GEMM whose epilogue is an update ``W - c * dot`` (or ``W + c * dot``) stores that
straight from its register tiles: ``C = W + alpha * op(A) op(B)`` (``rlx_sgemm_upd``, sgemm.py).

An SGD step's weight gradient is used only to update the weight, so the training step's
kernel is ``new_W = W - lr * (g^T x)``. As a block epilogue (c_common/matmul.BlockEpilogue)
that is a second pass over each thread's block of C: the MLP 784-128-10/128 step wrote dW1's
200 KB per thread, then read it back with W1's 200 KB and wrote it again. Here each finished
tile, still in registers, is scaled, added to W's tile and stored once. ``alpha`` is ``-c``
for a subtraction: ``fma(-c, g, W)`` is ``W - c * g`` in one rounding, which is what the
block epilogue compiles to (the C is built with GCC's default -ffp-contract=fast, and the
block epilogue's ``W - c * g`` becomes an FMA), so the bits are the same. The tile epilogue (tile_epilogue.py) does not take this form: W is as large as C,
so it is a STREAMED operand there.

784-128-10/128 on 2 threads, Emerald Rapids, the step's generated code in a C harness with
both forms in one process in turns of 20 calls (SCHED_FIFO; the VM ran at ~2.9 GHz then,
FMA peak 190 GFLOP/s per core): the weight-gradient kernel 86.7 -> 83.0 and 84.7 -> 80.9 us,
the step 208.0 -> 204.4 and 203.9 -> 200.2 us, the new W1 bit-identical.

A matmul kernel's output is never written over an input's arena slot (cpu/inplace.py allows
that only for elementwise kernels and blocked convs). It may be written over a donated W
(runtime/donation.py: ``compile_step(..., in_place=True)`` donates the parameters), and only
where this store writes it: then C and W are one buffer, and each tile reads W's elements
before it stores the same elements (the FMA's operand). With K over one slice C holds partial
sums until the last slice and W would be gone by then, so such a GEMM refuses the donation
(``one_slice``); the renderer raises targets.base.InPlaceRefused for a donated matmul output
that this store does not write, and the program is rendered again with a fresh output. The
donation rule learns the form from the target (``CpuTarget.matmul_in_place`` ->
``updated_input``), so it knows no pattern of its own.
"""

from __future__ import annotations

import math

from rlx_core.ir import dtypes as dt
from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.c_common.matmul import BlockEpilogue, GemmSpec
from rlx_core.targets.cpu.env import env_flag

SUFFIX = "_upd"  # rlx_sgemm_upd / rlx_sgemm_packed_upd


def enabled() -> bool:
    """``RLX_NO_UPDATE_STORE=1`` keeps such epilogues as block epilogues (for A/B timing)."""
    return not env_flag("RLX_NO_UPDATE_STORE", False)


def scalar_value(node) -> float | None:
    """The value of a constant node that is one scalar splat over its shape, else None."""
    if node.op != "constant":
        return None
    value = node.attr("value")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def update_form(k, dot) -> tuple[str, float] | None:
    """(W, alpha) when kernel ``k`` is exactly ``out = W -/+ c * dot`` (c a scalar constant,
    ``dot`` its one dot_general), else None. W is not checked to be an input here."""
    rest = [n for n in k.nodes if n is not dot and n.op != "broadcast_in_dim"]
    if len(rest) != 3 or len(k.outputs) != 1:
        return None
    const, mul, upd = rest
    c = scalar_value(const)
    if c is None or not math.isfinite(c) or mul.op != "mul" \
            or set(mul.inputs) != {const.name, dot.name} or len(mul.inputs) != 2 \
            or upd.op not in ("sub", "add") or k.outputs[0] != upd.name:
        return None
    if upd.op == "sub" and upd.inputs[1] == mul.name:
        return upd.inputs[0], -c
    if upd.op == "add" and mul.name in upd.inputs:
        return next(v for v in upd.inputs if v != mul.name), c
    return None  # c * dot - W is not this form


def updated_input(k) -> str | None:
    """W when matmul kernel ``k`` is ``out = W -/+ c * dot`` with W read by the update alone
    (so at the output element's own index), not by the GEMM: the input this store may write
    ``out`` over when W is donated (runtime/donation.py); else None."""
    dots = [n for n in k.nodes if n.op == "dot_general"]
    form = update_form(k, dots[0]) if len(dots) == 1 else None
    if form is None or form[0] in dots[0].inputs:
        return None
    uses = [n for n in k.nodes if form[0] in n.inputs]
    return form[0] if len(uses) == 1 and uses[0].name == k.outputs[0] else None


def one_slice(k: int) -> bool:
    """Does a GEMM of depth ``k`` run as one KC slice (sgemm.py's rlx_sgemm_kc: slices of at
    most 9/8 KC), so that C is written once, at the end, and never holds partial sums?"""
    from rlx_core.targets.cpu import isa

    kc = isa.blocking().kc
    return k <= kc + kc // 8


class UpdateStore:
    """The update ``C = W + alpha * dot`` of one GEMM kernel: ``args`` is what a GEMM call
    adds (W's pointer at the call's C offset, alpha)."""

    suffix = SUFFIX

    def __init__(self, w_ptr: str, c_ptr: str, alpha: float):
        self.w_ptr, self.c_ptr, self.alpha = w_ptr, c_ptr, alpha

    @staticmethod
    def make(env: KernelEnv, spec: GemmSpec, epilogue: BlockEpilogue | None
             ) -> UpdateStore | None:
        """The update store of ``epilogue``, or None unless the kernel is exactly
        ``out = W -/+ c * dot`` (c a scalar constant, W a kernel input of C's shape, read at
        C's index), f32, one batch, the result in C's own buffer."""
        if epilogue is None or not enabled() or spec.dtype != dt.f32 or spec.batch != 1:
            return None
        if epilogue.norm is not None:
            return None
        k, dot = env.kernel, epilogue.dot
        form = update_form(k, dot)
        if form is None:
            return None
        w_name, alpha = form
        w_buf = env.inputs.get(w_name)
        if w_buf is None or w_name in dot.inputs or w_buf.type.dtype != dt.f32 \
                or w_buf.type.shape != dot.type.shape or spec.c != env.outputs[k.outputs[0]].ptr:
            return None
        epilogue.emitted = True  # the GEMM's tiles write it
        if env.in_place.get(k.outputs[0]) == w_name and one_slice(spec.k):
            env.stores_in_place = True  # C is the donated W: safe here only (module notes)
        return UpdateStore(w_buf.ptr, spec.c, alpha)

    def declare(self, w: Writer) -> None:
        """Nothing to hold per thread (a tile epilogue's context is written here)."""

    def args(self, w: Writer, bb: str, r0: str, c: str) -> str:
        """The GEMM call's extra arguments: W at the call's C offset, and alpha."""
        return f", {self.w_ptr} + (({c}) - {self.c_ptr}), ((float){self.alpha.hex()})"

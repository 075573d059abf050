"""A GEMM epilogue run on each finished register tile of rlx's own kernel (sgemm.py).

A block epilogue (c_common/matmul.BlockEpilogue) runs after its thread's whole block of C:
a second pass that reads the block back from L2 (the MLP step's weight gradient with its SGD
update, 200 KB per thread) or, for a large block, from memory. Here the epilogue becomes a
small function of its own, and the GEMM calls it on every 8 x 32 tile the moment the tile
holds its final value (after the last KC slice), while the tile is still in L1::

    typedef struct { const float* in0; ...; float* out0; int64_t bb, r0; } K_tile_ctx;
    static void K_tile(const void* ctx, int64_t tr0, int64_t tr1, int64_t tc0, int64_t tc1) {
        ...the kernel's buffers from ctx, the epilogue over rows r0+tr0 .. r0+tr1, tc0 .. tc1
    }
    K(...) { K_tile_ctx tctx = {in0, ..., out0, 0, 0};
             tctx.bb = bb; tctx.r0 = r0; rlx_sgemm_epi(..., K_tile, &tctx); }

The function pointer costs one indirect call per tile (256 results). The epilogue is the
block epilogue's own loop nest, narrowed to the tile, so the arithmetic is unchanged.
"""

from __future__ import annotations

from rlx_core.targets.c_common import ctype_table as ct
from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.c_common.matmul import BlockEpilogue, GemmSpec
from rlx_core.targets.cpu.env import env_flag

CTX = "tctx"  # the kernel's local holding the context

# STREAMED: an epilogue that reads another operand as large as C (a residual; an SGD update
# W - c * dot is stored by the GEMM itself, update_store.py) keeps the block epilogue. Tile by
# tile it reads that operand in pieces of 8 rows x 128 bytes, which the hardware prefetcher does not
# follow; the block epilogue streams whole rows. Timed per kernel in one process
# (RLX_CPU_PROFILE, 784-512-512-10 at batch 128, 2 threads): the 512 x 512 weight gradient with
# its SGD update took 557 us tile by tile against 393 us with the block epilogue, while the
# forward GEMMs with bias + ReLU took 574 and 387 us against 631 and 438. The rule counts
# bytes: a ReLU's byte mask (the MLP step's input gradient, select(mask, g W2, 0)) is a quarter
# of C's bytes, and tile by tile its select saved ~2 us of the 784-128-10/128 step's small
# kernels (2 threads, Emerald Rapids, both builds in one process in turns, SCHED_FIFO: 23.6 ->
# 21.4 and 23.2 -> 21.3 us).


def enabled() -> bool:
    """``RLX_NO_TILE_EPILOGUE=1`` keeps block epilogues (for side-by-side measurements)."""
    return not env_flag("RLX_NO_TILE_EPILOGUE", False)


class TileEpilogue:
    """The tile function of one kernel's epilogue: ``declare`` writes its context into the
    kernel, ``args(bb, r0)`` is what a GEMM call adds."""

    suffix = "_epi"  # rlx_sgemm_epi / rlx_sgemm_packed_epi

    def __init__(self, fn: str, ptrs: list[str]):
        self.fn, self.ptrs = fn, ptrs  # the function, the kernel buffers its context holds

    @staticmethod
    def make(env: KernelEnv, spec: GemmSpec, epilogue: BlockEpilogue | None) -> TileEpilogue | None:
        """Write the tile function (and its context's type) into ``env.preamble``, or
        return None when the epilogue cannot be narrowed to a tile: rows spread over several
        dimensions (a tile's rows are then no single range), batches that are no single
        dimension, or C in a buffer of the kernel's own (the function sees only parameters)."""
        if epilogue is None or not enabled() or not env.fn:
            return None
        if epilogue.row_unit != 1 or not epilogue.fits("rows", "cols"):
            return None
        if spec.batch > 1 and not epilogue.fits("batch"):
            return None
        dot = epilogue.dot
        if any(env.inputs[v].type.nbytes >= dot.type.nbytes for v in env.kernel.inputs
               if v not in dot.inputs):
            return None  # it streams an operand as large as C: see STREAMED
        buffers = env.buffers
        if spec.c not in {b.ptr for b in buffers.values()}:
            return None
        fn = f"{env.fn}_tile"
        fields = []
        for b in buffers.values():
            const = "const " if b in env.inputs.values() else ""
            fields.append((f"{const}{ct.storage(b.type.dtype)}*", b.ptr))
        w = Writer(1)
        w.line(f"const {fn}_ctx* c = (const {fn}_ctx*)vc;")
        for decl, name in fields:
            w.line(f"{decl} restrict {name} = c->{name};")
            w.line(f"(void){name};")
        # the epilogue's loop variables are i0, i1, ...: the tile bounds are named apart
        w.line("const int64_t bb = c->bb, rb = c->r0 + tr0, re = c->r0 + tr1;")
        w.line("(void)bb;")
        epilogue.emit(w, {"batch": ("bb", "bb + 1"), "rows": ("rb", "re"),
                          "cols": ("tc0", "tc1")})
        struct = "".join(f" {decl} {name};" for decl, name in fields)
        env.preamble.append(
            f"typedef struct {{{struct} int64_t bb, r0; }} {fn}_ctx;\n"
            f"static void {fn}(const void* vc, int64_t tr0, int64_t tr1, int64_t tc0, int64_t tc1) "
            "{\n" + "\n".join(w.lines) + "\n}\n")
        return TileEpilogue(fn, [name for _, name in fields])

    def declare(self, w: Writer) -> None:
        """The context local, holding the kernel's buffers (written once per kernel call)."""
        w.line(f"{self.fn}_ctx {CTX} = {{{', '.join(self.ptrs)}, 0, 0}};")

    def args(self, w: Writer, bb: str, r0: str, c: str = "") -> str:
        """Set the context's batch and row origin of the next call; its extra arguments
        (``c``, the call's C, is not needed: the context holds the kernel's buffers)."""
        w.line(f"{CTX}.bb = {bb}; {CTX}.r0 = {r0};")
        return f", {self.fn}, &{CTX}"

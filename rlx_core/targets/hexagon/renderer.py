"""HexagonRenderer: the shared C renderer plus HVX loops where Hexagon's vector unit fits.

Kernels that ``hvx.hvx_kernel`` accepts get an HVX body, matmuls HVX tiles where
``hvx.hvx_gemm`` takes them; every other kernel is the scalar C of
``c_common`` (Hexagon's scalar core runs it: f32 in hardware, no threads, no BLAS).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rlx_core.ir.graph import Graph, Kernel, TensorType
from rlx_core.targets.c_common import ctype_table as ct
from rlx_core.targets.c_common.expr import RenderError
from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.c_common.matmul import BlockEpilogue, GemmSpec
from rlx_core.targets.c_common.names import c_comment
from rlx_core.targets.c_common.renderer import CLikeRenderer
from rlx_core.targets.hexagon import hvx

# The prelude's NaN-propagating max/min, with the NaN tests on the bits. clang-14 (and 15)
# turn ``(a != a || a > b) ? a : b`` into Hexagon's sfmax, which returns the other operand for
# a NaN (as qemu-hexagon runs it): a NaN in the second place was lost (found by the fuzzer).
# Spelled ``a != a ? a : b != b ? b : ...``, a constant b (relu's 0.0) folds ``b != b`` away
# and InstCombine merges the rest into ``select (fcmp ugt a, 0), a, 0``, which the Hexagon
# backend also selects as sfmax(a, 0) = 0 for a NaN a (the deviation of issue 25). Integer
# tests on the bits are not float compares: no fold reaches sfmax with a NaN operand.
_NAN_BITS = ("static inline int rlx_nan_bits(float a) "
             "{ union { float f; uint32_t u; } v = {a}; return (v.u & 0x7fffffffu) > 0x7f800000u; }")
_NAN_SAFE = {
    "static inline float rlx_max_f(float a, float b) { return (a != a || a > b) ? a : b; }":
    _NAN_BITS + "\nstatic inline float rlx_max_f(float a, float b) "
    "{ return rlx_nan_bits(a) ? a : rlx_nan_bits(b) ? b : (a > b ? a : b); }",
    "static inline float rlx_min_f(float a, float b) { return (a != a || a < b) ? a : b; }":
    "static inline float rlx_min_f(float a, float b) "
    "{ return rlx_nan_bits(a) ? a : rlx_nan_bits(b) ? b : (a < b ? a : b); }",
}


class HexagonRenderer(CLikeRenderer):
    """The C renderer for Hexagon (c_common's), whose programs test f32 max and min for NaN on
    the bits (_NAN_SAFE: clang selects sfmax/sfmin, which lose a NaN)."""

    name = "hexagon"
    restrict = "__restrict__"
    kernel_decl = "static void"

    def render_program(self, g: Graph, prefix: str = "rlx") -> Any:
        prog = super().render_program(g, prefix)
        source = prog.source
        for old, new in _NAN_SAFE.items():
            if old not in source:
                raise RenderError("the C prelude's rlx_max_f/rlx_min_f changed: update "
                                  "hexagon/renderer.py's NaN-safe copies",
                                  hint="a renderer bug: use target cpu meanwhile")
            source = source.replace(old, new)
        # the copies sit in the prelude, above every kernel: their kernels' lines move down
        shift = source.count("\n") - prog.source.count("\n")
        lines = {k: (lo + shift, hi + shift) for k, (lo, hi) in prog.kernel_lines.items()}
        return replace(prog, source=source, kernel_lines=lines)

    def extra_headers(self) -> list[str]:
        return [hvx.HEADER]

    def gemm(self, w: Writer, env: KernelEnv, spec: GemmSpec,
             epilogue: BlockEpilogue | None = None) -> str | None:
        return hvx.hvx_gemm(w, spec)

    def render_kernel(self, g: Graph, k: Kernel, idx: int, prefix: str,
                      types: dict[str, TensorType], fail: str) -> tuple[str, str, int]:
        found = hvx.hvx_kernel(k, types)
        if found is None and hvx.hvx_row_sum(k, types) is not None:
            return self._hvx_text(k, prefix, types, "reduce, hvx row sum",
                                  hvx.render_row_sum(k, types), "hvx-row-sum")
        if found is None:
            return super().render_kernel(g, k, idx, prefix, types, fail)
        op, dtype, lanes = found
        return self._hvx_text(k, prefix, types, f"elementwise, hvx {op} {dtype} x{lanes}",
                              hvx.render_body(k, types), f"hvx-{op}-{dtype}")

    def _hvx_text(self, k: Kernel, prefix: str, types: dict[str, TensorType], what: str,
                  body_lines: list[str], impl: str) -> tuple[str, str, int]:
        """A kernel function with the shared signature around an HVX body."""
        r = self.restrict
        params = [f"const {ct.storage(types[v].dtype)}* {r} in{j}"
                  for j, v in enumerate(k.inputs)]
        params += [f"{ct.storage(types[v].dtype)}* {r} out{j}" for j, v in enumerate(k.outputs)]
        params.append(f"unsigned char* {r} scratch")
        self._extra_args[k.name] = []
        fn = self.kernel_fn(prefix, k)
        ops = ", ".join(c_comment(n.op) for n in k.nodes)
        head = (f"/* kernel {c_comment(k.name)} ({what}): {ops} -> "
                f"{c_comment(k.outputs[0])} */\n")
        body = "\n".join(body_lines)
        text = (head + f"{self.kernel_decl} {fn}(" + ", ".join(params) + ") {\n"
                "    (void)scratch;\n" + body + "\n}\n")
        return text, impl, 0

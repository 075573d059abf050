"""HexagonRenderer: the shared C renderer plus HVX loops where Hexagon's vector unit fits.

Kernels that ``hvx.hvx_kernel`` accepts get an HVX body; every other kernel is the scalar C of
``c_common`` (Hexagon's scalar core runs it: f32 in hardware, no threads, no BLAS).
"""

from __future__ import annotations

from rlx_core.ir.graph import Graph, Kernel, TensorType
from rlx_core.targets.c_common import ctype_table as ct
from rlx_core.targets.c_common.names import c_comment
from rlx_core.targets.c_common.renderer import CLikeRenderer
from rlx_core.targets.hexagon import hvx


class HexagonRenderer(CLikeRenderer):
    name = "hexagon"
    restrict = "__restrict__"
    kernel_decl = "static void"

    def extra_headers(self) -> list[str]:
        return [hvx.HEADER]

    def render_kernel(self, g: Graph, k: Kernel, idx: int, prefix: str,
                      types: dict[str, TensorType], fail: str) -> tuple[str, str, int]:
        found = hvx.hvx_kernel(k, types)
        if found is None:
            return super().render_kernel(g, k, idx, prefix, types, fail)
        op, dtype, lanes = found
        r = self.restrict
        params = [f"const {ct.storage(types[v].dtype)}* {r} in{j}"
                  for j, v in enumerate(k.inputs)]
        params += [f"{ct.storage(types[v].dtype)}* {r} out{j}" for j, v in enumerate(k.outputs)]
        params.append(f"unsigned char* {r} scratch")
        self._extra_args[k.name] = []
        fn = self.kernel_fn(prefix, k)
        head = (f"/* kernel {c_comment(k.name)} (elementwise, hvx {op} {dtype} x{lanes}): "
                f"{op} -> {c_comment(k.outputs[0])} */\n")
        body = "\n".join(hvx.render_body(k, types))
        text = (head + f"{self.kernel_decl} {fn}(" + ", ".join(params) + ") {\n"
                "    (void)scratch;\n" + body + "\n}\n")
        return text, f"hvx-{op}-{dtype}", 0

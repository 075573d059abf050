"""WGSL, as a dialect of the shared GPU renderer (gpu_common).

WGSL differs from the C family in declarations (``let x = e;`` infers, ``var x: T = e;``),
constructors and ``bitcast<T>`` for conversions, ``select(f, t, c)``, module-scope bindings and
``var<workgroup>`` arrays, and builtins as entry-point parameters. Integer arithmetic wraps by
the spec. Tint and naga reject a constant inf or NaN, so those literals OR in ``rlx_zero``, a
private variable that is 0 but not a constant. lavapipe compiles as if floats had no inf or NaN
(x / 0.0 and inf * 0.0 come out 0), so the dialect asks for ``ieee_guards``.
"""

from __future__ import annotations

from typing import Any

from rlx_core.targets.gpu_common.dialect import Buffer, Dialect, Shared


def storage_bindings(names: list[tuple[str, str]]) -> str:
    """Module-scope declarations of read-write storage buffers, bound at group 0 in the order
    given: one ``@group(0) @binding(i) var<storage, read_write> name: type;`` line per pair."""
    return "\n".join(f"@group(0) @binding({i}) var<storage, read_write> {n}: {t};"
                     for i, (n, t) in enumerate(names)) + "\n"


class Wgsl(Dialect):
    """WGSL for the shared GPU renderer (the webgpu target); f64 as a double-float in two f32."""

    name = "wgsl"
    # f64 is a double-float (webgpu/df64.py) in registers; its buffers hold the f64 bits
    types = {"f32": "f32", "f16": "f16", "i32": "i32", "u32": "u32", "bool": "bool",
             "f64": "vec2<f32>"}
    barrier = "workgroupBarrier();"
    round_even = "round"
    has_f16 = True
    ieee_guards = True
    entry = "main"

    _BUILTINS = {"gx": "gid.x", "gy": "gid.y", "wx": "wid.x", "wy": "wid.y", "wz": "wid.z",
                 "lx": "lid3.x", "ly": "lid3.y", "li": "lidx"}

    @property
    def f64_emulation(self) -> Any:  # type: ignore[override]
        from rlx_core.targets.webgpu import df64

        return df64

    def float_lit(self, f: float) -> str:
        return f"f32({f!r})"

    def double_lit(self, f: float) -> str:
        return self.f64_emulation.lit(f)

    def nonfinite_lit64(self, bits: int) -> str:
        return self.f64_emulation.nonfinite(bits)

    def int_lit(self, v: int, key: str) -> str:
        if key == "u32":
            return f"{v}u"
        return f"i32({v})" if v != -(2 ** 31) else "i32(-2147483647 - 1)"

    def nonfinite_lit(self, bits: int) -> str:
        # not a const-expression: Tint rejects a constant inf or NaN, at run time both are fine
        return f"bitcast<f32>({bits:#010x}u | rlx_zero)"

    def bitcast(self, key: str, e: str) -> str:
        return f"bitcast<{self.t(key)}>({e})"

    def f16_round(self, e: str) -> str:
        return f"f32(f16({e}))"

    def select(self, f: str, t: str, cond: str) -> str:
        return f"select({f}, {t}, {cond})"

    def let(self, name: str, key: str | None, e: str) -> str:
        return f"let {name} = {e};"

    def var(self, name: str, key: str, e: str | None = None) -> str:
        return f"var {name}: {self.t(key)}" + (f" = {e};" if e is not None else ";")

    def loop(self, name: str, start: str, stop: str, step: str) -> str:
        return f"for (var {name} = {start}; {name} < {stop}; {name} = {name} + {step}) {{"

    def function(self, name: str, params: list[tuple[str, str]], ret: str) -> str:
        args = ", ".join(f"{p}: {self.t(k)}" for p, k in params)
        return f"fn {name}({args}) -> {self.t(ret)} {{"

    def guard(self, name: str, lines: list[str]) -> list[str]:
        return lines  # no preprocessor: one kernel per shader module

    def enables(self, uses_f16: bool) -> list[str]:
        return ["enable f16;"] if uses_f16 else []

    def composite(self, k: Any, types: dict[str, Any]) -> tuple[Any, ...] | None:
        from rlx_core.targets.webgpu import krylov, linalg, sparse, splat

        if k.kind == "opaque" and len(k.nodes) == 1 and k.nodes[0].op in splat.OPS:
            return splat.render_splat(k, types)
        if k.kind == "opaque" and len(k.nodes) == 1 and k.nodes[0].op in sparse.OPS:
            return sparse.render_sparse(k, types)
        if k.kind == "opaque" and len(k.nodes) == 1 and k.nodes[0].op == "krylov_solve":
            return krylov.render_cg(k, types)
        if k.kind == "opaque" and len(k.nodes) == 1 and k.nodes[0].op in linalg.OPS:
            return linalg.render_linalg(k, types)
        return None

    def kernel(self, buffers: list[Buffer], shared: list[Shared], wg: tuple[int, int, int],
               prelude: list[str], body: list[str]) -> str:
        directive = ("enable ", "requires ")  # before any declaration
        enables = [p for p in prelude if p.startswith(directive)]
        helpers = [p for p in prelude if not p.startswith(directive)]
        lines = [*enables]
        lines += [f"@group(0) @binding({b.slot}) var<storage, read_write> {b.var}: "
                  f"array<{'vec2<u32>' if b.type == 'f64' else self.t(b.type)}>;  // {b.note}"
                  for b in buffers]
        lines.append("")
        if any("rlx_zero" in line for line in (*body, *helpers)):
            lines.append("var<private> rlx_zero: u32;  // 0, but not a constant (see lit)")
        opaque = any("rlx_opaque" in line for line in helpers) and buffers
        if opaque:  # 0, set at run time from a buffer's length (webgpu/df64.py says why)
            lines.append("var<private> rlx_opaque: u32;")
        for s in shared:
            ty = self.t(s.type)
            for n in reversed(s.dims):
                ty = f"array<{ty}, {n}>"
            lines.append(f"var<workgroup> {s.name}: {ty};")
        lines += helpers
        lines += [f"@compute @workgroup_size({wg[0]}, {wg[1]}, {wg[2]})",
                  "fn main(@builtin(global_invocation_id) gid: vec3<u32>, "
                  "@builtin(workgroup_id) wid: vec3<u32>,",
                  "        @builtin(local_invocation_id) lid3: vec3<u32>, "
                  "@builtin(local_invocation_index) lidx: u32) {",
                  *([f"  rlx_opaque = u32(arrayLength(&{buffers[0].var}) == 0xffffffffu);"]
                    if opaque else []),
                  *body, "}"]
        return "\n".join(lines) + "\n"


WGSL = Wgsl()


class WgslPacked(Wgsl):
    """WGSL with the ``packed_4x8_integer_dot_product`` language extension: int_linear's
    inner loop is ``dot4I8Packed`` (gpu_common/int8.py). Picked where the device compiles it
    (webgpu/runtime_native.py probes; the browser reports ``wgslLanguageFeatures``)."""

    name = "wgsl-packed"
    int8_path = "packed-dot"

    def dot4_i8(self, a: str, b: str) -> str | None:
        return f"dot4I8Packed({a}, {b})"

    def dot4_decl(self) -> list[str]:
        return ["requires packed_4x8_integer_dot_product;"]


WGSL_PACKED = WgslPacked()

# the AdapterInfo feature of a device whose WGSL compiler has the extension
PACKED_DOT = "wgsl-packed-4x8-integer-dot-product"


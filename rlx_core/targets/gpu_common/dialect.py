"""A GPU kernel language as a dialect: the spelling of everything the shared renderer emits.

The kernels (kernels.py), expressions (expr.py) and helper functions (helpers.py) are written
once against this class. A language is a subclass that sets the type names and overrides the
hooks whose spelling differs. The defaults are the C family's (OpenCL C, GLSL, HLSL share most
of them); WGSL (``webgpu/wgsl.py``) overrides the most.

Values are named by *type keys*: ``f32``, ``f16``, ``i32``, ``u32``, ``bool`` (the compute and
storage types of expr.py). Every hook returns source text; none keeps state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Buffer:
    """One kernel buffer argument: binding slot, variable name, storage type key, comment."""

    slot: int
    var: str
    type: str
    note: str


@dataclass(frozen=True)
class Shared:
    """One workgroup-shared array: name, element type key and dimensions (outermost first)."""

    name: str
    type: str
    dims: tuple[int, ...]


@dataclass(frozen=True)
class Subgroup:
    """How a language reduces inside a warp / subgroup / simdgroup with xor shuffles. Each
    field is an expression (``{lid}``: the local index variable, ``{wg}``: the workgroup
    size): the subgroup's width, this lane's index in it, the subgroup's index in the
    workgroup and the subgroups per workgroup; ``min_width`` is the narrowest width the
    device may have (it sizes the shared array of partial results)."""

    width: str
    lane: str
    index: str
    count: str
    min_width: int


class Dialect:
    """C-family defaults; a language overrides what it spells differently."""

    name = "c"
    # type key -> the language's scalar type name
    types: dict[str, str] = {"f32": "float", "f16": "half", "i32": "int", "u32": "uint",
                             "bool": "bool"}
    comment = "//"
    barrier = "barrier();"
    # math builtins whose name differs from the op (round to nearest even, float abs)
    fabs = "abs"
    round_even = "round"
    # does the language have f16 arithmetic and storage at all (WGSL: with shader-f16)
    has_f16 = False
    # does it have f64 (OpenCL C with cl_khr_fp64; the type keys f64 and u64 must be named)
    has_f64 = False
    # or f64 emulated by a library of the dialect's own (WGSL: double-float, webgpu/df64.py):
    # a module with ``elementwise``, ``cast``, ``combine`` and ``library`` (see expr.py)
    f64_emulation: Any = None
    # does the driver compile floats as if inf and NaN did not exist (x / 0.0 -> 0, inf * 0.0
    # -> 0: lavapipe, llvmpipe)? Then float div and mul decide the special cases on the bits
    ieee_guards = False

    # reductions combine lanes with xor shuffles first (then one partial per subgroup in
    # shared memory) where set; None: a shared-memory tree over every lane
    subgroup: Subgroup | None = None

    # ---- types and literals ------------------------------------------------------------------

    def composite(self, k: Any, types: dict[str, Any]) -> tuple[Any, ...] | None:
        """The dispatches of a kernel holding an HIR op this language renders itself (a
        tuple of gpu_common.kernels.GpuKernel), or None for the shared renderer."""
        return None

    def t(self, key: str) -> str:
        return self.types[key]

    def float_lit(self, f: float) -> str:
        """A finite f32 literal."""
        return f"{f!r}f" if ("e" in repr(f) or "." in repr(f)) else f"{f!r}.0f"

    def int_lit(self, v: int, key: str) -> str:
        if key == "u32":
            return f"{v}u"
        return str(v) if v != -(2 ** 31) else "(-2147483647 - 1)"

    def nonfinite_lit(self, bits: int) -> str:
        """inf or NaN from its bits (compilers reject or fold a constant one)."""
        return self.bitcast("f32", f"{bits:#010x}u")

    def double_lit(self, f: float) -> str:
        """A finite f64 literal (dialects with ``has_f64``)."""
        r = repr(f)
        return r if ("e" in r or "." in r) else f"{r}.0"

    def u64_lit(self, v: int) -> str:
        return f"{v:#x}UL"

    def nonfinite_lit64(self, bits: int) -> str:
        return self.bitcast("f64", self.u64_lit(bits))

    # ---- conversions -----------------------------------------------------------------------

    def conv(self, key: str, e: str) -> str:
        """Value conversion (float->int truncates) to type ``key``."""
        return f"{self.t(key)}({e})"

    def bitcast(self, key: str, e: str) -> str:
        raise NotImplementedError

    def f16_round(self, e: str) -> str:
        """An f32 value rounded to f16 and back (the reference rounds after every f16 op)."""
        raise NotImplementedError

    def shuffle_xor(self, e: str, mask: str, key: str) -> str:
        """The value of ``e`` (type ``key``) in the lane whose index is this one's xor ``mask``
        (a u32 expression); every lane of the subgroup executes it (see ``subgroup``)."""
        raise NotImplementedError

    def select(self, f: str, t: str, cond: str) -> str:
        return f"(({cond}) ? ({t}) : ({f}))"

    # ---- integer arithmetic the reference defines (two's-complement wrap) --------------------

    def int_binary(self, sym: str, a: str, b: str, key: str) -> str:
        """``a sym b`` (+ - * << on 32-bit integers) wrapping on overflow."""
        return f"({a} {sym} {b})"

    def int_abs(self, a: str) -> str:
        return f"abs({a})"

    # ---- declarations and statements ---------------------------------------------------------

    def let(self, name: str, key: str | None, e: str) -> str:
        """An immutable local (``key`` None: an index, u32)."""
        return f"{self.t(key or 'u32')} {name} = {e};"

    def var(self, name: str, key: str, e: str | None = None) -> str:
        return f"{self.t(key)} {name}" + (f" = {e};" if e is not None else ";")

    def loop(self, name: str, start: str, stop: str, step: str) -> str:
        """``for name in range(start, stop, step)`` (u32), the opening line."""
        return f"for (uint {name} = {start}; {name} < {stop}; {name} = {name} + {step}) {{"

    def function(self, name: str, params: list[tuple[str, str]], ret: str) -> str:
        """A helper function's opening line."""
        args = ", ".join(f"{self.t(k)} {p}" for p, k in params)
        return f"{self.t(ret)} {name}({args}) {{"

    # ---- the kernel ----------------------------------------------------------------------------

    # builtin id -> the language's u32 expression of it (see ``builtin``)
    _BUILTINS: dict[str, str] = {}

    def builtin(self, which: str) -> str:
        """A u32 expression of a builtin id: ``gx``/``gy`` global invocation, ``wx``/``wy``/
        ``wz`` workgroup, ``lx``/``ly`` local invocation, ``li`` local index."""
        return self._BUILTINS[which]

    def kernel(self, buffers: list[Buffer], shared: list[Shared], wg: tuple[int, int, int],
               prelude: list[str], body: list[str]) -> str:
        """The whole source: ``prelude`` (pragmas, helpers), buffers, shared arrays, the entry
        point ``main`` with workgroup size ``wg`` and ``body`` (already indented)."""
        raise NotImplementedError

    def guard(self, name: str, lines: list[str]) -> list[str]:
        """A helper's definition, guarded where the language has a preprocessor, so kernels
        can be concatenated into one compile."""
        return [f"#ifndef RLX_H_{name}", f"#define RLX_H_{name}", *lines, "#endif"]

    def enables(self, uses_f16: bool) -> list[str]:
        """Lines at the very top of the source (extensions)."""
        return []

    # ---- int8 kernels (gpu_common/int8.py) ---------------------------------------------------

    # the int8 path this dialect takes: "packed-dot" (a 4x8-bit dot product builtin) or "i32"
    int8_path = "i32"

    def dot4_i8(self, a: str, b: str) -> str | None:
        """The i32 dot product of two u32 words of four signed bytes each, as one builtin
        (WGSL ``dot4I8Packed``, SPIR-V ``OpSDot``), or None: the kernel unpacks with shifts."""
        return None

    def dot4_i8_acc(self, a: str, b: str, acc: str) -> str | None:
        """``acc`` plus that dot product as one builtin where the language accumulates in it
        (CUDA ``__dp4a``, HIP ``__builtin_amdgcn_sdot4``; wrapping like the reference), or
        None: ``acc + dot4_i8(a, b)``."""
        return None

    def dot4_decl(self) -> list[str]:
        """Module-scope lines the ``dot4_i8`` builtin needs (a declaration, a directive)."""
        return []

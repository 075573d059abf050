"""Prepacked GEMM weights: a parameter's op(B) in rlx_sgemm's panel layout (kind ``f32``), an
int8 weight in the int8 GEMM's panel layout (kind ``i8``, cpu/igemm_packed.py) or a convolution
filter in the blocked direct kernel's panels (kind ``conv``, cpu/conv_blocked.py), kept in the
arena.

rlx's own GEMM (sgemm.py) packs op(B) into 32-column panels on every call, and in the team
each thread packs all of it for its block of rows. When B is a graph parameter (a linear
layer's weight in an inference graph) that work is the same every call, so the program packs
it once, into a region at the end of its arena, and the GEMM reads the panels directly. On
MiniLM's shapes at 2 threads (128 x 1536 x 384, weights cold) this took a GEMM from 0.88 to
0.71 ms in a C harness.

Layout of the region (``base`` is the arena offset, 64-byte aligned)::

    base:            one pointer per packed weight: the parameter it was packed from
    base + header:   the packed weights, each 64-byte aligned

The entry point packs a weight again whenever its parameter pointer differs from the one
recorded, so the header is the binding's state: a caller that binds other arrays zeroes it
(``CProgram.bind_state``; the arena starts zeroed). A change written into a bound array in
place is not seen by the packed copy; bind a new array instead (``exe.params[name] = w``),
as with the WebGPU targets, which upload parameters once.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx_core.targets.cpu import bf16gemm, conv_blocked, igemm_packed, sgemm, winograd
from rlx_core.targets.cpu.env import env_flag


def prepack_enabled() -> bool:
    """False when ``RLX_NO_PREPACK=1``: every GEMM packs op(B) per call (for A/B timing)."""
    return not env_flag("RLX_NO_PREPACK", False)


def _align(n: int) -> int:
    return -(-n // 64) * 64


@dataclass(frozen=True)
class PackedWeight:
    """One parameter's op(B), as the GEMM that reads it sees it."""

    param: int  # index in graph.params
    name: str
    n: int
    k: int
    brk: int  # element (p, j) of op(B) is B[p * brk + j * brn]
    brn: int
    offset: int  # from the start of the packed data (past the header)
    kind: str = "f32"  # "f32": rlx_sgemm_pack_b's panels; "i8": rlx_igp_pack's (int8 GEMM);
    # "bf16": rlx_bf16_pack_b's 16-column panels of bf16 (k, k+1) pairs (bf16gemm.py);
    # "bf16f32": the same panels packed from an f32 weight, rounded to bf16 on the way;
    # "conv": rlx_cb_pack's panels of an n x k x kh x kw filter (n output channels, k input);
    # "wino4" / "wino2": a 3x3 filter transformed and packed by rlx_wg4_pack / rlx_wg2_pack;
    # "winolazy": a 3x3 filter packed by rlx_wg_lazy_pack (transformed in each call)
    kh: int = 1
    kw: int = 1

    @property
    def nbytes(self) -> int:
        if self.kind == "conv":
            return conv_blocked.packed_bytes(self.n, self.k, self.kh, self.kw)
        if self.kind == "winolazy":
            return winograd.lazy_packed_bytes(self.n, self.k)
        if self.kind.startswith("wino"):
            return winograd.packed_bytes(self.n, self.k, int(self.kind[4:]))
        if self.kind == "i8":
            return igemm_packed.packed_bytes(self.n, self.k)
        if self.kind in ("bf16", "bf16f32"):
            return bf16gemm.packed_bytes(self.n, self.k)
        return sgemm.packed_bytes(self.n, self.k)


class PackedWeights:
    """The weights one program prepacks, in order of first use."""

    def __init__(self) -> None:
        self.weights: list[PackedWeight] = []
        self._index: dict[tuple[int, int, int, int, int, str, int, int], int] = {}
        self._end = 0

    def __bool__(self) -> bool:
        return bool(self.weights)

    def add(self, param: int, name: str, n: int, k: int, brk: int, brn: int,
            kind: str = "f32", kh: int = 1, kw: int = 1) -> PackedWeight:
        """The packed copy of parameter ``param`` as op(B) (one per distinct layout)."""
        key = (param, n, k, brk, brn, kind, kh, kw)
        if key not in self._index:
            self._index[key] = len(self.weights)
            pw = PackedWeight(param, name, n, k, brk, brn, self._end, kind, kh, kw)
            self.weights.append(pw)
            self._end += _align(pw.nbytes)
        return self.weights[self._index[key]]

    @property
    def header_bytes(self) -> int:
        return _align(8 * len(self.weights))

    @property
    def nbytes(self) -> int:
        """The whole region: header and packed weights."""
        return self.header_bytes + self._end if self.weights else 0

    def pointer(self, prefix: str, pw: PackedWeight) -> str:
        """The C expression (in the entry point) of ``pw``'s packed panels. (Symbolic: the
        region's place and header size are known once every kernel is rendered.)"""
        ctype = {"i8": "const void*", "bf16": "const uint16_t*",
                 "bf16f32": "const uint16_t*"}.get(pw.kind, "const float*")
        return f"({ctype})(arena + {prefix}_PACKED_DATA + {pw.offset})"

    def defines(self, prefix: str, base: int) -> str:
        return (f"/* prepacked GEMM weights (prepack.py): {len(self.weights)} weight(s), "
                f"{self.nbytes} bytes at arena offset {base} */\n"
                f"#define {prefix}_PACKED {base}\n"
                f"#define {prefix}_PACKED_DATA {base + self.header_bytes}\n")

    def pack_statements(self, prefix: str) -> list[str]:
        """Entry-point lines packing each weight whose parameter pointer changed."""
        lines = ["    { /* prepack GEMM weights bound since the last call (prepack.py) */",
                 f"        const void** rlx_pk_src = (const void**)(arena + {prefix}_PACKED);"]
        for i, pw in enumerate(self.weights):
            # the parameter as the packing function reads it, and where its packed copy lies
            f32_src = f"(const float*)params[{pw.param}]"
            data = f"arena + {prefix}_PACKED_DATA + {pw.offset}"
            if pw.kind == "conv":
                call = f"rlx_cb_pack({pw.n}, {pw.k}, {pw.kh}, {pw.kw}, {f32_src}, (float*)({data}));"
            elif pw.kind == "winolazy":
                call = f"rlx_wg_lazy_pack({pw.n}, {pw.k}, {f32_src}, (float*)({data}));"
            elif pw.kind.startswith("wino"):
                call = f"rlx_wg{pw.kind[4:]}_pack({pw.n}, {pw.k}, {f32_src}, (float*)({data}));"
            elif pw.kind == "i8":
                call = (f"rlx_igp_pack({pw.n}, {pw.k}, (const int8_t*)params[{pw.param}], "
                        f"(void*)({data}));")
            elif pw.kind == "bf16":
                call = (f"rlx_bf16_pack_b({pw.n}, {pw.k}, (const uint16_t*)params[{pw.param}], "
                        f"{pw.brk}, {pw.brn}, (uint16_t*)({data}), 0, {pw.n});")
            elif pw.kind == "bf16f32":
                call = (f"rlx_bf16_pack_b_f32({pw.n}, {pw.k}, {f32_src}, {pw.brk}, {pw.brn}, "
                        f"(uint16_t*)({data}));")
            else:
                call = (f"rlx_sgemm_pack_b({pw.n}, {pw.k}, {f32_src}, {pw.brk}, {pw.brn}, "
                        f"(float*)({data}));")
            lines.append(f"        if (rlx_pk_src[{i}] != params[{pw.param}]) {{ "
                         f"{call} rlx_pk_src[{i}] = params[{pw.param}]; }}")
        lines.append("    }")
        return lines

    def describe(self) -> list[dict[str, object]]:
        """For Program.info: which parameters are packed, in what shape, how many bytes."""
        return [{"param": pw.name, "k": pw.k, "n": pw.n,
                 "transposed": pw.kind == "f32" and pw.brn != 1,
                 "bytes": pw.nbytes, "kind": pw.kind}
                | ({"kh": pw.kh, "kw": pw.kw} if pw.kind == "conv" or pw.kind.startswith("wino")
                   else {})
                for pw in self.weights]

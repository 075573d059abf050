"""CProgram: one rendered translation unit and everything a caller needs to embed and call it.

Entry point convention (the CPU runtime and the specialization cache both call it)::

    void <prefix>_run(const void* const* inputs,   /* graph.inputs order, contiguous     */
                      const void* const* params,   /* graph.params order                  */
                      void* const* outputs,        /* graph.outputs order, caller-owned   */
                      unsigned char* arena);       /* arena_bytes, 64-byte aligned        */
    int  <prefix>_error(int64_t* info);            /* 0, or 1 + kernel index of a runtime
                                                      error (info[0]=bad index, info[1]=size);
                                                      reading it clears it                 */
    void <prefix>_profile(double* seconds,         /* profiling mode only: accumulated wall  */
                          int64_t* calls);         /* seconds and calls per kernel           */

Buffers hold each dtype in its storage form: numpy's layout, bool as one byte 0/1, f16 as
IEEE half, bf16 as the top 16 bits of a float32 (the host keeps bf16 in float32, so callers
convert at the boundary).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlx_core.ir.graph import TensorType


@dataclass(frozen=True)
class CProgram:
    """One rendered C translation unit and what a host needs to build and call it: the source,
    its entry and error functions, the arena size, the input, parameter and output types, where
    each kernel sits in the source, and the headers and libraries it builds against."""

    source: str
    prefix: str
    entry: str
    error_fn: str
    arena_bytes: int
    input_types: tuple[TensorType, ...]
    param_names: tuple[str, ...]
    param_types: tuple[TensorType, ...]
    output_types: tuple[TensorType, ...]
    kernel_lines: dict[str, tuple[int, int]] = field(default_factory=dict)  # 1-based, inclusive
    kernel_sources: dict[str, str] = field(default_factory=dict)
    kernel_impl: dict[str, str] = field(default_factory=dict)
    kernel_kind: dict[str, str] = field(default_factory=dict)
    uses_blas: bool = False
    include_dirs: tuple[str, ...] = ()
    library_dirs: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()
    # prebuilt kernel objects the program links (cpu/kernel_library.py names)
    kernel_libraries: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    profile_fn: str = ""  # set in profiling mode: void f(double* seconds, int64_t* calls)
    # (offset, bytes) of arena state derived from the bound parameters (cpu/prepack.py): the
    # arena must start zeroed there, and a caller binding other parameters zeroes it again
    bind_state: tuple[int, int] = (0, 0)

    def shown_source(self) -> str:
        """The whole translation unit as people read it (``rlx compile --emit source``, the
        explorer): ``source`` with each kernel's head line taken from ``kernel_sources``, which
        names the user code the kernel came from (``from cell.py:5``). The compiled text leaves
        that out (c_common/renderer.located); the heads keep their one line, so a line number
        of either text is the same line of the other."""
        lines = self.source.split("\n")
        for name, (lo, _hi) in self.kernel_lines.items():
            shown = self.kernel_sources.get(name)
            if shown is not None and 0 < lo <= len(lines):
                lines[lo - 1] = shown.split("\n", 1)[0]
        return "\n".join(lines)

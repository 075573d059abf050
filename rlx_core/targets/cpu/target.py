"""CpuTarget: LIR -> C (one translation unit) -> cached shared object -> ctypes calls."""

from __future__ import annotations

import sys
from typing import Any

from rlx_core.errors import TargetUnavailableError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph
from rlx_core.targets.base import Program, Verification
from rlx_core.targets.cpu.env import env_choice, env_flag


class CpuTarget:
    """Generated C kernels (OpenMP outer loops, OpenBLAS GEMMs) compiled by the system cc."""

    name = "cpu"
    verification = Verification.EXECUTES
    description = ("generated C: fused loop nests with OpenMP, OpenBLAS (scipy-openblas32) for "
                   "f32/f64 matmul, compiled by the system C compiler into a cached .so")

    def available(self) -> tuple[bool, str]:
        if sys.platform == "emscripten":
            return False, "there is no C compiler under Pyodide / WebAssembly"
        try:
            import numpy  # noqa: F401  (the runtime passes numpy buffers to the kernels)
        except ImportError:
            return False, "numpy is not installed (the CPU runtime passes numpy buffers)"
        from rlx_core.targets.cpu.toolchain import compiler_status

        return compiler_status()

    def matmul_norms(self) -> tuple[str, ...]:
        """Row normalisations fused into the matmul kernel before them (passes/fuse.py): the
        residual add + layer norm after MiniLM's 384-column GEMMs normalise each block of
        whole rows while it is in cache. ``RLX_NO_NORM_EPILOGUE=1`` keeps them apart."""
        if env_flag("RLX_NO_NORM_EPILOGUE", False):
            return ()
        from rlx_core.targets.c_common.row_ops import NORMS

        return NORMS

    def matmul_in_place(self, k: Any) -> str | None:
        """The input matmul kernel ``k``'s GEMM may store its output over when that input is
        donated (runtime/donation.py asks), or None: an SGD update ``W - c * dot`` whose GEMM
        stores it from its tiles (cpu/update_store.py; the renderer refuses it where the store
        does not write it)."""
        from rlx_core.targets.cpu.update_store import updated_input

        return updated_input(k)

    def reduce_in_place(self, k: Any) -> str | None:
        """The input reduce kernel ``k`` may store its output over when that input is donated
        (runtime/donation.py asks), or None: one read only by the nodes after the sum at the
        output's own index, as an SGD update ``b - c * sum`` reads the bias (row_sums.py; the
        renderer refuses it unless the kernel is a row sum's combine, which stores each
        element once)."""
        from rlx_core.targets.cpu.row_sums import updated_input

        return updated_input(k)

    def arena_in_place(self, g: Graph, options: Any = None) -> Any:
        """Which kernels may write their output over an input that dies there
        (passes/plan_arena.py asks; inplace.py answers), or None for none."""
        from rlx_core.targets.cpu import inplace

        return inplace.rule(g, options)

    def kernel_order(self, g: Graph, options: Any = None) -> list[int]:
        """The order to run the kernels in (passes/plan_arena.py applies it before it plans):
        runs of small row-wise kernels kept together (row_split.schedule)."""
        from rlx_core.targets.cpu import row_split

        return row_split.schedule(g, *self._row_facts(g))

    def arena_phases(self, g: Graph, options: Any = None) -> list[tuple[int, int]]:
        """The kernel spans (first, last) the team runs as one phase split by rows
        (row_split.plan): passes/plan_arena.py keeps what they touch apart."""
        from rlx_core.targets.cpu import row_split

        types, small = self._row_facts(g)
        return row_split.phases(g, types, small)

    @staticmethod
    def _row_facts(g: Graph) -> tuple[dict, list[bool]]:
        """(value -> type, per kernel: under the team's split threshold) for row_split."""
        from rlx_core.targets.cpu.renderer import PARALLEL_MIN_WORK
        from rlx_core.targets.cpu.row_split import small_kernels

        types = {name: v.type for name, v in g.values().items()}
        return types, small_kernels(g, types, PARALLEL_MIN_WORK)

    def conv_pairs(self, options: Any = None) -> Any:
        """Which 1x1 convs added to another passes/conv_epilogue.py fuses into a conv2d_pair:
        a predicate of (outputs, channels, shortcut channels, shortcut stride), or None for
        none (cpu/conv_pair.py answers: where the blocked direct kernel runs and pays)."""
        from rlx_core.targets.cpu import conv_pair

        return conv_pair.rule(options)

    @property
    def caps(self) -> Any:
        from rlx_core.targets.cpu.caps import CAPS

        return CAPS

    def render_sources(self, lir: Graph) -> dict[str, str]:
        """Each kernel's C as the renderer writes it, without compiling (``rlx compile --emit
        source``, the explorer's side-by-side kernels). The build may differ where it probes
        the compiler (its own SGEMM micro-kernels replace generated matmul loops)."""
        from rlx_core.targets.cpu.blas import find_blas
        from rlx_core.targets.cpu.inplace import blocked_convs
        from rlx_core.targets.cpu.renderer import CpuRenderer

        blas, _ = find_blas()
        try:  # the build's blocked convolutions (the arena plan's in-place shares need them)
            simd = blocked_convs(None)
        except TargetUnavailableError:
            simd = False
        cprog = CpuRenderer(blas, openmp=True, simd_conv=simd).render_program(lir,
                                                                              "rlx_" + lir.name)
        return dict(cprog.kernel_sources)

    def build(self, lir: Graph, options: Any = None) -> Program:
        from rlx_core.targets.cpu import kernel_library, sgemm
        from rlx_core.targets.cpu.blas import find_blas
        from rlx_core.targets.cpu.cached_build import BuildResult, build_shared
        from rlx_core.targets.cpu.renderer import CpuRenderer
        from rlx_core.targets.cpu.runtime import LibraryLoadError, NativeProgram
        from rlx_core.targets.cpu.toolchain import find_compiler
        from rlx_core.targets.verified_files import quarantine

        ok, why = self.available()
        if not ok:
            raise TargetUnavailableError(f"target 'cpu' is not available: {why}",
                                         hint="install a C compiler (or set RLX_CC), or use "
                                              "target 'numpy'")
        comp = find_compiler()
        flags = getattr(options, "flags", None) or {}
        blas, blas_why = find_blas()
        if flags.get("no_blas"):
            blas, blas_why = None, "disabled by the no_blas compile flag"
        # RLX_CPU_PROFILE=1: time every kernel call (Program.info["profile"]() reads the totals);
        # thread: on the calling thread's CPU clock. Checked here, the one reader, also where the
        # profile flag turns profiling on (the value still picks the clock)
        mode = env_choice("RLX_CPU_PROFILE", ("0", "1", "thread"), unset="no profile")
        profile = bool(flags.get("profile")) or mode in ("1", "thread")
        clock = "CLOCK_THREAD_CPUTIME_ID" if mode == "thread" else "CLOCK_MONOTONIC"
        own, own_why = sgemm.available(comp, blas is not None)
        if own and flags.get("no_own_sgemm"):
            own, own_why = False, "disabled by the no_own_sgemm flag"
        from rlx_core.targets.cpu.prepack import prepack_enabled

        prepack = prepack_enabled() and not flags.get("no_prepack")
        renderer = CpuRenderer(blas, openmp=comp.openmp, profile=profile, profile_clock=clock,
                               own_sgemm=own, prepack=prepack,
                               simd_conv=comp.avx2_fma or comp.avx512,
                               link_prebuilt=kernel_library.enabled())
        cprog = renderer.render_program(lir, "rlx_" + lir.name)

        def build() -> BuildResult:
            # the prebuilt kernels it links (kernel_library.py): found, or compiled once, on a
            # miss of the program while its own source compiles
            objects = tuple(kernel_library.pending(name, comp)
                            for name in cprog.kernel_libraries)
            return build_shared(cprog.source, include_dirs=cprog.include_dirs,
                                library_dirs=cprog.library_dirs, libraries=cprog.libraries,
                                compiler=comp, objects=objects)

        built = build()
        try:
            native = NativeProgram(cprog, str(built.path), dict(lir.param_data))
        except LibraryLoadError as err:  # verified but unloadable (foreign file): build once more
            quarantine(built.path, err.message)
            built = build()
            native = NativeProgram(cprog, str(built.path), dict(lir.param_data))
        kernels = {}
        for k in lir.kernels:
            impl = cprog.kernel_impl[k.name]
            kernels[k.name] = {"kind": k.kind, "impl": impl, "lines": cprog.kernel_lines[k.name]}
        notes = list(comp.notes)
        if blas is None:
            notes.append(f"no BLAS ({blas_why}): matmuls use generated loop kernels")
        info = {
            "compiler": comp.path, "compiler_version": comp.version.splitlines()[0],
            "flags": list(comp.flags), "openmp": comp.openmp,
            "blas": blas.describe() if blas else None, "blas_reason": blas_why,
            "own_sgemm": own, "own_sgemm_reason": own_why,
            "own_sgemm_isa": sgemm.isa(comp) if own else None,
            "prepacked": renderer.packed.describe(),
            "nchw8c": renderer.blocked_values,  # activations kept blocked (layout.py)
            "cache": "hit" if built.cache_hit else "miss", "so_path": str(built.path),
            "cache_key": built.key, "arena_bytes": cprog.arena_bytes, "kernels": kernels,
            "entry": cprog.entry, "notes": notes, "source": cprog.source,
        }
        if profile:
            info["profile"] = native.profile
        # bf16 inputs still need their storage form (run converts them)
        checked = None if any(t.dtype == dt.bf16 for t in cprog.input_types) else native.run_checked
        return Program(run_fn=native.run, sources=dict(cprog.kernel_sources), info=info,
                       run_checked_fn=checked)

    def __repr__(self) -> str:
        return "CpuTarget()"

"""The CPU renderer: C with OpenMP outer loops and OpenBLAS GEMMs, on the shared C base.

``render_program(lir, prefix)`` is the public entry: one translation unit per LIR graph (see
rlx_core/targets/c_common/program.py for the entry-point convention), so it can be compiled
here or embedded in another module (the specialization cache does).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph, Kernel, Node, TensorType
from rlx_core.targets.c_common.expr import RenderError
from rlx_core.targets.c_common.kernels import ROW_ARGS, KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.c_common.matmul import BlockEpilogue, GemmSpec
from rlx_core.targets.c_common.names import c_comment, c_ident
from rlx_core.targets.c_common.program import CProgram
from rlx_core.targets.c_common.renderer import CLikeRenderer, written_over
from rlx_core.targets.cpu import (
    attention,
    bf16gemm,
    conv,
    conv_blocked,
    conv_pair,
    depthwise,
    epilogue_erf,
    gemv,
    i4gemm,
    igemm,
    igemm_packed,
    inplace,
    isa,
    kernel_library,
    lapack,
    layout,
    pool,
    row_split,
    row_sums,
    sgemm,
    sparse,
    splat,
    team,
    team_runtime,
    team_waits,
    winograd,
)
from rlx_core.targets.cpu.blas import (
    TEAM_GEMM_MIN,
    BlasInfo,
    blas_takes,
    emit_gemm,
    find_blas,
    work_of,
)
from rlx_core.targets.cpu.prepack import PackedWeight, PackedWeights, prepack_enabled

# below this many elements per kernel, thread start-up costs more than it saves
PARALLEL_MIN_WORK = 1 << 15


class CpuRenderer(CLikeRenderer):
    """C11 (GNU dialect for _Float16) with ``#pragma omp`` and CBLAS calls."""

    name = "cpu"
    no_call_impls = ("alias", bf16gemm.FOLDED)
    hoist_bytes = 16384  # a third of L1d (kernels._hoisted)

    def __init__(self, blas: BlasInfo | None, openmp: bool = True,
                 parallel_min_work: int = PARALLEL_MIN_WORK, profile: bool = False,
                 profile_clock: str = "CLOCK_MONOTONIC",
                 own_sgemm: bool = False, prepack: bool = True,
                 simd_conv: bool = False, in_place: dict[str, str] | None = None,
                 link_prebuilt: bool = False):
        super().__init__(in_place)
        # the blocked conv's rlx_cb_conv2 from the prebuilt object (kernel_library.py), which
        # the build links, not compiled in this program
        self.link_prebuilt = link_prebuilt
        self.blas = blas
        self.own_sgemm = own_sgemm  # f32 GEMMs on rlx's AVX-512 or AVX2 kernel (sgemm.py)
        # parameters the own kernel takes as B are packed once per binding (prepack.py)
        self.prepack = prepack and own_sgemm
        self.prepack_bf16 = prepack  # bf16 weights for the bf16 GEMM (bf16gemm.py)
        self.prepack_int8 = prepack  # int8 weights for the packed int8 GEMM (igemm_packed.py)
        # parameter filters for the blocked direct conv, where the compiler targets AVX2 + FMA
        # (or AVX-512): it needs no BLAS (conv_blocked.py)
        self.prepack_conv = prepack and simd_conv
        self.packed = PackedWeights()
        self._streams: dict[int, PackedWeight] = {}  # kernel -> its first packed weight
        self._params: dict[str, int] = {}  # graph parameter -> index in graph.params
        self._blocked: set[str] = set()  # values kept in NCHW8c (layout.py)
        self._graph: Graph | None = None  # the graph being rendered
        self._prefix = "rlx"
        self.parallel_min_work = parallel_min_work
        self.profile = profile
        # CLOCK_THREAD_CPUTIME_ID (RLX_CPU_PROFILE=thread): with a team, thread 0's CPU time
        self.profile_clock = profile_clock
        # one team call per program call (team.py); profiling times each kernel on thread 0.
        # Without OpenMP (or with no kernel worth splitting: render_program) the program runs
        # serial on the calling thread
        self.team_mode = openmp
        self._mode = "team" if self.team_mode else "serial"
        self._team: list[bool] = []  # per kernel, in order: runs on the whole team?
        self._claims: list[bool] = []  # per kernel: is its work claimed (team.claimed)?
        self._ends: list[int | None] = []  # per claimed kernel: its chunk count (last done)
        self._scratch: dict[int, int] = {}  # kernel -> where the scratch area it uses begins
        self._splits = False  # does any kernel share its work out over the team?
        self._folded: dict[str, str] = {}  # cast output -> f32 weight (bf16gemm.foldable_casts)
        # runs of small row-wise kernels shared out by rows (row_split.py): first -> group
        self._row_groups: dict[int, row_split.RowGroup] = {}
        self._row_kernels: set[int] = set()  # their kernels
        # kernels summing over a run's rows, taken block by block in the run (row_sums.py)
        self._row_sums: dict[int, row_sums.RowSum] = {}

    def parallel_pragma(self, work: int, collapse: int) -> str | None:
        if self._mode == "team":
            if work < self.parallel_min_work:
                return team.SINGLE_PRAGMA
            self._splits = True
            return team.FOR_PRAGMA
        return None  # serial: the program runs on the calling thread

    def render_program(self, g: Graph, prefix: str = "rlx") -> Any:
        cprog = self._render(g, prefix)
        if self.team_mode and not self._splits:
            # no kernel shares work out (all below the thresholds): the program runs on the
            # calling thread with no team call, so a tiny call wakes no thread and
            # pays no barrier (team.py's team call costs ~1-3 us even when one thread works)
            self.team_mode, self._mode = False, "serial"
            try:
                cprog = self._render(g, prefix)
            finally:
                self.team_mode, self._mode = True, "team"
        return cprog

    def _plan_rows(self, g: Graph) -> dict[int, row_split.RowGroup]:
        """The runs of small row-wise kernels the team shares out by rows (row_split.plan)."""
        where, _ = self.places(g)
        types = {name: v.type for name, v in g.values().items()}
        # an aliased reshape (the arena placed it on its input: no call) joins no run
        small = [s and not self.aliased(g, k) for s, k in zip(
            row_split.small_kernels(g, types, self.parallel_min_work), g.kernels, strict=True)]
        return row_split.plan(g, types, self._region_of(where, types), small)

    def _plan_row_sums(self, g: Graph) -> dict[int, row_sums.RowSum]:
        """The kernels after a run that sum over its rows block by block in it
        (row_sums.plan); a GEMM's needs the own sgemm or a BLAS."""
        types = {name: v.type for name, v in g.values().items()}
        found = row_sums.plan(g, types, self._row_groups)
        return {i: rs for i, rs in found.items() if not rs.gemm or self._own_sum(rs)
                or self.blas is not None}

    def _own_sum(self, rs: row_sums.RowSum) -> bool:
        """Do a sum's block GEMMs run on the own sgemm (else on the BLAS)?"""
        return self.own_sgemm and sgemm.takes(dt.f32, rs.shape[1])

    def own_kernel(self, env: KernelEnv, w: Writer, params: list[str]) -> str | None:
        rs = self._row_sums.get(env.index)
        if rs is None or env.rows is not None:
            return None
        own = rs.gemm and self._own_sum(rs)
        return row_sums.emit(env, w, rs, self._prefix, params, "rlx_sgemm" if own else None,
                             self.blas.symbol_prefix if self.blas is not None else None)

    def _region_of(self, where: dict, types: dict):
        """value -> the bytes it occupies (team_waits.Region): its arena byte range, or its whole
        caller buffer (an output written over a donated input is that input)."""
        whole = 1 << 62

        def region(v: str) -> team_waits.Region:
            place = where[self.in_place.get(v, v)]
            if place.space == "arena":
                return ("arena", 0, place.index, place.index + max(types[v].nbytes, 1))
            return (place.space, place.index, 0, whole)
        return region

    def row_split(self, idx: int) -> bool:
        return idx in self._row_kernels

    @property
    def blocked_values(self) -> list[str]:
        """The values the last rendered program keeps in NCHW8c (layout.py), sorted."""
        return sorted(self._blocked)

    @property
    def splits(self) -> bool:
        """Did the last rendered program share work out over a team (make a team call)?"""
        return self.team_mode and self._splits

    def _render(self, g: Graph, prefix: str) -> Any:
        self._team = []
        self._claims = []
        self._ends = []
        self._scratch = {}
        self._splits = False
        self.packed = PackedWeights()
        self._streams = {}
        self._params = {v.name: i for i, v in enumerate(g.params)}
        self._prefix = c_ident(prefix, "p")  # as the base renderer spells it
        # the activations kept in NCHW8c between blocked kernels (layout.py)
        self._graph = g
        self._row_groups = self._plan_rows(g) if self.team_mode else {}
        self._row_kernels = {i for grp in self._row_groups.values() for i in grp.kernels}
        self._row_sums = self._plan_row_sums(g)
        # bf16 casts of f32 weights whose GEMMs pack the weight themselves (bf16gemm.py)
        self._folded = bf16gemm.foldable_casts(g) if self.prepack_bf16 else {}
        self._blocked = (layout.plan(g, layout.conv_kind_of(g))
                         if self.prepack_conv and layout.enabled() else set())
        cprog = super().render_program(g, prefix)
        # the headers are written before the kernels: drop the GEMM and attention sources
        # when no kernel calls them (parsing immintrin.h costs every compile ~0.2 s)
        impls = set(cprog.kernel_impl.values())
        unused = [] if attention.IMPL in impls else [attention.SOURCE]
        unused += [m.SOURCE for m in (i4gemm, splat, pool) if m.IMPL not in impls]
        if not impls & set(bf16gemm.IMPLS.values()):
            unused.append(bf16gemm.SOURCE)
        # the blocked and depthwise kernels use conv.SOURCE
        if not impls & {*conv.IMPLS, *conv_blocked.IMPLS, *depthwise.IMPLS, *winograd.IMPLS}:
            unused += [conv.SOURCE, conv_blocked.SOURCE, depthwise.SOURCE]
        elif not impls & {*conv_blocked.IMPLS, *winograd.IMPLS}:
            unused.append(conv_blocked.SOURCE)
        if self.link_prebuilt and not self._links_conv(impls):
            unused.append(kernel_library.EXTERN_DEFINE)
        if not impls & set(winograd.IMPLS):
            unused.append(winograd.SOURCE)
        int8 = {igemm.IMPL, igemm_packed.IMPL, igemm_packed.DYNAMIC_IMPL,
                igemm_packed.STATIC_IMPL, igemm_packed.REQUANT_IMPL}
        if not impls & (int8 - {igemm.IMPL}):
            unused.append(igemm_packed.SOURCE)
        if not impls & int8:
            unused.append(igemm.SOURCE)  # the packed GEMM uses its ISA pick
        if self.blas is not None and not any(i.startswith(lapack.IMPL) for i in impls):
            unused.append(lapack.source(self.blas.symbol_prefix))
        if gemv.IMPL not in impls:
            unused.append(gemv.SOURCE)
        if not impls & {sgemm.IMPL, gemv.IMPL, attention.IMPL, row_sums.IMPL_SGEMM, *conv.IMPLS,
                        *conv_blocked.IMPLS, *winograd.IMPLS}:
            unused.append(sgemm.SOURCE)
        for text in unused:
            cut = text.count("\n")  # every kernel comes after the headers
            cprog = dataclasses.replace(
                cprog, source=cprog.source.replace(text, "", 1),
                kernel_lines={k: (lo - cut, hi - cut) for k, (lo, hi) in cprog.kernel_lines.items()})
        return cprog

    def composite(self, env: KernelEnv, w: Writer, node: Node) -> str | None:
        if node.op == "attention":
            return attention.emit_attention(env, w, node)
        if node.op == "conv2d_pair":
            return conv_pair.emit_pair(env, w, node, self.packed_pair(env, node),
                                       layout.lay_of(node, self._blocked))
        if node.op in conv.OPS:
            lay = layout.lay_of(node, self._blocked)
            g = self._graph
            assert g is not None
            if node.name in written_over(g) and not inplace.conv_in_place(g, node, self._blocked):
                raise RenderError(f"{node.name}: the arena plan writes this convolution over "
                                  "its residual, which only its blocked NCHW8c kernel allows",
                                  hint="compile and render with the same options (inplace.py "
                                       "asked with them); RLX_ARENA_INPLACE=0 turns it off")
            return conv.emit_conv(env, w, node, self.packed_conv(env, node, lay), lay)
        if node.op in pool.OPS:
            return pool.emit_pool(env, w, node, node.name in self._blocked)
        if node.op == "int_linear":
            return igemm.emit_int_linear(env, w, node, self.packed_int8(env, node))
        if node.op == "dynamic_int_linear":
            return igemm.emit_dynamic_int_linear(env, w, node, self.packed_int8(env, node))
        if node.op == "static_int_linear":
            return igemm.emit_static_int_linear(env, w, node, self.packed_int8(env, node))
        if node.op == "requantized_int_linear":
            return igemm.emit_requantized_int_linear(env, w, node, self.packed_int8(env, node))
        if node.op == "int4_linear":
            return i4gemm.emit_int4_linear(env, w, node)
        if node.op in splat.OPS:
            return splat.emit_splat(env, w, node)
        if node.op in sparse.OPS:
            return sparse.emit_sparse(env, w, node, self._counter(env))
        if node.op in lapack.OPS:
            if self.blas is None:
                raise RenderError(f"{node.op} needs LAPACK, and the BLAS library is not "
                                  f"available ({find_blas()[1]})")
            return lapack.emit_linalg(env, w, node)
        return None

    def bound_region(self, prefix: str, base: int) -> tuple[int, str]:
        if not self.packed:
            return 0, ""
        return self.packed.nbytes, self.packed.defines(prefix, base)

    def kernel_sync(self) -> str:
        return team.SYNC if self._mode == "team" else ""

    def render_kernel(self, g: Graph, k: Kernel, idx: int, prefix: str,
                      types: dict[str, TensorType], fail: str) -> tuple[str, str, int]:
        if k.outputs and k.outputs[0] in self._folded:
            self._team.append(False)
            self._claims.append(False)
            self._ends.append(None)
            self._extra_args[k.name] = []
            return (f"/* kernel {c_comment(k.name)} ({k.kind}, {bf16gemm.FOLDED}): cast -> "
                    f"{c_comment(k.outputs[0])} is not run: the bf16 GEMMs reading it pack "
                    f"{c_comment(self._folded[k.outputs[0]])} from f32 once per binding "
                    f"(bf16gemm.py) */\n"
                    f"{self.kernel_decl} {self.kernel_fn(prefix, k)}(unsigned char* scratch) "
                    f"{{\n    (void)scratch;\n}}\n", bf16gemm.FOLDED, 0)
        if not self.team_mode:
            return super().render_kernel(g, k, idx, prefix, types, fail)
        if idx in self._row_kernels or idx in self._row_sums:
            # its rows per call, one thread each (entry's claim loop); or the combine of a
            # sum over a run's rows (row_sums.py), one thread's serial kernel
            self._mode = "serial"
            out = super().render_kernel(g, k, idx, prefix, types, fail)
            self._team.append(False)
            self._claims.append(False)
            self._ends.append(None)
            self._mode = "team"
            return out
        self._mode = "team"
        out = super().render_kernel(g, k, idx, prefix, types, fail)
        lines = out[0].rstrip("\n").split("\n")  # [file-scope helpers,] comment, head, body, }
        head = f"{self.kernel_decl} {self.kernel_fn(prefix, k)}("
        body = lines[next(i for i, t in enumerate(lines) if t.startswith(head)) + 1:-1]
        claimed = None
        if not team.team_safe(body) or team.one_chunk(claimed := team.claimed(body)):
            # one thread runs it, so it must hold no worksharing pragma; a kernel whose work
            # is one claimed chunk runs serial too, so that it joins its serial neighbours'
            # one chunk (team_calls) instead of ending a phase of its own
            self._mode = "serial"
            claimed = None
            out = super().render_kernel(g, k, idx, prefix, types, fail)
        elif claimed is not None:
            out = (self._claiming(lines, len(lines) - len(body) - 1, claimed, k.name, idx),
                   *out[1:])
        self._team.append(self._mode == "team")
        self._claims.append(claimed is not None)
        done = team.last_done(claimed)
        self._ends.append(done)
        self._mode = "team"
        return out

    def call(self, k: Kernel, idx: int, prefix: str, types: dict[str, TensorType],
             where: dict[str, Any], arena_end: int, scratch: bool) -> str:
        if scratch:
            self._scratch[idx] = arena_end  # the scratch area is a write (footprints)
        return super().call(k, idx, prefix, types, where, arena_end, scratch)

    def _footprints(self, g: Graph, where: dict, types: dict) -> list[team_waits.Footprint | None]:
        """What each kernel call reads and writes (team.team_calls leaves out the wait at a
        claimed kernel's end when the next one touches nothing of it). Arena values are their
        byte ranges; inputs, parameters and outputs are whole buffers, an output written over
        a donated input is that input; the scratch area is a write of everything past the
        planned values; a prepacked weight is a read of its packed bytes (packed by the calling
        thread before the team starts, so no kernel writes them: Q's wait can move past K and V,
        which read the same activation with weights of their own). Unknown (None): a kernel
        with any other argument beyond its buffers and claim counters."""
        whole = 1 << 62
        region = self._region_of(where, types)
        packed = {self.packed.pointer(self._prefix, pw): ("packed", 0, pw.offset,
                                                          pw.offset + pw.nbytes)
                  for pw in self.packed.weights}
        feet: list[team_waits.Footprint | None] = []
        for idx, k in enumerate(g.kernels):
            extra = [a for a in self._extra_args.get(k.name, [])
                     if a != self._counter_of(idx) and a not in ROW_ARGS]
            if any(a not in packed for a in extra):
                feet.append(None)
                continue
            writes = [region(v) for v in k.outputs]
            if idx in self._scratch:
                writes.append(("arena", 0, self._scratch[idx], whole))
            reads = (*(region(v) for v in k.inputs), *(packed[a] for a in extra))
            feet.append(team_waits.Footprint(reads, tuple(writes)))
        return feet

    def _claiming(self, lines: list[str], at: int, body: list[str], kernel: str,
                  idx: int) -> str:
        """A kernel's text with ``body`` (team.claimed) after its head line ``lines[at - 1]``,
        taking the claim counters as a parameter when it did not yet."""
        head = lines[at - 1]
        if team.CLAIM not in head:
            cut = head.rindex(", unsigned char*")
            lines[at - 1] = f"{head[:cut]}, {team.CLAIM}{head[cut:]}"
            self._extra_args[kernel].append(self._counter_of(idx))
        return "\n".join([*lines[:at], *body, "}"]) + "\n"

    def entry(self, g: Graph, prefix: str, calls: list[str], where: dict, types: dict) -> str:
        # weights are packed by the calling thread, before any kernel (and the team) runs
        pack = self.packed.pack_statements(prefix) if self.packed else []
        if not self.team_mode:
            return super().entry(g, prefix, pack + calls, where, types)
        text = super().entry(g, prefix, pack + ["@CALLS@"], where, types)
        timer = None
        if self.profile:
            def timer(i: int) -> tuple[str, str]:
                return (f"rlx_team_t0 = {prefix}_now();",
                        f"{{ {prefix}_prof_s[{i}] += {prefix}_now() - rlx_team_t0; "
                        f"++{prefix}_prof_n[{i}]; }}")
        calls, is_team, claims, ends = list(calls), list(self._team), list(self._claims), \
            list(self._ends)
        feet = self._footprints(g, where, types)
        region = self._region_of(where, types)
        for first, grp in self._row_groups.items():  # each run: one claimed kernel's call
            sums = {i: rs for i, rs in self._row_sums.items() if rs.run == first}
            blocks = [row_sums.block_call(prefix, i, self.buffer_args(g.kernels[i], where, types))
                      for i in sums]
            calls[first] = "        " + row_split.group_call(
                grp, [calls[i] for i in grp.kernels] + blocks, self._counter_of(first))
            for i in grp.kernels[1:]:
                calls[i] = ""
            is_team[first], claims[first], ends[first] = True, True, grp.blocks
            # the run reads the sums' operands and writes their partials, which the combines
            # read (so a combine waits for the run)
            part = {i: ("rowsum", i, 0, 1 << 62) for i in sums}
            feet[first] = team_waits.union([feet[i] for i in grp.kernels] + [
                team_waits.Footprint(tuple(region(v) for v in rs.operands), (part[i],))
                for i, rs in sums.items()])
            for i, rs in sums.items():
                k = g.kernels[i]
                feet[i] = team_waits.Footprint(
                    (*(region(v) for v in k.inputs if v not in rs.operands), part[i]),
                    tuple(region(v) for v in k.outputs))
        streams = [team_waits.Stream(f"arena + {prefix}_PACKED_DATA + {pw.offset}", pw.nbytes)
                   if (pw := self._streams.get(i)) else None for i in range(len(calls))]
        inner = team.team_calls(calls, is_team, timer, claims, prefix, feet, ends, streams)
        # every kernel claims its work (or is serial): the team is the worker pool
        pool = all(c or not t for c, t in zip(claims, is_team, strict=True))
        body = "\n".join(team.region(inner, bool(timer), prefix, len(g.kernels), pool))
        return (team.work_counters(prefix, len(g.kernels))
                + (team.body_function(inner, prefix, bool(timer)) if pool else "")
                + text.replace("@CALLS@", body, 1))

    def timed(self, prefix: str, idx: int, call: str) -> str:
        # in team mode every thread runs the call; entry() times it on thread 0 instead
        return call if self.team_mode else super().timed(prefix, idx, call)

    def gemm(self, w: Writer, env: KernelEnv, spec: GemmSpec,
             epilogue: BlockEpilogue | None = None) -> str | None:
        # every GEMM kernel's epilogue renders its erf (MiniLM's GELU) with the GEMM
        # epilogue's own (epilogue_erf), however the GEMM is split: a one-chunk (serial)
        # kernel and a team one give the same bits
        env.erf = epilogue_erf.choice()
        if bf16gemm.takes(spec):  # bf16 dot products on AMX or AVX512-BF16 (bf16gemm.py)
            if self._mode == "team" and work_of(spec) >= TEAM_GEMM_MIN:
                self._splits = True
            return bf16gemm.emit(w, env, spec, epilogue, self.packed_bf16(env, spec),
                                 self._counter(env))
        if self.blas is None or not blas_takes(spec):
            return None
        counter = self._counter(env)
        if self._mode == "team" and work_of(spec) >= TEAM_GEMM_MIN:
            self._splits = True  # below it a team GEMM runs on thread 0 alone (blas._alone)
        return emit_gemm(w, env, spec, self.blas, self.own_sgemm, epilogue,
                         self.packed_b(env, spec), counter)

    def _counter(self, env: KernelEnv) -> str:
        """The C expression of the kernel's claim counters (team mode), else ''."""
        return self._counter_of(env.index) if self._mode == "team" else ""

    def _counter_of(self, idx: int) -> str:
        return f"{self._prefix}_work + {2 * idx}"  # claimed, done (team.work_counters)

    def _add_packed(self, env: KernelEnv, *args: Any, **kw: Any) -> PackedWeight:
        """``self.packed.add``, noting the kernel's first packed weight: the weight it streams
        from memory each call, which the team prefetches while it waits (team_waits.Stream)."""
        pw = self.packed.add(*args, **kw)
        self._streams.setdefault(env.index, pw)
        return pw

    def packed_b(self, env: KernelEnv, spec: GemmSpec) -> str | None:
        """The kernel parameter holding op(B) prepacked, when B is a graph parameter the own
        kernel reads (one batch); it is added to the kernel's parameters here."""
        if not (self.prepack and spec.batch == 1 and sgemm.takes(spec.dtype, spec.n)):
            return None
        value = next((v for v, buf in env.inputs.items() if buf.ptr == spec.b), None)
        if value not in self._params:
            return None  # an activation, or a layout copy of the weight
        brk, brn = spec.sb.row, spec.sb.col  # (p, j) of op(B) at B[p * brk + j * brn]
        if gemv.reads_in_place(spec.m, spec.n, spec.k, spec.batch, spec.sa.col, brk):
            return None  # a GEMV on a weight over L3: W's rows read where they lie (gemv.py)
        pw = self._add_packed(env, self._params[value], value, spec.n, spec.k, brk, brn)
        name = f"{spec.b}_packed"
        env.extra_args.append((f"const float* restrict {name}",
                               self.packed.pointer(self._prefix, pw)))
        return name

    def packed_bf16(self, env: KernelEnv, spec: GemmSpec) -> str | None:
        """The kernel parameter holding a bf16 GEMM's op(B) in bf16gemm's panels, when B is a
        graph parameter (one batch); added to the kernel's parameters here."""
        if not (self.prepack_bf16 and spec.batch == 1):
            return None
        value = next((v for v, buf in env.inputs.items() if buf.ptr == spec.b), None)
        kind = "bf16"
        if value in self._folded:  # a weight's cast the GEMM takes over: pack from f32
            value, kind = self._folded[value], "bf16f32"
        if value not in self._params:
            return None
        pw = self._add_packed(env, self._params[value], value, spec.n, spec.k, spec.sb.row,
                             spec.sb.col, kind)
        name = f"{spec.b}_bfpacked"
        env.extra_args.append((f"const uint16_t* restrict {name}",
                               self.packed.pointer(self._prefix, pw)))
        return name

    def packed_conv(self, env: KernelEnv, node: Node, lay: int = 0) -> conv.PackedFilter | None:
        """A convolution's filter packed for the blocked direct kernel (conv_blocked.py) or
        transformed for Winograd (winograd.py), when the filter is a graph parameter and the
        kernel is chosen for the shape (conv_blocked.use_blocked, conv.winograd_tile) or a side
        is NCHW8c (``lay``): the one place the conv's kernel is decided (conv.PackedFilter)."""
        wname = node.inputs[1]
        if not self.prepack_conv or wname not in self._params or node.type.dtype.name != "f32":
            return None
        x, wt = env.inputs[node.inputs[0]], env.inputs[wname]
        o, c, kh, kw = wt.type.shape
        sh, sw = (int(v) for v in node.attr("stride"))
        oh, ow = node.type.shape[2:]
        groups = int(node.attr("groups"))
        # a Winograd conv's filter transformed and packed per position (winograd.py)
        m = conv.winograd_tile_of(node, x.type.shape, wt.type.shape)
        if groups != 1 or not (lay or m or conv_blocked.use_blocked(
                int(x.type.shape[1]), o, groups, kh, kw, sh, sw, oh, ow)):
            return None
        # (or packed for the direct kernel, transformed in each call: few tiles)
        lazy = m and winograd.filter_on_the_fly(m, int(x.type.shape[0]), c, o, oh, ow)
        name = self._packed_filter(env, wname, "winolazy" if lazy else f"wino{m}" if m else "conv")
        return conv.PackedFilter(name, m, bool(lazy))

    def _packed_filter(self, env: KernelEnv, wname: str, kind: str) -> str:
        """The kernel parameter holding parameter filter ``wname`` packed as ``kind``."""
        wt = env.inputs[wname]
        o, c, kh, kw = wt.type.shape
        pw = self._add_packed(env, self._params[wname], wname, o, c, 0, 0, kind, kh, kw)
        name = f"{wt.ptr}_cbpacked"
        env.extra_args.append((f"const float* restrict {name}",
                               self.packed.pointer(self._prefix, pw)))
        return name

    def packed_pair(self, env: KernelEnv, node: Node) -> tuple[str, str]:
        """Both filters of a conv2d_pair packed for the blocked direct kernel (conv_pair.py:
        passes/conv_epilogue.py made the pair only where conv_pair.enabled said so)."""
        filters = (node.inputs[1], node.inputs[4])
        if not self.prepack_conv or any(f not in self._params for f in filters):
            raise RenderError(f"{node.name}: conv2d_pair needs both filters prepacked for the "
                              "blocked direct kernel",
                              hint="compile and render with the same options; RLX_CONV_PAIR=0 "
                                   "keeps the two convolutions apart")
        first, second = (self._packed_filter(env, f, "conv") for f in filters)
        return first, second

    def packed_int8(self, env: KernelEnv, node: Node) -> str | None:
        """The kernel parameter holding ``int_linear``'s (or ``dynamic_int_linear``'s,
        ``static_int_linear``'s or ``requantized_int_linear``'s) weight
        packed for the register-tiled int8 GEMM (igemm_packed.py), when the weight is a graph
        parameter of signed bytes."""
        wt = env.inputs[node.inputs[1]]
        if (not self.prepack_int8 or node.inputs[1] not in self._params
                or wt.type.dtype.name != "i8" or wt.type.rank != 2):
            return None
        n, k = wt.type.shape
        pw = self._add_packed(env, self._params[node.inputs[1]], node.inputs[1], n, k, k, 1, "i8")
        name = f"{wt.ptr}_i8packed"
        env.extra_args.append((f"const void* restrict {name}",
                               self.packed.pointer(self._prefix, pw)))
        return name

    def extra_headers(self) -> list[str]:
        # one thread count per translation unit (several programs may share one)
        threads = ("#ifndef RLX_CPU_THREADS_H\n#define RLX_CPU_THREADS_H\n"
                   "#ifdef _OPENMP\n#include <omp.h>\n#endif\n"
                   "static int rlx_cpu_threads = 0;  /* 0: the OpenMP default */\n"
                   "#define RLX_TEAM (rlx_cpu_threads > 0 ? rlx_cpu_threads : "
                   "omp_get_max_threads())\n#endif\n")
        if self.team_mode:  # (the lines a waiting thread prefetches per spin: team_waits.py)
            threads += (f"#ifndef RLX_TEAM_PF_LINES\n#define RLX_TEAM_PF_LINES "
                        f"{team_waits.wait_prefetch_lines()}\n#endif\n" + team_runtime.BARRIER_C)
        # rlx's GEMM (its plain-C form where there is no AVX2), the attention kernel built
        # on it, the int8 GEMM and the int4 matmul; render_program drops them when unused
        # (its blocking from this machine's caches, isa.gemm_blocking)
        threads += (isa.blocking().defines() + sgemm.defines() + sgemm.SOURCE + gemv.defines()
                    + gemv.SOURCE
                    + attention.SOURCE + conv.SOURCE
                    + (kernel_library.EXTERN_DEFINE if self.link_prebuilt else "")
                    + conv_blocked.SOURCE + winograd.SOURCE + depthwise.SOURCE
                    + pool.SOURCE + bf16gemm.SOURCE + igemm.SOURCE + igemm_packed.SOURCE
                    + i4gemm.SOURCE + splat.SOURCE)
        if self.blas is None:
            return [threads, "/* BLAS unavailable: matmul kernels are generated loop nests */\n"]
        # LAPACK on the same library, for the dense linear algebra ops (cpu/lapack.py)
        threads += lapack.source(self.blas.symbol_prefix)
        return [threads,
                f"/* BLAS: {self.blas.describe()} (symbols {self.blas.symbol_prefix}cblas_*) */\n"
                "#include <cblas.h>\n"
                f"void {self.blas.symbol_prefix}openblas_set_num_threads(int);\n"]

    def extra_functions(self, prefix: str) -> str:
        """``<prefix>_threads(n)``: the OpenMP team size; OpenBLAS stays on one thread.

        GEMMs are split over the OpenMP team by the kernels themselves (blas.emit_gemm), so
        OpenBLAS's own pool never runs beside OpenMP's.
        """
        blas = f"    {self.blas.symbol_prefix}openblas_set_num_threads(1);\n" if self.blas else ""
        return (f"void {prefix}_threads(int n) {{\n    rlx_cpu_threads = n > 0 ? n : 1;\n"
                f"{blas}}}\n" + team_runtime.team_functions(prefix, self.team_mode))

    def _links_conv(self, impls: set[str]) -> bool:
        """Does the program call rlx_cb_conv2 from the kernel library (a blocked, paired or
        Winograd convolution, whose GEMMs are rlx_cb_conv)?"""
        return self.link_prebuilt and bool(impls & {*conv_blocked.IMPLS, *winograd.IMPLS})

    def program_fields_for(self, impls: dict[str, str]) -> dict[str, Any]:
        libs = (kernel_library.CONV_BLOCKED,) if self._links_conv(set(impls.values())) else ()
        if self.blas is None:
            return {"uses_blas": False, "kernel_libraries": libs}
        # the header is included whenever the BLAS exists, so its paths always travel along
        b = self.blas
        uses = any(i.startswith("blas-") for i in impls.values())  # the own kernel needs none
        return {"uses_blas": uses, "include_dirs": (b.include_dir,),
                "library_dirs": (b.lib_dir,), "libraries": (b.library,),
                "kernel_libraries": libs}


def render_program(lir: Graph, prefix: str = "rlx", *, use_blas: bool | None = None,
                   openmp: bool = True, in_place: dict[str, str] | None = None,
                   link_prebuilt: bool = False) -> CProgram:
    """Render ``lir`` to one C translation unit. ``use_blas`` None: use BLAS if it is found
    (and rlx's own f32 GEMM where the compiler targets AVX-512 or AVX2 + FMA, sgemm.available).
    ``in_place``: output value -> the donated input it may be written over
    (runtime/donation.py). ``link_prebuilt``: the program links the prebuilt kernels its
    ``kernel_libraries`` name (kernel_library.py) instead of compiling them."""
    from rlx_core.targets.cpu.toolchain import find_compiler

    blas = None
    if use_blas is None or use_blas:
        blas, _why = find_blas()
    comp = find_compiler()
    own = sgemm.available(comp, blas is not None)[0]
    renderer = CpuRenderer(blas, openmp=openmp, own_sgemm=own, prepack=prepack_enabled(),
                           simd_conv=comp.avx2_fma or comp.avx512, in_place=in_place,
                           link_prebuilt=link_prebuilt)
    return renderer.render_program(lir, prefix)

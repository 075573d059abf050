"""CLikeRenderer: LIR graph -> one C-like translation unit (prelude, kernels, entry point).

Targets subclass it and mostly set class attributes (``restrict``, ``kernel_decl``) or
override hooks: ``parallel_pragma`` (how an outer loop is spread over threads), ``gemm``
(a native matmul call instead of the generated loop kernel) and ``extra_headers``. Buffer
placement follows the arena plan: graph inputs, parameters and outputs are the caller's
pointers; every other kernel output lives at its slot's offset in the arena; scratch that a
kernel needs (layout copies, f16 accumulators) sits past the plan's peak.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rlx_core.ir.graph import Graph, Kernel, Level, Node, TensorType
from rlx_core.targets.base import InPlaceRefused
from rlx_core.targets.c_common import ctype_table as ct
from rlx_core.targets.c_common.body import NODE_COMMENT, Buffer
from rlx_core.targets.c_common.expr import RenderError
from rlx_core.targets.c_common.kernels import (
    ROW_ARGS,
    KernelEnv,
    emit_elementwise,
    emit_opaque,
    emit_reduce,
    scratch_bytes,
)
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.c_common.matmul import BlockEpilogue, GemmSpec, emit_matmul
from rlx_core.targets.c_common.names import c_comment, c_ident
from rlx_core.targets.c_common.prelude import prelude
from rlx_core.targets.c_common.row_ops import ROW_OPS, emit_row_op


def align(n: int, a: int = 64) -> int:
    return -(-n // a) * a


def written_over(g: Graph) -> dict[str, str]:
    """output -> the input its kernel writes it over in place (the arena plan's), or {}."""
    return g.plan.written_over() if g.plan is not None else {}


@dataclass(frozen=True)
class Place:
    """Where a value lives at run time: a caller pointer (``space``, ``index``) or the arena."""

    space: str  # "input" | "param" | "output" | "arena"
    index: int  # position in inputs/params/outputs, or the arena offset


class CLikeRenderer:
    """The shared renderer. Subclasses set attributes and override the hooks below."""

    name = "c"
    restrict = "restrict"
    # impl labels of kernels with nothing to run: no call is written for them
    no_call_impls: tuple[str, ...] = ("alias",)
    kernel_decl = "static void"
    # profiling mode: the entry point times every kernel call (wall clock, accumulated) and
    # the program exports ``<prefix>_profile(double* seconds, int64_t* calls)``; off by default
    # so normal programs carry no timer calls
    profile = False
    # the clock those timers read: CLOCK_MONOTONIC (wall time) or CLOCK_THREAD_CPUTIME_ID (the
    # calling thread's CPU time: a loaded machine's preemptions left out). A target's own setting
    # picks it (the cpu target's RLX_CPU_PROFILE=thread, checked there); the renderer reads no
    # environment
    profile_clock = "CLOCK_MONOTONIC"
    # stack bytes a serial elementwise kernel may fill with a transcendental's values first
    # (kernels._hoisted); 0 here: embedded targets have small stacks
    hoist_bytes = 0

    def __init__(self, in_place: dict[str, str] | None = None):
        # output value -> the donated input value it may be written over (runtime/donation.py)
        self.in_place = dict(in_place or {})

    # ---- hooks ------------------------------------------------------------------------------
    def parallel_pragma(self, work: int, collapse: int) -> str | None:
        """A pragma spreading the next loop over threads, or None (serial)."""
        return None

    def gemm(self, w: Writer, env: KernelEnv, spec: GemmSpec,
             epilogue: BlockEpilogue | None = None) -> str | None:
        """Emit a native GEMM for ``spec`` and return its impl label, or None to generate.

        ``epilogue`` (team mode only) may be written per thread inside the GEMM's work split
        (matmul.BlockEpilogue.emit); one left unwritten follows after a barrier."""
        return None

    def kernel_sync(self) -> str:
        """The barrier statement between dependent steps inside a kernel ("" for none)."""
        return ""

    def extra_headers(self) -> list[str]:
        return []

    def own_kernel(self, env: KernelEnv, w: Writer, params: list[str]) -> str | None:
        """Write kernel ``env.kernel`` the target's own way instead of by its kind (its impl
        label), or None. ``params``: the kernel's parameter declarations so far (its
        buffers). The cpu writes a sum over a row run's rows as its blocks' combine
        (cpu/row_sums.py)."""
        return None

    def row_split(self, idx: int) -> bool:
        """Does kernel ``idx`` run a block of its rows per call (parameters ROW_ARGS,
        KernelEnv.rows), the caller looping over the blocks (the cpu team: row_split.py)?"""
        return False

    def extra_functions(self, prefix: str) -> str:
        """Exported helpers placed after the entry point (e.g. a thread-count setter)."""
        return ""

    def program_fields(self) -> dict[str, Any]:
        """Extra CProgram fields (link requirements of native calls)."""
        return {}

    def bound_region(self, prefix: str, base: int) -> tuple[int, str]:
        """(bytes, C text) of arena kept across calls past ``base``, derived from the bound
        parameters (prepacked weights); the text comes before the entry point. (0, "")."""
        return 0, ""

    # ---- layout -----------------------------------------------------------------------------
    def places(self, g: Graph) -> tuple[dict[str, Place], int]:
        """value -> Place, and the arena bytes including values the plan did not place."""
        where: dict[str, Place] = {}
        for i, v in enumerate(g.inputs):
            where[v.name] = Place("input", i)
        for i, v in enumerate(g.params):
            where[v.name] = Place("param", i)
        produced = {o for k in g.kernels for o in k.outputs}
        for i, o in enumerate(g.outputs):
            if o in produced and o not in where:
                where[o] = Place("output", i)
        plan = g.plan
        end = plan.peak_bytes if plan is not None else 0
        types = g.values()
        for k in g.kernels:
            for o in k.outputs:
                if o in where:
                    continue
                slot = plan.slot(o) if plan is not None else None
                if slot is not None:
                    where[o] = Place("arena", slot.offset)
                else:  # not planned (no plan pass): give it its own aligned region
                    where[o] = Place("arena", end)
                    end = align(end + types[o].type.nbytes)
        return where, align(end)

    # ---- program ----------------------------------------------------------------------------
    def render_program(self, g: Graph, prefix: str = "rlx") -> Any:
        from rlx_core.targets.c_common.program import CProgram

        if g.level is not Level.LIR:
            raise RenderError(f"the {self.name} renderer takes LIR, got {g.level.value}",
                              hint="compile through rlx.compile (fuse + plan_arena first)")
        prefix = c_ident(prefix, "p")
        types = {name: v.type for name, v in g.values().items()}
        for t in types.values():
            ct.check(t.dtype)
        where, arena_end = self.places(g)
        self._extra_args: dict[str, list[str]] = {}  # kernel -> arguments its hooks added
        # kernel -> (its head's opening, the user-code location that follows it in the shown
        # source): render_kernel writes the head without it (see located)
        self._origins: dict[str, tuple[str, str]] = {}
        fail = f"{prefix}_fail"
        parts: list[tuple[str, str]] = []  # (kernel name or "", text)
        parts.append(("", prelude()))
        for h in self.extra_headers():
            parts.append(("", h))
        parts.append(("", f"/* program {c_comment(g.name)}: {len(g.kernels)} kernel(s) */\n"
                          f"static int {prefix}_err_kernel = 0;\n"
                          f"static int64_t {prefix}_err_info[2];\n"
                          f"static void {fail}(int k, int64_t value, int64_t size) {{\n"
                          f"    if (!{prefix}_err_kernel) {{ {prefix}_err_kernel = k + 1; "
                          f"{prefix}_err_info[0] = value; {prefix}_err_info[1] = size; }}\n}}\n"))
        calls: list[str] = []
        scratch_needed = 0
        impls: dict[str, str] = {}
        kinds: dict[str, str] = {}
        seen: dict[str, str] = {}  # kernel text without its name and head comment -> name
        for idx, k in enumerate(g.kernels):
            text, impl, scratch = self.render_kernel(g, k, idx, prefix, types, fail)
            text = self.share(text, prefix, k, seen)
            parts.append((k.name, text))
            impls[k.name] = impl
            kinds[k.name] = k.kind
            scratch_needed = max(scratch_needed, scratch)
            # an aliased reshape has no call: its bytes are already in place
            calls.append("" if impl in self.no_call_impls else
                         self.call(k, idx, prefix, types, where, arena_end, scratch > 0))
        arena_bytes = align(arena_end + scratch_needed)
        bound_bytes, bound_text = self.bound_region(prefix, arena_bytes)
        bind_state = (arena_bytes, bound_bytes) if bound_bytes else (0, 0)
        if bound_text:
            parts.append(("", bound_text))
        arena_bytes = align(arena_bytes + bound_bytes)
        if self.profile:
            parts.append(("", self.profile_block(prefix, len(calls))))
            calls = [self.timed(prefix, i, c) for i, c in enumerate(calls)]
        parts.append(("", self.entry(g, prefix, calls, where, types)))
        extra = self.extra_functions(prefix)
        if extra:
            parts.append(("", extra))
        source, lines, per_kernel = "", {}, {}
        line_no = 1
        for name, text in parts:
            if not text.endswith("\n"):
                text += "\n"
            count = text.count("\n")
            if name:
                lines[name] = (line_no, line_no + count - 1)
                per_kernel[name] = self.located(name, text)
            source += text
            line_no += count
        return CProgram(
            source=source, prefix=prefix, entry=f"{prefix}_run", error_fn=f"{prefix}_error",
            arena_bytes=arena_bytes, input_types=tuple(v.type for v in g.inputs),
            param_names=tuple(v.name for v in g.params),
            param_types=tuple(v.type for v in g.params), output_types=g.output_types(),
            kernel_lines=lines, kernel_sources=per_kernel, kernel_impl=impls,
            kernel_kind=kinds, profile_fn=f"{prefix}_profile" if self.profile else "",
            bind_state=bind_state, **self.program_fields_for(impls))

    def located(self, name: str, text: str) -> str:
        """Kernel ``name``'s shown source: ``text`` with the user-code line it came from in its
        head (``/* kernel k3 (matmul, rlx-sgemm) from cell.py:5: ...``).

        The translation unit carries no locations: a build is keyed by the sha256 of its text
        (cpu/cached_build.py), and the same function defined a few lines lower (a notebook cell
        edited above it) must find the same build. The head keeps its one line, so a line of
        the shown text is the same line of the compiled one."""
        opening, where = self._origins.get(name, ("", ""))
        if not where or not text.startswith(opening):
            return text  # a target's own head (hexagon's HVX kernels), or no known location
        return opening + where + text[len(opening):]

    def share(self, text: str, prefix: str, k: Kernel, seen: dict[str, str]) -> str:
        """``text``, or a one-line wrapper calling an earlier kernel with the same code.

        Repeated blocks (the layers of a transformer) render to identical loop nests up to
        the function name; compiling each copy again made the C compiler most of a compile's
        time. The wrapper keeps one function per kernel (profiles and sources stay per
        kernel) and the compiler inlines it.
        """
        fn = self.kernel_fn(prefix, k)
        head, _, rest = text.partition("\n")
        # the kernel's own name, and its helpers' (a tile epilogue: fn_tile, fn_tile_ctx)
        canon = re.sub(rf"\b{re.escape(fn)}(?=\(|_)", "@KERNEL@", NODE_COMMENT.sub("", rest))
        first = seen.get(canon)
        if first is None:
            seen[canon] = fn
            return text
        sig = f"{self.kernel_decl} {fn}("
        decl = rest[rest.index(sig):].partition(") {\n")[0]
        args = [p.rsplit(" ", 1)[-1] for p in decl.partition("(")[2].split(", ")]
        return (f"{head[:-3].rstrip()}; same code as {first} */\n{decl}) {{\n"
                f"    {first}({', '.join(args)});\n}}\n")

    def program_fields_for(self, impls: dict[str, str]) -> dict[str, Any]:
        return self.program_fields()

    @staticmethod
    def kernel_fn(prefix: str, k: Kernel) -> str:
        """The C function name of kernel ``k`` in the program ``prefix``."""
        return f"{prefix}_{c_ident(k.name, 'k')}"

    def render_kernel(self, g: Graph, k: Kernel, idx: int, prefix: str,
                      types: dict[str, TensorType], fail: str) -> tuple[str, str, int]:
        r = self.restrict
        ins = {v: Buffer(f"in{j}", types[v]) for j, v in enumerate(k.inputs)}
        outs = {v: Buffer(f"out{j}", types[v]) for j, v in enumerate(k.outputs)}
        # a donated input and the output written over it (runtime/donation.py), or an input
        # and the output the arena plan writes over it (plan_arena.in_place_shares), may
        # arrive as one pointer: neither is restrict. Only in the kernel writing the pair: the
        # other readers of a donated input keep restrict (a training step's forward GEMM reads
        # the W its weight update writes over)
        pairs = {o: i for o, i in {**self.in_place, **written_over(g)}.items() if o in outs}
        aliasing = {*pairs, *pairs.values()}
        params = [f"const {ct.storage(types[v].dtype)}* {'' if v in aliasing else r} in{j}"
                  for j, v in enumerate(k.inputs)]
        params += [f"{ct.storage(types[v].dtype)}* {'' if v in aliasing else r} out{j}"
                   for j, v in enumerate(k.outputs)]
        fn = self.kernel_fn(prefix, k)
        rows = self.row_split(idx)
        env = KernelEnv(k, idx, {n.name: n for n in k.nodes}, ins, outs,
                        self.parallel_pragma, fail, sync=self.kernel_sync(), fn=fn,
                        in_place=pairs,
                        hoist_bytes=self.hoist_bytes, rows=ROW_ARGS if rows else None)
        if rows:
            env.extra_args += [(f"const int64_t {a}", a) for a in ROW_ARGS]
        w = Writer(1)
        scratch = 0
        own = self.own_kernel(env, w, params)
        if own is not None:
            impl = own  # the target writes this kernel its own way
        elif k.kind == "elementwise":
            impl = emit_elementwise(env, w)
        elif k.kind == "reduce":
            impl = emit_reduce(env, w)
        elif k.kind == "matmul":
            impl, scratch = emit_matmul(env, w, self.gemm)
        elif self.aliased(g, k):
            w.line(f"/* %{c_comment(k.outputs[0])} shares the arena bytes of "
                   f"%{c_comment(k.inputs[0])}: nothing to copy (the call is skipped) */")
            impl = "alias"
        elif k.kind == "opaque" and len(k.nodes) == 1 and k.nodes[0].op in ROW_OPS:
            impl = emit_row_op(env, w, k.nodes[0])  # a normalisation the target kept whole
        elif k.kind == "opaque" and len(k.nodes) == 1 and \
                (own := self.composite(env, w, k.nodes[0])) is not None:
            impl = own  # another HIR op this target kept whole, with a kernel of its own
        elif k.kind == "opaque":
            impl = emit_opaque(env, w)
            scratch = scratch_bytes(k, types)
        else:
            raise RenderError(f"kernel {c_comment(k.name)}: unknown kind {c_comment(k.kind)}")
        donated = [o for o in k.outputs if o in self.in_place]
        if donated and k.kind in ("matmul", "reduce") and not env.stores_in_place:
            # a GEMM or a sum whose emitter did not store its output over the donated input
            # (the target's matmul_in_place / reduce_in_place offered it; runtime/donation.py):
            # render again with a fresh output
            raise InPlaceRefused(donated[0])
        params += [decl for decl, _ in env.extra_args]
        params.append(f"unsigned char* {r} scratch")
        self._extra_args[k.name] = [arg for _, arg in env.extra_args]
        ops = ", ".join(c_comment(n.op) for n in k.nodes)
        origin = next((n.loc for n in k.nodes if n.loc.file), None)
        where = f" from {c_comment(origin.file.rsplit('/', 1)[-1])}:{origin.line}" if origin else ""
        opening = f"/* kernel {c_comment(k.name)} ({c_comment(k.kind)}, {impl})"
        self._origins[k.name] = (opening, where)  # shown, not compiled (located)
        head = f"{opening}: {ops} -> {', '.join(c_comment(o) for o in k.outputs)} */\n"
        text = head + "".join(env.preamble) + f"{self.kernel_decl} {fn}(" + \
            ", ".join(params) + ") {\n" + "    (void)scratch;\n" + \
            "\n".join(w.lines) + ("\n" if w.lines else "") + "}\n"
        return text, impl, scratch

    def profile_block(self, prefix: str, count: int) -> str:
        """Per-kernel accumulated seconds and call counts, and the function that reads them."""
        n, clock = max(1, count), self.profile_clock
        return (f"#include <time.h>\n"
                f"static double {prefix}_prof_s[{n}];\n"
                f"static int64_t {prefix}_prof_n[{n}];\n"
                f"static double {prefix}_now(void) {{\n"
                f"    struct timespec ts; clock_gettime({clock}, &ts);\n"
                f"    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;\n}}\n"
                f"void {prefix}_profile(double* seconds, int64_t* calls) {{\n"
                f"    for (int i = 0; i < {count}; ++i) {{ seconds[i] = {prefix}_prof_s[i]; "
                f"calls[i] = {prefix}_prof_n[i]; }}\n}}\n")

    def composite(self, env: KernelEnv, w: Writer, node: Node) -> str | None:
        """Write the kernel of an HIR op the target claims whole beyond the row ops (its impl
        label), or None when the target has no kernel of its own for ``node``."""
        return None

    @staticmethod
    def aliased(g: Graph, k: Kernel) -> bool:
        """Is ``k`` a reshape whose output the arena plan placed on its input's bytes?"""
        return (g.plan is not None and k.kind == "opaque" and len(k.nodes) == 1
                and k.nodes[0].op == "reshape" and g.plan.is_alias(k.outputs[0]))

    def timed(self, prefix: str, idx: int, call: str) -> str:
        if not call:
            return call  # an aliased reshape: no call to time
        return (f"    {{ const double t0 = {prefix}_now();\n{call}\n"
                f"      {prefix}_prof_s[{idx}] += {prefix}_now() - t0; "
                f"++{prefix}_prof_n[{idx}]; }}")

    def pointer(self, place: Place, t: TensorType, const: bool) -> str:
        st = ct.storage(t.dtype)
        q = "const " if const else ""
        if place.space == "input":
            return f"({q}{st}*)inputs[{place.index}]"
        if place.space == "param":
            return f"({q}{st}*)params[{place.index}]"
        if place.space == "output":
            return f"({q}{st}*)outputs[{place.index}]"
        return f"({q}{st}*)(arena + {place.index})"

    def buffer_args(self, k: Kernel, where: dict[str, Any],
                    types: dict[str, TensorType]) -> list[str]:
        """Kernel ``k``'s buffer arguments as its call passes them: inputs, then outputs."""
        return [*(self.pointer(where[v], types[v], True) for v in k.inputs),
                *(self.pointer(where[v], types[v], False) for v in k.outputs)]

    def call(self, k: Kernel, idx: int, prefix: str, types: dict[str, TensorType],
             where: dict[str, Any], arena_end: int, scratch: bool) -> str:
        args = self.buffer_args(k, where, types)
        args += self._extra_args.get(k.name, [])
        args.append(f"arena + {arena_end}" if scratch else "arena")
        return f"    {self.kernel_fn(prefix, k)}({', '.join(args)});"

    def entry(self, g: Graph, prefix: str, calls: list[str], where: dict[str, Place],
              types: dict[str, TensorType]) -> str:
        lines = [f"void {prefix}_run(const void* const* inputs, const void* const* params, "
                 f"void* const* outputs, unsigned char* arena) {{",
                 "    (void)inputs; (void)params; (void)outputs; (void)arena;",
                 f"    {prefix}_err_kernel = 0;", *calls]
        for i, o in enumerate(g.outputs):
            place = where[o]
            if place.space == "output" and place.index == i:
                continue
            src = self.pointer(place, types[o], True)
            if types[o].nbytes:
                # returned inputs/params and repeated outputs are copies in the caller's buffer
                lines.append(f"    memcpy(outputs[{i}], {src}, {types[o].nbytes});")
        lines.append("}")
        lines.append(f"int {prefix}_error(int64_t* info) {{")
        lines.append(f"    int k = {prefix}_err_kernel;")
        lines.append(f"    info[0] = {prefix}_err_info[0]; info[1] = {prefix}_err_info[1];")
        lines.append(f"    {prefix}_err_kernel = 0;")
        lines.append("    return k;")
        lines.append("}")
        return "\n".join(lines) + "\n"

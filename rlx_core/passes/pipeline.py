"""The compile pipeline: a flat, named list of passes, HIR in, planned LIR out."""

from __future__ import annotations

import time
from typing import Any

from rlx_core.compile_trace import PassStep, code_location
from rlx_core.ir.graph import Graph, Level
from rlx_core.ir.printer import print_graph
from rlx_core.ir.verifier import verify
from rlx_core.passes.algebraic_simplify import AlgebraicSimplify
from rlx_core.passes.base import PassContext
from rlx_core.passes.constant_fold import ConstantFold
from rlx_core.passes.conv_epilogue import ConvEpilogue
from rlx_core.passes.cse import CSE
from rlx_core.passes.dce import DCE
from rlx_core.passes.dynamic_int_linear import DynamicIntLinear
from rlx_core.passes.fuse import Fuse
from rlx_core.passes.infer_types import InferTypes
from rlx_core.passes.int_linear_epilogue import IntLinearEpilogue
from rlx_core.passes.legalize import Legalize
from rlx_core.passes.plan_arena import PlanArena
from rlx_core.passes.requantized_int_linear import RequantizedIntLinear
from rlx_core.passes.static_int_linear import StaticIntLinear


def default_pipeline() -> tuple[Any, ...]:
    """The passes every compile runs, in order."""
    return (
        # re-derive every type from the op rules: catches frontends/importers that mis-typed
        InferTypes(),
        # a dynamic int8 linear's explicit chain (rlx.quant.ptq) becomes one op where the
        # target runs it as one kernel, before quantize / dequantize are decomposed
        DynamicIntLinear(),
        # and a static one's (quantize -> int_linear -> dequantize)
        StaticIntLinear(),
        # and a static one whose int8 output feeds the next (int_linear -> requantize [-> clamps])
        RequantizedIntLinear(),
        # and what reads those int8 linears (GELU, a residual add) goes into their store
        IntLinearEpilogue(),
        # dispatch: each HIR op becomes native / common-IR / rewritten for the target, or fails
        Legalize(),
        # the decompositions leave constants and identities behind; fold and simplify them
        ConstantFold(),
        AlgebraicSimplify(),
        # merge repeated subexpressions (decompositions repeat broadcasts of one constant)
        CSE(),
        # a convolution the target keeps whole takes its bias / residual / ReLU into its store
        ConvEpilogue(),
        # drop what no output needs
        DCE(),
        # group MIR into kernels (fused loop nests): MIR -> LIR
        Fuse(),
        # place kernel-to-kernel buffers in one arena by liveness
        PlanArena(),
    )


def native_composites(ctx: PassContext) -> frozenset[str]:
    caps = getattr(ctx.target, "caps", None)
    claimed = getattr(caps, "native_composites", None)
    return frozenset(claimed() if callable(claimed) else (claimed or ()))


def run_pipeline(g: Graph, ctx: PassContext, passes: tuple[Any, ...] | None = None,
                 text: str | None = None) -> Graph:
    """Run ``passes`` (default: the pipeline above), recording each step when tracing is on.

    Each graph is printed once: a step's before is the step before's after, a pass that
    returns its graph unchanged has its before as its after, and ``text`` is ``g``'s text when
    the caller printed it already (api.lower's HIR snapshot)."""
    verify_each = ctx.options.verify
    rec = ctx.trace
    if rec is not None and text is None:
        text = print_graph(g)
    for p in passes or default_pipeline():
        level_before = g.level
        start = time.perf_counter()
        new = p.run(g, ctx)
        if verify_each:
            verify(new, native_composites(ctx) if new.level is not Level.HIR else frozenset())
        if rec is not None:
            seconds = time.perf_counter() - start
            before, text = text, text if new is g else print_graph(new)
            file, line = code_location(type(p).run)
            rec.steps.append(PassStep(
                name=p.name, file=file, line=line, level_before=level_before.value,
                level_after=new.level.value, before=before, after=text,
                rules=rec.take_rules(), seconds=seconds))
        g = new
    return g

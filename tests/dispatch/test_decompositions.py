"""Every HIR op's common-IR decomposition agrees with the op itself (numpy oracle)."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_core.dispatch.decompositions import DECOMPOSITIONS
from rlx_core.dispatch.no_kernel import NO_KERNEL_OPS
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Level
from rlx_core.ir.ops import HIR_OPS, MIR_OPS
from rlx_core.ir.ops.splat import SPLAT_OPS
from rlx_core.ir.verifier import verify
from rlx_core.passes.base import CompileOptions, PassContext
from rlx_core.passes.legalize import Legalize
from rlx_core.targets.numpy_ref.caps import CAPS
from tests.dispatch.graphs import random_inputs, single
from tests.dispatch.oracle import run_graph


class _NumpyCapsOnly:
    """The numpy target as the legalizer sees it (its executor is not needed here)."""

    name = "numpy"
    caps = CAPS


F = "f32"
CASES = [
    ("linear", [(F, (3, 5)), (F, (4, 5))], {}),
    ("linear", [(F, (2, 3, 5)), (F, (4, 5)), (F, (4,))], {}),
    ("layer_norm", [(F, (4, 6))], {}),
    ("layer_norm", [(F, (2, 3, 6)), (F, (6,)), (F, (6,))], {"eps": 1e-3}),
    ("layer_norm", [(F, (3, 6)), (F, (6,))], {}),
    ("rms_norm", [(F, (4, 6))], {}),
    ("rms_norm", [(F, (2, 3, 8)), (F, (8,))], {"eps": 1e-5}),
    ("softmax", [(F, (3, 7))], {}),
    ("softmax", [(F, (2, 3, 4))], {"axis": 1}),
    ("softmax", [(F, (5,))], {"axis": 0}),
    ("log_softmax", [(F, (3, 7))], {}),
    ("log_softmax", [(F, (2, 3, 4))], {"axis": 0}),
    ("gelu", [(F, (3, 7))], {}),
    ("gelu", [(F, (2, 9))], {"approximate": "tanh"}),
    ("silu", [(F, (4, 5))], {}),
    ("attention", [(F, (2, 3, 4, 8)), (F, (2, 3, 5, 8)), (F, (2, 3, 5, 6))], {}),
    ("attention", [(F, (1, 2, 5, 4)), (F, (1, 2, 5, 4)), (F, (1, 2, 5, 4))],
     {"mask": "causal"}),
    ("attention", [(F, (2, 1, 3, 4)), (F, (2, 1, 5, 4)), (F, (2, 1, 5, 4))],
     {"mask": "causal", "scale": 0.3}),
    ("attention", [(F, (2, 2, 3, 4)), (F, (2, 2, 5, 4)), (F, (2, 2, 5, 4)), ("bool", (2, 5))],
     {"mask": "padding"}),
    ("embedding", [("i32", (2, 3)), (F, (4, 5))], {}),
    ("embedding", [("i64", (7,)), (F, (4, 3))], {}),
    ("conv2d", [(F, (2, 3, 6, 6)), (F, (4, 3, 3, 3))], {}),
    ("conv2d", [(F, (1, 4, 7, 6)), (F, (6, 2, 3, 2)), (F, (6,))],
     {"stride": (2, 1), "padding": (1, 1), "groups": 2}),
    ("conv2d", [(F, (1, 2, 8, 8)), (F, (3, 2, 3, 3))], {"dilation": (2, 2), "padding": (2, 1)}),
    ("conv2d", [(F, (2, 3, 4, 4)), (F, (5, 3, 1, 1))], {}),
    ("conv2d_fused", [(F, (2, 3, 6, 6)), (F, (4, 3, 3, 3)), (F, (4,))],
     {"padding": (1, 1), "act": "max", "lo": 0.0}),
    ("conv2d_fused", [(F, (1, 4, 5, 5)), (F, (4, 1, 3, 3)), (F, (4,)), (F, (1, 4, 3, 3))],
     {"groups": 4, "act": "clip", "lo": 0.0, "hi": 0.5, "residual": True}),
    ("conv2d_fused", [(F, (1, 3, 4, 4)), (F, (2, 3, 1, 1)), (F, (1, 2, 2, 2))],
     {"stride": (2, 2), "act": "min", "hi": 0.25, "residual": True}),
    ("conv2d_pair", [(F, (2, 3, 2, 3)), (F, (4, 3, 1, 1)), (F, (4,)), (F, (2, 5, 4, 5)),
                     (F, (4, 5, 1, 1)), (F, (4,))], {"stride2": (2, 2), "act": "max", "lo": 0.0}),
    ("max_pool2d", [(F, (2, 3, 6, 6))], {"kernel": (2, 2), "stride": (2, 2)}),
    ("max_pool2d", [(F, (1, 2, 5, 7))], {"kernel": (3, 3), "stride": (2, 1), "padding": (1, 1)}),
    # int8 codes pooled on the integers (static PTQ carries a max_pool2d between quantized
    # layers): a target without an integer pool rejects it with a typed error
    ("max_pool2d", [("u8", (2, 3, 6, 6))], {"kernel": (2, 2), "stride": (2, 2)}),
    ("max_pool2d", [("i8", (1, 2, 5, 7))], {"kernel": (3, 3), "stride": (2, 1), "padding": (1, 1)}),
    ("avg_pool2d", [(F, (2, 3, 6, 6))], {"kernel": (2, 2), "stride": (2, 2)}),
    ("avg_pool2d", [(F, (1, 2, 5, 5))], {"kernel": (3, 3), "stride": (1, 1), "padding": (1, 1)}),
    # quantization (rlx_core/ir/ops/quant.py)
    ("quantize", [(F, (3, 5)), (F, ()), ("i32", ())], {}),
    ("quantize", [(F, (3, 5)), (F, (5,)), ("i32", (5,))], {"axis": 1, "dtype": dt.u8}),
    ("dequantize", [("i8", (4, 3)), (F, (4,)), ("i32", (4,))], {"axis": 0}),
    ("requantize", [("i32", (4, 6))], {"multiplier": (1 << 30,), "shift": (-3,)}),
    ("requantize", [("i32", (4, 3))], {"multiplier": (1 << 30, 1500000000, 1234567890),
                                        "shift": (-1, 0, 2), "zero_point": 5, "axis": 1,
                                        "dtype": dt.u8}),
    ("int_linear", [("i8", (3, 5)), ("i8", (4, 5)), ("i32", (4,))], {"a_zero_point": 1}),
    ("int_linear", [("u8", (2, 3, 7)), ("i8", (4, 7))], {"b_zero_point": -2}),
    ("int_conv2d", [("u8", (2, 3, 6, 5)), ("i8", (4, 3, 3, 3)), ("i32", (4,))],
     {"padding": (1, 1), "a_zero_point": 7, "b_zero_point": 1}),
    ("int_conv2d", [("i8", (1, 4, 7, 6)), ("i8", (4, 1, 3, 3))],
     {"stride": (2, 1), "padding": (1, 0), "groups": 4, "a_zero_point": -3}),
    ("int_conv2d", [("i8", (1, 4, 8, 8)), ("i8", (6, 2, 2, 3))],
     {"dilation": (2, 1), "groups": 2, "b_zero_point": -2}),
    ("int4_linear", [(F, (3, 8)), ("u8", (5, 4)), (F, (5, 2))], {"group": 4}),
    ("int4_linear", [(F, (2, 3, 8)), ("u8", (4, 4)), (F, (4, 1)), ("i8", (4, 1))],
     {"group": 8}),
    ("fake_quantize", [(F, (3, 5)), (F, ()), (F, ())], {}),
    ("dynamic_int_linear", [(F, (3, 5)), ("i8", (4, 5)), (F, (4,))], {}),
    ("dynamic_int_linear", [(F, (2, 3, 7)), ("i8", (6, 7)), (F, (6,)), (F, (6,))], {}),
    ("static_int_linear", [(F, (3, 5)), ("i8", (4, 5)), (F, (4,))],
     {"a_scale": 0.25, "a_zero_point": 3, "a_qmin": 0, "a_qmax": 127}),
    ("static_int_linear", [(F, (2, 3, 7)), ("i8", (6, 7)), (F, (6,)), ("i32", (6,))],
     {"a_scale": 0.125, "a_zero_point": 100, "a_qmin": 90, "a_qmax": 255}),
    # the store's epilogue (passes/int_linear_epilogue.py): GELU, then + the residual
    ("static_int_linear", [(F, (3, 5)), ("i8", (4, 5)), (F, (4,)), ("i32", (4,)), (F, (3, 4))],
     {"a_scale": 0.25, "a_zero_point": 3, "a_qmin": 0, "a_qmax": 127, "act": "gelu",
      "residual": True}),
    ("dynamic_int_linear", [(F, (2, 3, 7)), ("i8", (6, 7)), (F, (6,)), (F, (2, 3, 6))],
     {"act": "gelu", "residual": True}),
    ("dynamic_int_linear", [(F, (3, 5)), ("i8", (4, 5)), (F, (4,))], {"act": "gelu"}),
    ("fake_quantize", [(F, (3, 5)), (F, (3,)), (F, (3,))], {"axis": 0, "qmin": 0, "qmax": 15}),
    # a static layer chained through the integers (int_linear -> requantize -> clamp)
    ("requantized_int_linear", [("u8", (3, 5)), ("i8", (4, 5)), ("i32", (4,))],
     {"a_zero_point": 7, "multiplier": (1 << 30, 1500000000, 1234567890, 5),
      "shift": (-1, 0, 2, -31), "zero_point": 5, "dtype": dt.u8, "qmin": 5, "qmax": 127}),
    ("requantized_int_linear", [(F, (3, 5)), ("i8", (4, 5)), ("i32", (4,))],
     {"a_scale": 0.25, "a_zero_point": 3, "a_qmin": 0, "a_qmax": 127, "multiplier": (1 << 30,),
      "shift": (-2,), "zero_point": 1, "dtype": dt.u8, "qmin": 1, "qmax": 255}),
    ("requantized_int_linear", [("i8", (2, 3, 7)), ("i8", (6, 7))],
     {"multiplier": (1 << 30,), "shift": (-4,), "zero_point": -3, "dtype": dt.i8,
      "qmin": -128, "qmax": 127}),
]


# the dense linear algebra and sparse ops have no MIR form by design (docs/linalg.md)
WHOLE_ONLY = set(NO_KERNEL_OPS)


def test_every_hir_op_has_a_decomposition_and_a_case() -> None:
    # the splatting ops have none by design (kernels only; RLX-S020 elsewhere), nor have the
    # dense linear algebra and sparse ops (RLX-S002 elsewhere)
    whole = set(SPLAT_OPS) | WHOLE_ONLY
    decomposed = set(HIR_OPS) - whole
    assert decomposed <= set(DECOMPOSITIONS)
    assert not whole & set(DECOMPOSITIONS)
    assert decomposed == {c[0] for c in CASES}
    assert set(DECOMPOSITIONS) <= set(HIR_OPS) | set(MIR_OPS)


@pytest.mark.parametrize("op,specs,attrs", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_decomposition_matches_the_hir_op(op, specs, attrs) -> None:
    g = single(op, specs, **attrs)
    ctx = PassContext(CompileOptions(target="numpy"), target=_NumpyCapsOnly())
    mir = Legalize().run(g, ctx)
    assert mir.level is Level.MIR
    verify(mir)
    assert all(n.op in MIR_OPS for n in mir.nodes)
    hir_node = g.nodes[0]
    for n in mir.nodes:  # provenance: every primitive points at the HIR node and its line
        assert (n.loc.origin, n.loc.origin_op) == (hir_node.out.name, op)
        assert (n.loc.file, n.loc.line) == ("model.py", 7)
    rng = np.random.default_rng(0)
    for _ in range(2):
        xs = random_inputs(g, rng)
        (want,) = run_graph(g, xs)
        (got,) = run_graph(mir, xs)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)

"""Refusal learning: every typed rejection names what the target refused (no shrinking), and a
refused MIR pair also stops the HIR ops whose lowering holds it (rlx_core/testing/refusals.py)."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_core.dispatch.errors import LegalizationError
from rlx_core.dispatch.legalize import legalize_graph
from rlx_core.ir.parser import parse
from rlx_core.testing.generator import Case, generate
from rlx_core.testing.profile import ZERO_SIZE, profile_for
from rlx_core.testing.refusals import learn, lowered_pairs, refused_pairs
from rlx_core.testing.runner import REJECTED, run_one
from tests.conformance.harness import executable_target

FIRMWARE = '''hir @fuzz {
  input %in0 : f32[1,5,3]
  input %in1 : i8[0,2]
  %0 : f32[1,5,3] = neg(%in0) {} loc("fuzz.py":1)
  %1 : f32[1,5,3] = gelu(%0) {approximate="none"} loc("fuzz.py":1)
  %2 : i8[0,2] = max(%in1, %in1) {} loc("fuzz.py":1)
  return %1, %2
}
'''

REQUANTIZE = '''hir @fuzz {
  input %in0 : i32[3]
  %0 : i8[3] = requantize(%in0) {multiplier=(1073741824,), shift=(0,), zero_point=0, dtype=i8} loc("fuzz.py":1)
  return %0
}
'''


def test_a_legalization_error_names_the_hir_op_and_the_mir_nodes_it_refused() -> None:
    g = parse(REQUANTIZE)
    with pytest.raises(LegalizationError) as err:  # requantize needs i64 there (the GPU
        legalize_graph(g, target="tpu")          # targets have a kernel of their own)
    assert refused_pairs(err.value, g) == [("requantize", "i32")]


def test_the_firmware_error_names_every_node_and_the_empty_tensors() -> None:
    """One rejection of the int8 firmware teaches all it refused: each float op (RLX-U001) and
    empty tensors as such (RLX-U014), not the op that happened to hold one."""
    executable_target("cortex-m")
    g = parse(FIRMWARE)
    o = run_one("cortex-m", Case(g, [np.ones((1, 5, 3), np.float32), np.zeros((0, 2), np.int8)]))
    assert o.status == REJECTED, o.detail
    assert sorted(o.extra["refused"]) == sorted([ZERO_SIZE, ("neg", "f32"), ("gelu", "f32")])


def test_a_message_naming_a_node_is_read_and_one_naming_none_is_not() -> None:
    g = parse(FIRMWARE)

    class RenderError(Exception):
        pass

    assert refused_pairs(RenderError("cannot emit %1 (gelu) from %0"), g) == [("gelu", "f32")]
    assert refused_pairs(RenderError("the device is lost"), g) == []


def test_a_refused_mir_pair_stops_the_hir_ops_that_lower_to_it() -> None:
    """erf on f32 refused: gelu on f32 (its exact form is erf) is not drawn either; gelu at other
    dtypes (bf16), and HIR ops that do not use erf, still are."""
    p = profile_for("opengl")
    own, low = lowered_pairs("opengl", "gelu", "f32")
    assert own == ("gelu", "f32") and ("erf", "f32") in low
    q, added = learn(p, [("erf", "f32")])
    assert added[0] == ("erf", "f32") and ("gelu", "f32") in added
    assert ("softmax", "f32") not in added and ("gelu", "bf16") not in added
    assert not q.claims("gelu", "f32") and q.claims("gelu", "bf16") and q.claims("softmax", "f32")
    drawn = set()
    for i in range(200):
        c = generate(q, (3, i))
        drawn.update((n.op, n.inputs and c.graph.type_of(n.inputs[0]).dtype.name)
                     for n in c.graph.nodes)
    assert not drawn & {("erf", "f32"), ("gelu", "f32")}
    assert ("gelu", "bf16") in drawn
    assert learn(q, [("erf", "f32")]) == (q, [])  # learnt once


def test_zero_size_refused_means_no_empty_axes_and_the_fallback_op_is_claimed() -> None:
    p, added = learn(profile_for("numpy"), [ZERO_SIZE, ("neg", "f32"), ("neg", "f64")])
    assert added == [ZERO_SIZE, ("neg", "f32"), ("neg", "f64")] and not p.zero_size
    for i in range(200):
        c = generate(p, (4, i))
        assert all(0 not in a.shape for a in c.inputs)
        assert all(0 not in n.type.shape for n in c.graph.nodes)
        assert not any(n.op == "neg" and c.graph.type_of(n.inputs[0]).dtype.name in ("f32", "f64")
                       for n in c.graph.nodes)

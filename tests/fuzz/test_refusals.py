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


NEG_ARGMAX = '''hir @fuzz {
  input %in0 : i8[5]
  %0 : i8[5] = neg(%in0) {} loc("fuzz.py":1)
  %1 : i32[] = argmax(%0) {axis=0, index_dtype=i32} loc("fuzz.py":1)
  return %1
}
'''
BROADCAST_TWICE = '''hir @fuzz {
  input %in0 : u8[4]
  %0 : u8[3,4] = broadcast_in_dim(%in0) {dims=(1,), shape=(3, 4)} loc("fuzz.py":1)
  %1 : u8[3,2,4] = broadcast_in_dim(%0) {dims=(0, 2), shape=(3, 2, 4)} loc("fuzz.py":1)
  return %1
}
'''
MUL_FUSED = '''hir @fuzz {
  input %in0 : i8[5]
  %0 : i8[5] = neg(%in0) {} loc("fuzz.py":1)
  %1 : i8[5] = mul(%0, %in0) {} loc("fuzz.py":1)
  return %1
}
'''


@pytest.mark.parametrize("text", [NEG_ARGMAX, BROADCAST_TWICE], ids=["neg-argmax", "bcast2"])
def test_a_fused_kernel_refusal_names_the_fusion_and_teaches_nothing(text: str) -> None:
    """The firmware runs neg and argmax (each broadcast) alone; a kernel fusing them is refused
    as a fusion (RLX-U015), and the learning stops drawing none of its ops (they stopped argmax
    and broadcast_in_dim on every int dtype, neg on i8/u8/i32 and min on i32 before)."""
    from rlx_core.targets.cortex_m.errors import FusedKernelError

    executable_target("cortex-m")
    g = parse(text)
    ins = [np.arange(v.type.size).reshape(v.type.shape).astype(v.type.dtype.name)
           for v in g.inputs]
    o = run_one("cortex-m", Case(g, ins))
    assert o.status == REJECTED and "RLX-U015" in o.detail, o.detail
    assert o.extra["refused"] == [] and o.extra["fused"]  # the run neither learns nor shrinks
    with pytest.raises(FusedKernelError) as err:
        import rlx_core as rlx

        rlx.compile(g, target="cortex-m", record=False)
    assert err.value.codes == ["RLX-U015"] and "fused" in err.value.lines[0]
    assert " -> " in err.value.lines[0]


def test_a_fused_kernel_names_the_op_the_firmware_refuses_alone() -> None:
    """neg -> mul: the mul has no int8 kernel on its own, so the line names the mul (RLX-U002),
    not the neg at the head of the kernel."""
    executable_target("cortex-m")
    g = parse(MUL_FUSED)
    o = run_one("cortex-m", Case(g, [np.arange(5, dtype=np.int8)]))
    assert o.status == REJECTED and "RLX-U002" in o.detail
    assert o.extra["refused"] == [("mul", "i8")] and not o.extra["fused"]


def test_cortex_m_claims_no_op_its_firmware_does_not_run_alone() -> None:
    """Every (op, dtype) the cortex-m table claims for the generated loops runs alone on the
    firmware, bit-exact against the reference (one firmware build for all of them)."""
    from rlx_core.ir.dtypes import get, to_numpy_name
    from rlx_core.targets.cortex_m.caps import CAPS

    executable_target("cortex-m")
    lines, arrays, outs = [], [], []
    for op in ("max", "min", "neg", "reshape", "broadcast_in_dim", "argmax"):
        for d in CAPS.claim_for(op).dtypes:
            if d not in profile_for("cortex-m").dtypes:
                continue
            i = len(arrays)
            lines.append(f"  input %x{i} : {d}[2,3]")
            arrays.append((np.arange(6).reshape(2, 3) * 37 - 100).astype(to_numpy_name(get(d))))
            body = {"max": f"max(%x{i}, %x{i}) {{}}", "min": f"min(%x{i}, %x{i}) {{}}",
                    "neg": f"neg(%x{i}) {{}}", "reshape": f"reshape(%x{i}) {{shape=(3, 2)}}",
                    "broadcast_in_dim": f"broadcast_in_dim(%x{i}) {{dims=(1, 2), "
                                        f"shape=(2, 2, 3)}}",
                    "argmax": f"argmax(%x{i}) {{axis=1, index_dtype=i32}}"}[op]
            shape = {"reshape": "[3,2]", "broadcast_in_dim": "[2,2,3]", "argmax": "[2]"}
            res = "i32" if op == "argmax" else d
            outs.append((f"  %r{i} : {res}{shape.get(op, '[2,3]')} = {body} "
                         'loc("fuzz.py":1)', f"%r{i}"))
    text = "hir @claims {\n" + "\n".join(lines) + "\n" + "\n".join(o for o, _ in outs) + \
        "\n  return " + ", ".join(r for _, r in outs) + "\n}\n"
    o = run_one("cortex-m", Case(parse(text), arrays))
    assert o.status == "ok", f"{o.status}: {o.detail}"


def test_the_merger_marks_pairs_a_shard_learned_from_fused_kernels() -> None:
    """A shard written before RLX-U015 keyed `neg` i8 to a neg -> argmax refusal: the merger's
    re-check (legalization only) marks that rejection, and lists `neg` i8 as over-refused, not
    `mul` i8 (refused alone)."""
    from rlx_core.testing.refusals import overlearned, recheck_fused

    recs = [{"detail": "NoInt8KernelError: [RLX-U002] 1 node(s)", "named": [["neg", "i8"]],
             "ir": NEG_ARGMAX},
            {"detail": "NoInt8KernelError: [RLX-U002] 1 node(s)", "named": [["mul", "i8"]],
             "ir": MUL_FUSED}]
    assert recheck_fused("cortex-m", recs) == 1
    assert recs[0]["fused_now"] and "fused_now" not in recs[1]
    assert overlearned(recs) == [("neg", "i8")]
    assert recheck_fused("numpy", recs[1:]) == 0  # no firmware: nothing re-checked

"""The fuzzer's own parts: the generator covers the op tables and round-trips through IR text,
the comparison catches wrong answers (and only those), packing keeps cases apart, the shrinker
minimises, saved cases load back, and the known-deviations table is complete."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_core.ir import dtypes as dt
from rlx_core.ir.ops.hir import HIR_OPS
from rlx_core.ir.ops.mir import MIR_OPS
from rlx_core.ir.parser import parse
from rlx_core.ir.printer import print_graph
from rlx_core.testing import cases, deviations, runner
from rlx_core.testing.generator import generate
from rlx_core.testing.pack import pack
from rlx_core.testing.profile import profile_for
from rlx_core.testing.reference import ConeStats, evaluate
from rlx_core.testing.shrink import shrink
from rlx_core.testing.tolerance import verdict

NUMPY = profile_for("numpy")


def test_generator_is_deterministic_and_round_trips() -> None:
    for i in range(40):
        a, b = generate(NUMPY, (5, i)), generate(NUMPY, (5, i))
        text = print_graph(a.graph)
        assert text == print_graph(b.graph)
        assert all(np.array_equal(x, y, equal_nan=x.dtype.kind == "f")
                   for x, y in zip(a.inputs, b.inputs, strict=True))
        assert print_graph(parse(text)) == text


def test_generator_covers_every_op_and_dtype() -> None:
    ops, dtypes, zero, special = set(), set(), 0, 0
    for i in range(400):
        c = generate(NUMPY, (9, i))
        ops.update(c.ops)
        dtypes.update(v.type.dtype.name for v in c.graph.inputs)
        zero += any(0 in v.type.shape for v in c.graph.inputs)
        special += any(a.dtype.kind == "f" and not np.isfinite(a).all() for a in c.inputs)
    assert set(MIR_OPS) - ops == set()
    # not required here: the quantization ops (their own exact tests: tests/quant, the
    # decomposition and conformance cases), splatting (tests/splat checks those ops against
    # their oracle on each target), dense linear algebra and sparse graphs (tests/linalg:
    # numpy.linalg, scipy)
    from rlx_core.ir.ops.linalg import LINALG_OPS
    from rlx_core.ir.ops.sparse import SPARSE_OPS
    from rlx_core.ir.ops.splat import SPLAT_OPS
    from rlx_core.targets.numpy_ref.quant_semantics import QUANT_OPS

    assert set(HIR_OPS) - ops - set(QUANT_OPS) - set(SPLAT_OPS) - set(LINALG_OPS) - \
        set(SPARSE_OPS) == set()
    assert set(NUMPY.dtypes) - dtypes == set()
    assert zero > 10 and special > 10


def test_exact_outputs_must_match_bit_for_bit() -> None:
    exact = ConeStats()
    w = np.array([1.0, np.nan, -np.inf, 0.0], np.float32)
    assert verdict(w.copy(), w, exact, dt.f32).ok
    assert verdict(np.array([1.0, np.nan, -np.inf, -0.0], np.float32), w, exact, dt.f32).ok
    off = w.copy()
    off[0] = np.nextafter(np.float32(1), np.float32(2))
    assert not verdict(off, w, exact, dt.f32).ok
    assert not verdict(np.array([1.0, 0.0, -np.inf, 0.0], np.float32), w, exact, dt.f32).ok
    assert not verdict(np.array([1, 2], np.int32), np.array([1, 3], np.int32), exact, dt.i32).ok


def test_inexact_outputs_get_an_ulp_budget() -> None:
    s = ConeStats(exact=False, ulps=8, cond=1.0, scale=1.0, eps=float(np.finfo(np.float32).eps))
    w = np.array([1.0, 2.0, np.inf], np.float32)
    near = np.array([np.nextafter(np.float32(1), np.float32(2)), 2.0, np.inf], np.float32)
    assert verdict(near, w, s, dt.f32).ok
    assert not verdict(np.array([1.01, 2.0, np.inf], np.float32), w, s, dt.f32).ok
    assert not verdict(np.array([1.0, 2.0, np.nan], np.float32), w, s, dt.f32).ok
    assert not verdict(np.array([1.0, 2.0, -np.inf], np.float32), w, s, dt.f32).ok
    big = np.finfo(np.float32).max
    # a finite result within its bound of overflowing may meet an infinity
    s_big = ConeStats(exact=False, ulps=8, scale=float(big), eps=s.eps)
    assert verdict(np.array([big], np.float32), np.array([np.inf], np.float32), s_big, dt.f32).ok


def test_a_wrong_answer_is_a_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    cs = [generate(NUMPY, (11, i)) for i in range(12)]
    assert all(o.status != runner.MISMATCH for o in runner.run_batch("numpy", cs))
    real = runner.execute

    def wrong(target, g, inputs):
        outs = real(target, g, inputs)
        return [o + 1 if o.dtype.kind in "iuf" and o.size else o for o in outs]

    monkeypatch.setattr(runner, "execute", wrong)
    got = runner.run_batch("numpy", cs)
    assert sum(o.status == runner.MISMATCH for o in got) >= 6


def test_an_untyped_exception_is_a_crash_and_bisected(monkeypatch: pytest.MonkeyPatch) -> None:
    cs = [generate(NUMPY, (12, i)) for i in range(8)]
    real = runner.execute
    marker = cs[5].inputs[0]

    def flaky(target, g, inputs):
        if any(a is marker for a in inputs):  # the pack holding case 5, or case 5 alone
            raise ZeroDivisionError("boom")
        return real(target, g, inputs)

    monkeypatch.setattr(runner, "execute", flaky)
    got = runner.run_batch("numpy", cs)
    assert [o.status for o in got].count(runner.CRASH) == 1
    assert sum(o.status == "ok" for o in got) >= 6


@pytest.mark.parametrize("bound", [False, True])
def test_packing_keeps_cases_apart(bound: bool) -> None:
    """Ten cases in one pack; ``bound``: ten that bind weights as parameters, which the pack
    keeps under their new names with their data."""
    cs = [c for i in range(300) if (c := generate(NUMPY, (13, i))).graph.params or not bound]
    cs = cs[:10]
    g, arrays, where = pack(cs)
    assert len(g.params) == len(g.param_data) == sum(len(c.graph.params) for c in cs)
    assert not bound or g.params
    got = runner.execute("numpy", g, arrays)
    for c, sl in zip(cs, where, strict=True):  # (a pack mixing cases up gives mismatches)
        o = runner.classify("numpy", c, evaluate(c.graph, c.inputs), got[sl])
        assert o.status in (runner.OK, runner.KNOWN, runner.AMBIGUOUS), (o.status, o.detail)


def test_shrinker_reduces_to_the_culprit() -> None:
    from rlx_core.testing.shrink import prune

    c = next(c for i in range(200) if len((c := generate(NUMPY, (14, i))).graph.nodes) >= 5
             and "reduce_sum" in prune(c.graph, c.inputs).ops)  # on an output's path

    def fails(case) -> bool:  # "the bug": any reduce_sum in the graph
        return "reduce_sum" in case.ops

    small, checks = shrink(c, fails, budget_s=30)
    # the culprit and at most the output node it feeds (an output is never cut)
    assert "reduce_sum" in small.ops and len(small.ops) <= 2 and checks > 0
    assert len(small.graph.nodes) < len(c.graph.nodes)


def test_saved_cases_load_back(tmp_path) -> None:
    c = generate(NUMPY, (15, 3))
    path = cases.save(c, tmp_path, "numpy", {"detail": "x"})
    back, meta = cases.load(path)
    assert print_graph(back.graph) == print_graph(c.graph)
    assert meta["status"] == "open" and meta["target"] == "numpy"
    path.with_suffix(".npz").unlink()
    with pytest.raises(cases.FuzzCaseError):
        cases.load(path)


def test_every_known_deviation_is_owned_and_explained() -> None:
    for k in deviations.KNOWN:
        assert k.owner and k.why and k.targets
    assert deviations.input_policy("webgpu") is True  # IEEE specials follow numpy (gpu_common)
    assert deviations.input_policy("cpu") is True
    assert deviations.input_policy("numpy") is True
    z = np.zeros(1, np.float32)
    assert deviations.explain("numpy", ConeStats(nonfinite=True, near_overflow=True), z, z) is None
    nan, inf = np.array([np.nan], np.float32), np.array([np.inf], np.float32)
    composite = ConeStats(exact=False, nonfinite=True, ops=frozenset({"attention"}))
    assert deviations.explain("cpu", composite, nan, inf).id == "f64-composite-specials"
    assert deviations.explain("cpu", composite, z, inf) is None  # 0 for inf stays a mismatch


def test_bf16_dot_flush_is_explained_for_bf16_contractions_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the cpu's AMX-BF16 / AVX512-BF16 dot products flush subnormals (docs/dtypes.md): a
    # subnormal in the cone of a bf16 attention is explained while the bf16 GEMMs run natively;
    # the same cone in f32, a bf16 cone without a contraction or without a subnormal, and any
    # cone on the float path are not; a narrower entry explains first (NaN for inf)
    from rlx_core.targets.cpu import bf16gemm

    z, tiny = np.zeros(1, np.float32), np.array([-9.18e-41], np.float32)
    bf16 = ConeStats(exact=False, subnormal=True, ops=frozenset({"attention", "log"}),
                     typed_ops=frozenset({"attention:bf16", "log:bf16"}))
    f32 = ConeStats(exact=False, subnormal=True, typed_ops=frozenset({"attention:f32", "log:bf16"}))
    no_dot = ConeStats(exact=False, subnormal=True, typed_ops=frozenset({"exp:bf16"}))
    normal = ConeStats(exact=False, typed_ops=frozenset({"dot_general:bf16"}))
    big = ConeStats(exact=False, subnormal=True, near_overflow=True,  # overflow-ambiguous
                    typed_ops=frozenset({"conv2d_fused:bf16"}))
    monkeypatch.setenv("RLX_BF16_GEMM", "float")
    assert deviations.explain("cpu", bf16, z, tiny) is None
    native = [p for p in bf16gemm.native_paths() if p != "float"]
    if not native:
        pytest.skip("this CPU has no native bf16 GEMM path")
    monkeypatch.setenv("RLX_BF16_GEMM", native[0])
    assert deviations.explain("cpu", bf16, z, tiny).id == "cpu-bf16-dot-ftz"
    assert deviations.explain("numpy", bf16, z, tiny) is None
    for cone in (f32, no_dot, normal, big):
        assert deviations.explain("cpu", cone, z, tiny) is None
    both = ConeStats(exact=False, subnormal=True, nonfinite=True, ops=frozenset({"attention"}),
                     typed_ops=frozenset({"attention:bf16"}))
    nan, inf = np.array([np.nan], np.float32), np.array([-np.inf], np.float32)
    assert deviations.explain("cpu", both, nan, inf).id == "f64-composite-specials"


def test_the_issue_overflow_row_is_explained_not_hidden() -> None:
    # issue 31, Found 3: layer_norm of [1e38, 3e38, -3e38, 0] is NaN on the numpy target (its
    # f32 decomposition overflows) but finite in the f64 reference: owned by helper rel-crash
    from rlx_core.testing.generator import Case
    from tests.dispatch.graphs import GraphMaker

    m = GraphMaker()
    x = m.input("x", "f32", (1, 4))
    case = Case(m.graph(m.op("layer_norm", [x])), [np.array([[1e38, 3e38, -3e38, 0]], np.float32)])
    out = runner.run_one("numpy", case)
    assert out.status == runner.KNOWN and out.known == "f32-overflow-sums"
    assert "rel-crash" in next(k.owner for k in deviations.KNOWN if k.id == out.known)


def test_long_run_command_writes_a_report(tmp_path) -> None:
    import json

    from rlx_core.testing.fuzz import main

    report = tmp_path / "fuzz.md"
    rc = main(["--minutes", "0.02", "--targets", "numpy", "--pack", "10", "--seed", "4",
               "--report", str(report), "--cases-dir", str(tmp_path / "cases")])
    data = json.loads(report.with_suffix(".json").read_text())
    assert rc == 0 and data["targets"]["numpy"]["graphs"] >= 10
    text = report.read_text()
    assert "| numpy |" in text and "Known deviations" in text and "f32-overflow-sums" in text


def test_dividing_by_a_cancelled_value_widens_the_bound() -> None:
    from tests.dispatch.graphs import GraphMaker

    m = GraphMaker()
    a, b, x = (m.input(n, "f32", (2,)) for n in ("a", "b", "x"))
    g = m.graph(m.op("div", [x, m.op("sub", [a, b])]))
    near = [np.array([1.0, 1.0], np.float32), np.array([0.9999999, 0.5], np.float32),
            np.ones(2, np.float32)]
    far = [near[0], np.array([0.5, 0.5], np.float32), near[2]]
    cond_near, cond_far = (evaluate(g, ins).stats[0].cond for ins in (near, far))
    assert cond_near > 1e6 * cond_far  # 1 / (1 - 0.9999999): the difference is all rounding


def test_reduce_prod_whose_partial_products_underflow_is_order_dependent() -> None:
    """inf * (tiny * tiny) is NaN in f32, inf left to right: the reference flags the cone."""
    g = parse('hir @p {\n  input %x : f32[2,3]\n'
              '  %0 : f32[2] = reduce_prod(%x) {axes=(1,)} loc("t.py":1)\n  return %0\n}\n')
    risky = np.array([[-np.inf, 3.5e-38, 3.5e-38], [1.0, 2.0, 3.0]], np.float32)
    safe = np.array([[-np.inf, 0.5, 0.25], [1.0, 2.0, 3.0]], np.float32)
    assert evaluate(g, [risky]).stats[0].near_overflow
    assert not evaluate(g, [safe]).stats[0].near_overflow
    huge = np.array([[3e38, 3e38, 1e-30], [1.0, 2.0, 3.0]], np.float32)
    assert evaluate(g, [huge]).stats[0].near_overflow  # 3e38 * 3e38 overflows first


def test_attention_scores_past_the_working_dtype_are_order_dependent() -> None:
    """An f16 score q . k above 65504 is inf on every target, finite in the f64 reference."""
    g = parse('hir @a {\n  input %q : f16[1,1,2,2]\n  input %k : f16[1,1,2,2]\n'
              '  input %v : f16[1,1,2,2]\n'
              '  %0 : f16[1,1,2,2] = attention(%q, %k, %v) {layout="bhsd", mask="none", '
              'scale=1.0} loc("t.py":1)\n  return %0\n}\n')
    v = np.ones((1, 1, 2, 2), np.float16)
    big = np.full((1, 1, 2, 2), 200.0, np.float16)  # 200 * 200 * 2 = 80000 > 65504
    small = np.full((1, 1, 2, 2), 2.0, np.float16)
    assert evaluate(g, [big, big, v]).stats[0].near_overflow
    assert not evaluate(g, [small, small, v]).stats[0].near_overflow


def test_a_refused_pair_is_never_drawn_again_whatever_the_level_of_its_op() -> None:
    """A target's refusal names an (op, dtype) pair; the run stops drawing it, whether the op is
    a MIR primitive or an HIR op (gelu, requantize), which the claimed-pairs set alone missed."""
    refused = {("exp", "f32"), ("gelu", "f64"), ("requantize", "i32")}
    p = NUMPY.without(refused)  # unrefused, these 300 graphs draw all three (and gelu in f16)
    assert not p.claims("exp", "f32") and p.claims("exp", "f64")
    assert not p.claims("gelu", "f64") and p.claims("gelu", "f16")
    drawn = set()
    for i in range(300):
        c = generate(p, (9, i))
        drawn.update((n.op, n.inputs and c.graph.type_of(n.inputs[0]).dtype.name)
                     for n in c.graph.nodes)
    assert not drawn & {("exp", "f32"), ("gelu", "f64")}
    assert not any(op == "requantize" for op, _ in drawn)
    assert any(op == "exp" for op, _ in drawn)  # other dtypes of a refused op still come

"""The fuzzer's bound weights (generator.py): some graphs hold their matmul and convolution
weights as parameters with data, which the reference, saved cases and the shrinker carry along
(packing: test_machinery.test_packing_keeps_cases_apart), and which reach the cpu's prepacked
kernels (cpu/prepack.py)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.ir.graph import ValueKind
from rlx_core.ir.printer import print_graph
from rlx_core.targets.registry import get_target
from rlx_core.testing import cases, runner
from rlx_core.testing.generator import generate
from rlx_core.testing.pack import pack
from rlx_core.testing.profile import profile_for
from rlx_core.testing.reference import evaluate
from rlx_core.testing.shrink import shrink

NUMPY = profile_for("numpy")
_CPU = get_target("cpu").available()


def _bound(profile, seed: int, n: int = 300) -> list:
    return [c for i in range(n) if (c := generate(profile, (seed, i))).graph.params]


def test_some_graphs_bind_their_weights_and_the_rest_are_unchanged_in_form() -> None:
    got = _bound(NUMPY, 21)
    assert 30 <= len(got) <= 150  # of 300
    ops = collections.Counter(op for c in got for op in set(c.ops))
    assert {"dot_general", "linear", "conv2d"} <= set(ops)
    for c in got:
        g = c.graph
        assert set(g.param_data) == {p.name for p in g.params}
        assert all(p.kind is ValueKind.PARAM and g.param_data[p.name].shape == p.type.shape
                   for p in g.params)
        assert len(c.inputs) == len(g.inputs)  # the inputs stay the call's arguments
    again = _bound(NUMPY, 21)
    assert all(np.array_equal(a.graph.param_data[k], b.graph.param_data[k], equal_nan=True)
               for a, b in zip(got, again, strict=True) for k in a.graph.param_data)


def test_saved_cases_keep_their_bound_weights(tmp_path) -> None:
    c = _bound(NUMPY, 23)[0]
    back, _ = cases.load(cases.save(c, tmp_path, "numpy", {"detail": "x"}))
    assert print_graph(back.graph) == print_graph(c.graph)
    for p in c.graph.params:
        np.testing.assert_array_equal(back.graph.param_data[p.name], c.graph.param_data[p.name])
    assert runner.run_one("numpy", back).status == runner.run_one("numpy", c).status


def test_the_shrinker_carries_weights_and_unbinds_those_the_failure_does_not_need() -> None:
    c = next(c for c in _bound(NUMPY, 24) if "dot_general" in c.ops)

    def fails(case) -> bool:  # "the bug": any dot_general, bound or not
        evaluate(case.graph, case.inputs)  # a case whose weights went missing raises here
        return "dot_general" in case.ops

    small, _ = shrink(c, fails, budget_s=30)
    assert "dot_general" in small.ops and not small.graph.params  # unbound: not needed

    def needs_bound(case) -> bool:  # "the bug": a dot_general reading a parameter
        evaluate(case.graph, case.inputs)
        names = {p.name for p in case.graph.params}
        return any(n.op == "dot_general" and names & set(n.inputs) for n in case.graph.nodes)

    assert needs_bound(c)
    small, _ = shrink(c, needs_bound, budget_s=30)
    assert small.graph.params and set(small.graph.param_data) == {
        p.name for p in small.graph.params}


def _wide_f32_or_i8(c) -> bool:
    """Does case ``c`` bind a GEMM weight the cpu prepacks: f32 with 32 columns or more (its
    own GEMM's threshold), or an int8 linear's weight?"""
    return any((p.type.dtype.name == "f32" and p.type.rank == 2 and max(p.type.shape) >= 32)
               or (p.type.dtype.name == "i8" and p.type.rank == 2) for p in c.graph.params)


@pytest.mark.skipif(not _CPU[0], reason=f"CPU target unavailable: {_CPU[1]}")
def test_bound_weights_reach_the_cpu_prepacked_kernels() -> None:
    """One pack of the cpu's own cases that bind GEMM weights (one compile): the f32 GEMM's
    panels and the int8 GEMM's are prepacked from the fuzzer's parameters, and every case
    gives the reference's values."""
    cpu = profile_for("cpu")
    cs = [c for c in (generate(cpu, (9, 1, i)) for i in range(800)) if _wide_f32_or_i8(c)]
    cs = cs[:24]
    g, arrays, where = pack(cs)
    exe = rlx.compile(g, target="cpu", record=False)
    kinds = {p["kind"] for p in exe.program.info["prepacked"]}
    assert {"f32", "i8"} <= kinds, kinds
    got = exe(*arrays)
    got = [np.asarray(v) for v in (got if isinstance(got, tuple) else (got,))]
    for c, sl in zip(cs, where, strict=True):
        o = runner.classify("cpu", c, evaluate(c.graph, c.inputs), got[sl])
        assert o.status in ("ok", "known", "overflow-ambiguous"), (o.status, o.detail, c.seed)

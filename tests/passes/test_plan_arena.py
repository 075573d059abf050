"""PlanArena: liveness, reuse of memory between buffers that are never alive together."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlx_core.errors import VerifyError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder
from rlx_core.ir.graph import Graph, Level, TensorType, Value, ValueKind
from rlx_core.ir.parser import parse
from rlx_core.ir.printer import print_graph
from rlx_core.ir.verifier import verify
from rlx_core.passes.base import PassContext
from rlx_core.passes.fuse import Fuse
from rlx_core.passes.plan_arena import PlanArena, align_up, liveness
from rlx_core.targets.numpy_ref.executor import build_program, interpret

F32 = dt.f32


def lir_of(g: Graph) -> Graph:
    return verify(Fuse().run(verify(g), PassContext()))


def plan(g: Graph, alias_reshapes: bool = True) -> Graph:
    return verify(PlanArena(alias_reshapes=alias_reshapes).run(lir_of(g), PassContext()))


def chain(layers: int, width: int = 32) -> tuple[Graph, list[str]]:
    """x -> (matmul, relu) x layers: each layer's output is read only by the next layer."""
    x = Value("x", TensorType(F32, (8, width)), ValueKind.INPUT)
    ws = [Value(f"w{i}", TensorType(F32, (width, width)), ValueKind.PARAM) for i in range(layers)]
    b = Builder()
    h, hidden = x, []
    for w in ws:
        d = b.emit("dot_general", [h, w], {"contract": ((1,), (0,))})
        zero = b.emit("constant", [], {"value": 0.0, "shape": (8, width), "dtype": F32})
        h = b.emit("max", [d, zero])
        hidden.append(h.name)
    g = Graph("chain", Level.MIR, (x,), tuple(ws), tuple(b.nodes), (h.name,))
    return g, hidden


def test_four_layer_chain_needs_two_slots() -> None:
    g, hidden = chain(4)
    lir = plan(g)
    p = lir.plan
    assert [s.value for s in p.slots] == hidden[:-1]  # the returned value gets no slot
    buffer = 8 * 32 * 4
    assert all(s.size == buffer for s in p.slots)
    assert len({s.offset for s in p.slots}) == 2  # h1 and h3 share memory
    assert p.peak_bytes == 2 * buffer < p.naive_bytes == 3 * buffer
    assert [(s.first, s.last) for s in p.slots] == [(0, 1), (1, 2), (2, 3)]


def test_chain_runs_through_the_arena() -> None:
    g, _ = chain(4, width=16)
    lir = plan(g)
    rng = np.random.default_rng(0)
    params = {f"w{i}": rng.standard_normal((16, 16), dtype=np.float32) / 4 for i in range(4)}
    x = rng.standard_normal((8, 16), dtype=np.float32)
    want = interpret(g, [x], params)[0]
    np.testing.assert_array_equal(build_program(lir).run([x], params)[0], want)


def reshape_chain() -> tuple[Graph, list[str]]:
    """x -> exp -> reshape -> reshape -> add(.., exp): two reshapes of an arena value."""
    x = Value("x", TensorType(F32, (3,)), ValueKind.INPUT)
    b = Builder()
    a = b.emit("exp", [x])
    r = b.emit("reshape", [a], {"shape": (1, 3)})
    c = b.emit("reshape", [r], {"shape": (3,)})
    y = b.emit("add", [c, a])
    return Graph("g", Level.MIR, (x,), (), tuple(b.nodes), (y.name,)), [a.name, r.name, c.name]


def test_offsets_are_aligned_and_sizes_rounded() -> None:
    g, names = reshape_chain()
    p = plan(g, alias_reshapes=False).plan
    assert {s.value for s in p.slots} == set(names)
    assert all(s.offset % 64 == 0 and s.size == 64 for s in p.slots)
    # a is alive from kernel 0 to kernel 3, so it overlaps both reshapes; r and c touch at k2
    assert p.peak_bytes == 3 * 64
    assert align_up(1, 64) == 64 and align_up(128, 64) == 128 and align_up(0, 64) == 0


def test_reshapes_alias_their_input_and_the_root_lives_for_all_of_them() -> None:
    g, (a, r, c) = reshape_chain()
    lir = plan(g)
    p = lir.plan
    slots = {s.value: s for s in p.slots}
    assert slots[r].alias == a and slots[c].alias == a  # a chain resolves to its first value
    assert slots[a].alias == "" and {s.offset for s in p.slots} == {0}
    assert (slots[a].first, slots[a].last) == (0, 3) and (slots[c].first, slots[c].last) == (2, 3)
    assert p.peak_bytes == 64 and p.naive_bytes == 3 * 64
    assert p.is_alias(c) and not p.is_alias(a) and not p.is_alias("nope")
    text = print_graph(lir)
    assert f"alias %{a}" in text and parse(text).plan == p
    x = np.array([0.5, -1.0, 2.0], np.float32)
    np.testing.assert_array_equal(build_program(lir).run([x], {})[0], interpret(g, [x])[0])


def test_reshapes_of_caller_buffers_or_of_returned_values_keep_their_own_bytes() -> None:
    x = Value("x", TensorType(F32, (2, 3)), ValueKind.INPUT)
    b = Builder()
    r = b.emit("reshape", [x], {"shape": (3, 2)})  # of a graph input: the caller owns x
    e = b.emit("exp", [r])
    ret = b.emit("reshape", [e], {"shape": (6,)})  # returned: outlives the call
    t = b.emit("tanh", [ret])
    g = Graph("g", Level.MIR, (x,), (), tuple(b.nodes), (ret.name, t.name))
    p = plan(g).plan
    assert not any(s.alias for s in p.slots)


def test_verifier_rejects_an_alias_off_its_roots_bytes() -> None:
    import dataclasses

    g, (a, r, c) = reshape_chain()
    lir = plan(g)
    bad = tuple(dataclasses.replace(s, offset=64) if s.value == c else s for s in lir.plan.slots)
    lir.plan = dataclasses.replace(lir.plan, slots=bad, peak_bytes=128)
    with pytest.raises(VerifyError, match="does not share its bytes"):
        verify(lir)


def test_liveness_spans_writer_to_last_reader() -> None:
    g, hidden = chain(3)
    spans = liveness(lir_of(g))
    assert spans == {hidden[0]: (0, 1), hidden[1]: (1, 2)}


def test_plan_rejects_mir() -> None:
    g, _ = chain(2)
    with pytest.raises(VerifyError, match="plan_arena expects a LIR graph"):
        PlanArena().run(g, PassContext())


def random_dag(seed: int) -> Graph:
    """A random MIR DAG over f32[4,6] with mixed elementwise, reduce and movement ops."""
    rng = random.Random(seed)
    x = Value("x", TensorType(F32, (4, 6)), ValueKind.INPUT)
    b = Builder()
    pool = [x]
    for _ in range(rng.randint(3, 14)):
        a, c = rng.choice(pool), rng.choice(pool)
        kind = rng.random()
        if kind < 0.45:
            v = b.emit(rng.choice(["add", "mul", "max", "sub"]), [a, c])
        elif kind < 0.65:
            v = b.emit(rng.choice(["tanh", "neg", "abs", "sin"]), [a])
        elif kind < 0.85:
            s = b.emit(rng.choice(["reduce_sum", "reduce_max"]), [a], {"axes": (1,)})
            v = b.emit("broadcast_in_dim", [s], {"shape": (4, 6), "dims": (0,)})
        elif kind < 0.93:
            t = b.emit("transpose", [a], {"perm": (1, 0)})
            v = b.emit("transpose", [t], {"perm": (1, 0)})
        else:  # reshapes: aliases of their input's slot
            t = b.emit("reshape", [a], {"shape": (6, 4)})
            v = b.emit("reshape", [t], {"shape": (4, 6)})
        pool.append(v)
    outs = tuple(dict.fromkeys(v.name for v in rng.sample(pool[1:], min(2, len(pool) - 1))))
    return Graph("r", Level.MIR, (x,), (), tuple(b.nodes), outs)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6))
def test_random_plans_never_overlap_live_slots(seed: int) -> None:
    g = random_dag(seed)
    lir = plan(g)  # verify() rejects live slots that overlap in memory
    p = lir.plan
    assert p.peak_bytes <= p.naive_bytes
    returned = set(g.outputs)
    assert not any(s.value in returned for s in p.slots)
    for s in p.slots:
        assert s.offset % p.alignment == 0 and s.first <= s.last
    text = print_graph(lir)  # kernels and plan survive the text form
    assert print_graph(parse(text)) == text and parse(text).plan == p
    x = np.random.default_rng(seed).standard_normal((4, 6)).astype(np.float32)
    for want, got in zip(interpret(g, [x]), build_program(lir).run([x], {}), strict=True):
        np.testing.assert_array_equal(got, want)


class _InPlaceTarget:
    """A target that takes every in-place share the plan offers (CpuTarget.arena_in_place)."""

    def arena_in_place(self, g: Graph, options: object) -> object:
        return lambda k, out, src: True


def concat_exp(read_again: bool = False) -> Graph:
    """x -> concat (opaque) -> exp + itself (elementwise) -> concat: the elementwise kernel
    reads the first concat, which dies there (unless ``read_again``), at its own index."""
    x = Value("x", TensorType(F32, (4, 8)), ValueKind.INPUT)
    b = Builder()
    t = b.emit("concat", [x, x], {"axis": 0})
    u = b.emit("add", [b.emit("exp", [t]), t])
    y = b.emit("concat", [u, t if read_again else x], {"axis": 0})
    return Graph("g", Level.MIR, (x,), (), tuple(b.nodes), (y.name,))


def plan_in_place(g: Graph, target: object = None, in_place: bool = True) -> Graph:
    return verify(PlanArena(in_place=in_place).run(lir_of(g), PassContext(target=target)))


def test_a_kernel_writes_over_an_input_that_dies_there() -> None:
    g = concat_exp()
    lir = plan_in_place(g, _InPlaceTarget())
    (src, _), (out, _) = [(k.outputs[0], k) for k in lir.kernels[:2]]
    slots = {s.value: s for s in lir.plan.slots}
    assert lir.plan.written_over() == {out: src}
    assert slots[out].offset == slots[src].offset and slots[out].over == src
    # the input's bytes stay taken until the output's last reader
    assert (slots[src].first, slots[src].last) == (0, 2) and lir.plan.peak_bytes == 256
    text = print_graph(lir)
    assert f"over %{src}" in text and parse(text).plan == lir.plan
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(build_program(lir).run([x], {})[0], interpret(g, [x])[0])


def test_no_share_without_the_targets_say_or_past_the_inputs_last_reader() -> None:
    assert plan_in_place(concat_exp()).plan.written_over() == {}  # no target: never
    assert plan_in_place(concat_exp(), _InPlaceTarget(), in_place=False).plan.written_over() == {}
    assert plan_in_place(concat_exp(read_again=True), _InPlaceTarget()).plan.written_over() == {}


def test_reads_at_own_index_only_for_same_shape_elementwise_reads() -> None:
    from rlx_core.passes.plan_arena import reads_at_own_index

    x = Value("x", TensorType(F32, (4,)), ValueKind.INPUT)
    b = Builder()
    s = b.emit("concat", [x, x], {"axis": 0})  # 8
    bc = b.emit("broadcast_in_dim", [s], {"shape": (2, 8), "dims": (1,)})
    y = b.emit("exp", [bc])
    g = Graph("g", Level.MIR, (x,), (), tuple(b.nodes), (y.name,))
    lir = lir_of(g)
    k = lir.kernels[1]
    assert not reads_at_own_index(k, s.name, (8,))  # read through a broadcast
    assert plan_in_place(g, _InPlaceTarget()).plan.written_over() == {}


def test_verifier_rejects_an_over_slot_off_its_inputs_bytes() -> None:
    import dataclasses

    lir = plan_in_place(concat_exp(), _InPlaceTarget())
    (out, src), = lir.plan.written_over().items()
    bad = tuple(dataclasses.replace(s, offset=256) if s.value == out else s
                for s in lir.plan.slots)
    lir.plan = dataclasses.replace(lir.plan, slots=bad, peak_bytes=512)
    with pytest.raises(VerifyError, match="written over"):
        verify(lir)

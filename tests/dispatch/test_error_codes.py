"""Every code documented in docs/errors.md is produced by real code paths here."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from rlx_core.errors import RlxError
from tests.dispatch.graphs import GraphMaker

DOC = Path(__file__).resolve().parents[2] / "docs" / "errors.md"


def documented_codes() -> list[str]:
    return re.findall(r"^## (RLX-[A-Z]\d{3}) ", DOC.read_text(), flags=re.M)


def _legalization(graph, target, **opts):
    from rlx_core.dispatch.legalize import legalize_graph
    from rlx_core.passes.base import CompileOptions

    return legalize_graph(graph, target, CompileOptions(**opts), raise_errors=False)


def _codes_of_failures(graph, target, **opts) -> list[str]:
    return [f.decision.code for f in _legalization(graph, target, **opts).failures]


def _one(op, specs, **attrs):
    m = GraphMaker()
    ins = [m.input(f"a{i}", d, s) for i, (d, s) in enumerate(specs)]
    return m.graph(m.op(op, ins, **attrs))


def p_l000():
    from rlx_core.dispatch.legalize import legalize_graph

    legalize_graph(_one("log", [("f64", (3,))]), "webgpu")


def p_l001():
    from rlx_core.ir.ops import MIR_OPS
    from tests.dispatch.graphs import make_caps

    caps = make_caps("mydev", mir=tuple(op for op in MIR_OPS if op != "scatter_add"))
    return _codes_of_failures(_one("scatter_add", [("f32", (4,)), ("i32", (2,)), ("f32", (2,))],
                                   axis=0), caps)


def p_l002():
    return _codes_of_failures(_one("exp", [("f64", (3,))]), "webgpu")


def p_l003():
    return _codes_of_failures(_one("exp", [("f16", (3,))]), "webgpu")


def p_l004():
    return _codes_of_failures(_one("gather", [("f32", (4, 2)), ("i64", (3,))], axis=0), "webgpu")


def p_l005():
    return _codes_of_failures(_one("neg", [("f32", (33 * 1024 * 1024,))]), "webgpu")


def p_l006():
    from rlx_core.dispatch.capabilities import Constraint, OpClaim
    from tests.dispatch.graphs import make_caps

    caps = make_caps(extra=(OpClaim(("neg",), ("f32",), (Constraint("max_elements", limit=2),)),))
    return _codes_of_failures(_one("neg", [("f32", (3,))]), caps)


def p_l007():
    return _codes_of_failures(_one("softmax", [("f32", (2, 3))]), "cpu",
                              policy={"softmax": "force-native"})


def p_l008():
    from rlx_core.dispatch.capabilities import Constraint, OpClaim
    from tests.dispatch.graphs import make_caps

    caps = make_caps(extra=(OpClaim(("gelu",), ("f32",),
                                    (Constraint("static_attr", "approximate", ("tanh",)),)),))
    return _codes_of_failures(_one("gelu", [("f32", (3,))]), caps, policy="force-native")


def p_l009():
    from rlx_core.dispatch.policy import set_policy

    set_policy("fastest")


def p_l010(monkeypatch):
    from rlx_core.dispatch import decompositions
    from rlx_core.dispatch.legalize import legalize_graph

    def broken(node, ins, b):
        return b.emit("reduce_sum", [ins[0]], {"axes": (1,)})

    monkeypatch.setitem(decompositions.DECOMPOSITIONS, "softmax", broken)
    legalize_graph(_one("softmax", [("f32", (2, 5))]), "cpu")


def p_p001():
    from rlx_core.ir.parser import parse

    parse("garbage")


def p_v001():
    from rlx_core.ir.graph import Level
    from rlx_core.ir.verifier import verify

    verify(_one("softmax", [("f32", (2, 3))]).with_nodes(
        _one("softmax", [("f32", (2, 3))]).nodes, level=Level.MIR))


def p_v002():
    from rlx_core.ir.ops import opdef

    opdef("sofmax")


def p_t001():
    _one("add", [("f32", (2, 3)), ("f32", (3, 2))])


def p_t002():
    from rlx_core.ir import dtypes as dt

    dt.get("f99")


def p_t003():
    _one("softmax", [("f32", (2, 3))], axis=5)


def p_r001():
    import rlx_core as rlx

    exe = rlx.compile(lambda x: x * 2.0, np.ones((2, 3), np.float32), target="numpy")
    exe(np.ones((3, 3), np.float32))


def p_x001(monkeypatch):
    import rlx_core as rlx
    from rlx_core.targets.registry import get_target

    monkeypatch.setattr(type(get_target("numpy")), "available", lambda self: (False, "test"))
    rlx.compile(lambda x: x * 2.0, np.ones((2,), np.float32), target="numpy")


def p_x002():
    from rlx_core.targets.registry import get_target

    get_target("tpu9")


PRODUCERS = {
    "RLX-L000": p_l000, "RLX-L001": p_l001, "RLX-L002": p_l002, "RLX-L003": p_l003,
    "RLX-L004": p_l004, "RLX-L005": p_l005, "RLX-L006": p_l006, "RLX-L007": p_l007,
    "RLX-L008": p_l008, "RLX-L009": p_l009, "RLX-L010": p_l010, "RLX-P001": p_p001,
    "RLX-V001": p_v001, "RLX-V002": p_v002, "RLX-T001": p_t001, "RLX-T002": p_t002,
    "RLX-T003": p_t003, "RLX-R001": p_r001, "RLX-X001": p_x001, "RLX-X002": p_x002,
}


def test_every_documented_code_has_a_producer() -> None:
    assert sorted(documented_codes()) == sorted(PRODUCERS)


@pytest.mark.parametrize("code", sorted(PRODUCERS))
def test_code_is_produced(code, monkeypatch) -> None:
    fn = PRODUCERS[code]
    from rlx_core.dispatch.policy import set_policy

    previous = set_policy(None)
    try:
        args = (monkeypatch,) if fn.__code__.co_argcount else ()
        try:
            got = fn(*args)
        except RlxError as err:
            got = [err.code]
            assert err.hint or code in ("RLX-R001", "RLX-X001", "RLX-V001", "RLX-P001",
                                        "RLX-T001")
        assert got is not None and code in got, (code, got)
    finally:
        set_policy(previous)

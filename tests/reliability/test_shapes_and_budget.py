"""Found item 5 of issue 31: shapes are validated where they enter rlx, and a run that would
allocate more than the memory budget is refused, typed, before it starts — on every target."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.errors import InvalidShapeError, RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import TensorType
from rlx_core.runtime import memory_budget as mb
from rlx_core.runtime.memory_budget import MemoryBudgetError, MemoryLimitSyntaxError
from rlx_core.targets.registry import get_target


@pytest.mark.parametrize("shape, says", [((-1, 3), "negative (-1)"), ((2.5, 3), "2.5 (float)"),
                                         (("3",), "'3' (str)"), ((True, 2), "True (bool)"),
                                         ((2, None), "None"), (5, "not a sequence")])
def test_spec_rejects_unusable_dims(shape, says) -> None:
    with pytest.raises(InvalidShapeError, match="rlx.spec shape") as info:
        rlx.spec(shape)
    assert says in info.value.message and info.value.code == "RLX-T004" and info.value.hint


def test_numpy_integer_dims_are_fine_and_become_ints() -> None:
    s = rlx.spec((np.int64(2), np.int32(3)))
    assert s.shape == (2, 3) and all(type(d) is int for d in s.shape)
    assert TensorType(dt.f32, (np.int64(4),)).shape == (4,)
    assert rlx.spec((0, 3)).shape == (0, 3)  # 0-size tensors are legal


def test_tensor_type_is_the_backstop() -> None:
    with pytest.raises(InvalidShapeError):
        TensorType(dt.f32, (-5, 3))


def test_negative_spec_never_compiles() -> None:
    with pytest.raises(InvalidShapeError):
        rlx.compile(lambda x: x * 2.0, rlx.spec((-1, 3)), target="numpy")


def test_onnx_input_with_negative_dim_is_typed() -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from rlx_core.frontend.onnx_import import import_model

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-5, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [-5, 3])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(InvalidShapeError, match="ONNX value 'x' shape"):
        import_model(model.SerializeToString())
    with pytest.raises(InvalidShapeError, match=r"input_shapes\['x'\]"):
        import_model(model, input_shapes={"x": (2.5, 3)})
    assert onnx  # the model above is real ONNX


BIG = (np.ones((100000, 1), np.float32), np.ones((1, 100000), np.float32))


@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_huge_outer_product_is_refused_before_running(target) -> None:
    ok, why = get_target(target).available()
    if not ok:
        pytest.skip(f"{target} is not available here: {why}")
    exe = rlx.compile(lambda a, b: a @ b, *BIG, target=target, memory_limit="1G")
    with pytest.raises(MemoryBudgetError) as info:
        exe(*BIG)
    msg = info.value.message
    assert "output %0 f32[100000,100000]" in msg and "40000000000 bytes" in msg, msg
    assert "RLX_MEMORY_LIMIT" in info.value.hint


def test_jit_on_the_cpu_module_checks_the_budget_once_per_specialization() -> None:
    from rlx_core.api import default_jit_target

    f = rlx.jit(lambda a, b: a @ b, memory_limit="1G")
    with pytest.raises(MemoryBudgetError, match=f"on {default_jit_target()}"):
        f(*BIG)
    small = (np.ones((4, 1), np.float32), np.ones((1, 4), np.float32))
    np.testing.assert_array_equal(f(*small), np.ones((4, 4), np.float32))


def test_default_budget_comes_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv(mb.ENV, "1M")
    a = np.ones((1000, 1), np.float32)
    exe = rlx.compile(lambda a, b: a @ b, a, a.T, target="numpy")
    with pytest.raises(MemoryBudgetError, match=r"3.8 MiB .* over the memory budget of 1.0 MiB"):
        exe(a, a.T)
    monkeypatch.setenv(mb.ENV, "off")
    exe = rlx.compile(lambda a, b: a @ b, a, a.T, target="numpy")
    assert exe(a, a.T).shape == (1000, 1000)


def test_arena_and_intermediates_count() -> None:
    # one output of 400 B; its inputs' product (a node inside the arena or held as an array)
    # is 40 KB: the budget sees the intermediate, not only the output
    x = np.ones((100, 100), np.float32)
    exe = rlx.compile(lambda x: (x * 2.0 + 1.0).sum(axis=1), x, target="numpy",
                      memory_limit=20000)
    allocs = mb.allocations(exe.lir, materializes_nodes=True)
    assert any(a.nbytes >= 40000 for a in allocs), allocs
    with pytest.raises(MemoryBudgetError):
        exe(x)
    assert exe.lir.plan is not None


@pytest.mark.parametrize("text, want", [("1000", 1000), ("512M", 512 << 20), ("8GiB", 8 << 30),
                                        ("2k", 2048), ("off", None), ("0", None), (4096, 4096)])
def test_limit_syntax(text, want) -> None:
    assert mb.parse_limit(text, "x") == want


def test_percentage_uses_machine_memory() -> None:
    total = mb.machine_memory()
    if not total:
        pytest.skip("this platform does not report its memory")
    assert abs(mb.parse_limit("50%", "x") - total // 2) <= 1
    assert mb.resolve_limit(None) in (int(total * mb.DEFAULT_FRACTION), mb.resolve_limit(None))


@pytest.mark.parametrize("bad", ["lots", "-5", "1.5.2G", -1])
def test_bad_limit_is_typed(bad) -> None:
    with pytest.raises(MemoryLimitSyntaxError) as info:
        mb.parse_limit(bad, "memory_limit")
    assert isinstance(info.value, RlxError) and info.value.code == "RLX-R031"

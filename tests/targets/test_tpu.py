"""The tpu target: StableHLO text for every primitive kind, run by XLA (CPU backend here).

The conformance suite (tests/conformance) runs every MIR primitive on tpu through the registry;
these tests pin what it cannot see: the module text (dimension numbers, reduction bodies,
gather/scatter), the TPU's dtype rules as legalization failures, XLA's rejections as a typed
error that names the module line and LIR node, MiniLM and an MLP training step against numpy.
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.dispatch.errors import LegalizationError
from rlx_core.targets.registry import get_target
from tests.models.conftest import target_or_skip

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _source(fn, *args) -> str:
    _, _, lir, _ = rlx.lower(fn, *args, target="tpu", record=False)
    return get_target("tpu").render_sources(lir)["main"]


def test_module_spells_dimension_numbers_bodies_and_indexing() -> None:
    x = np.ones((2, 3, 4), np.float32)
    w = np.ones((2, 4, 5), np.float32)
    src = _source(lambda a, b: rlx.matmul(a, b), x, w)
    assert "batching_dims = [0] x [0], contracting_dims = [2] x [1]" in src
    assert "precision = [HIGHEST, HIGHEST]" in src
    src = _source(lambda a: a.max(axis=1), x)
    assert "applies stablehlo.maximum across dimensions = [1]" in src
    assert "dense<0xFF800000>" in src  # -inf init, written as its bits
    src = _source(lambda a: a.argmax(axis=2), x)
    assert "reducer(" in src and "stablehlo.return" in src
    table = np.ones((5, 3), np.float32)
    ids = np.array([[0, 4], [2, -1]], np.int32)
    src = _source(lambda t, i: rlx.take(t, i, axis=0), table, ids)
    assert "#stablehlo.gather<offset_dims = [2], collapsed_slice_dims = [0]" in src
    assert "index_vector_dim = 2" in src
    src = _source(lambda a: rlx.erf(a), x)
    assert "chlo.erf" in src


def test_gather_scatter_and_negative_indices_run_on_xla() -> None:
    target_or_skip("tpu")
    table = np.arange(15, dtype=np.float32).reshape(5, 3)
    ids = np.array([[0, 4], [2, -1]], np.int32)
    got = rlx.compile(lambda t, i: rlx.take(t, i, axis=0), table, ids, target="tpu")(table, ids)
    np.testing.assert_array_equal(got, np.take(table, ids, axis=0))


def test_the_tpu_rules_are_legalization_failures_with_hints() -> None:
    with pytest.raises(LegalizationError) as info:
        rlx.lower(lambda a: rlx.exp(a), np.ones(3, np.float64), target="tpu", record=False)
    assert "RLX-L002" in str(info.value) and "TPUs have no f64" in str(info.value)
    ids = np.array([1, 2], np.int64)
    with pytest.raises(LegalizationError) as info:
        rlx.lower(lambda t, i: rlx.take(t, i, axis=0), np.ones((4, 2), np.float32), ids,
                  target="tpu", record=False)
    assert "RLX-L004" in str(info.value) and "int32" in str(info.value)


def test_xla_rejection_names_the_module_line_and_node() -> None:
    target_or_skip("tpu")
    from rlx_core.targets.tpu.renderer import render_module
    from rlx_core.targets.tpu.runtime import XlaCompileError, compile_module

    x = np.ones((2, 3), np.float32)
    _, _, lir, _ = rlx.lower(lambda a: rlx.exp(a) + a, x, target="tpu", record=False)
    mod = render_module(lir)
    broken = replace(mod, text=mod.text.replace("stablehlo.exponential", "stablehlo.exponentia"))
    with pytest.raises(XlaCompileError) as info:
        compile_module(broken)
    err = info.value
    assert err.code == "RLX-H002" and err.hint
    assert "stablehlo.exponentia" in err.message and "module line" in err.message
    assert f"node %{lir.nodes[0].name}" in err.message


def test_unavailable_without_jax(monkeypatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "jaxlib" else real(name, *a))
    ok, why = get_target("tpu").available()
    assert not ok and "jaxlib is not installed" in why


def test_mlp_training_step_matches_numpy() -> None:
    target_or_skip("tpu")
    from rlx_core.models.mlp import init_mlp, mlp_loss
    from rlx_core.optim import Adam, compile_step

    rng = np.random.default_rng(0)
    x = rng.random((16, 20), dtype=np.float32)
    y = rng.integers(0, 10, 16).astype(np.int32)
    got, want = (compile_step(mlp_loss, Adam(1e-2), init_mlp((20, 12, 10), 0), x, y, target=t)
                 for t in ("tpu", "numpy"))
    for _ in range(2):
        np.testing.assert_allclose(got(x, y), want(x, y), rtol=1e-5, atol=1e-6)
    for layer in ("fc1", "fc2"):
        for k in ("weight", "bias"):
            np.testing.assert_allclose(got.params[layer][k], want.params[layer][k],
                                       rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_minilm_matches_numpy_within_1e4() -> None:
    target_or_skip("tpu")
    from rlx_core.models import minilm as ml

    try:
        model = ml.MiniLM.load()
    except ml.ModelNotFoundError as err:
        pytest.skip(f"MiniLM weights not installed: {err.message}")
    texts = ["A compiler turns a model into kernels.", "hi"]
    got = model.embed(texts, target="tpu")
    want = model.embed(texts, target="numpy")
    assert got.shape == (2, 384)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)


def test_emit_source_prints_the_module_even_without_jax(monkeypatch, capsys) -> None:
    import importlib.util

    from rlx_core.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "jax" else real(name, *a))
    assert main(["compile", "examples/models/mlp.py", "--target", "tpu", "--emit",
                 "source"]) == 0
    out = capsys.readouterr().out
    assert "not available here (jax is not installed" in out
    assert "func.func public @main(" in out and "stablehlo.dot_general" in out

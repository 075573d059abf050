"""Prepacked GEMM weights (rlx_core/targets/cpu/prepack.py): a parameter the own f32 GEMM takes
as B is packed once per binding into the arena, in both layouts, shared where two GEMMs read it
alike, packed again when another array is bound, and the same through @rlx.jit's module."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.cpu.target import CpuTarget
from tests.targets.checks import rel_error
from tests.targets.own_sgemm import calls_packed, skip_unless_own_sgemm

cpu_ok, cpu_why = CpuTarget().available()
pytestmark = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")


# K past one 384-deep block and N not a multiple of the 32-wide panel (zero-padded last panel),
# rows not a multiple of the 8-row tile; enough rows that the team splits them
SHAPES = [(16, 8, 33), (40, 70, 100), (129, 1000, 97), (256, 384, 384)]


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_parameter_weights_are_packed_and_match_numpy(m: int, k: int, n: int) -> None:
    skip_unless_own_sgemm()
    rng = np.random.default_rng(m + k + n)
    x = rng.standard_normal((m, k), np.float32)
    w = rng.standard_normal((n, k), np.float32)  # linear: op(B) = W^T
    w2 = rng.standard_normal((k, n), np.float32)  # x @ W2: op(B) = W2
    bias = rng.standard_normal(n).astype(np.float32)

    def f(a):
        y = rlx.nn.linear(a, rlx.param(w, "w"), rlx.param(bias, "b"))
        return y, a @ rlx.param(w2, "w2")

    exe = rlx.compile(f, x, target="cpu", record=False)
    packed = {p["param"]: p for p in exe.program.info["prepacked"]}
    assert set(packed) == {"w", "w2"}
    assert packed["w"]["transposed"] and not packed["w2"]["transposed"]
    assert packed["w"]["bytes"] == -(-n // 32) * 32 * k * 4
    assert calls_packed(exe)
    for _ in range(2):  # the second call reads the panels packed by the first
        y, z = exe(x)
        assert rel_error(y, x @ w.T + bias) < 1e-5
        assert rel_error(z, x @ w2) < 1e-5


def test_a_one_row_gemm_reads_the_panels_through_the_gemv() -> None:
    """calls_packed sees the one-row GEMV (gemv.py) as well as the tiled kernel."""
    skip_unless_own_sgemm()
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 96), np.float32)
    w = rng.standard_normal((80, 96), np.float32)
    exe = rlx.compile(lambda a: rlx.nn.linear(a, rlx.param(w, "w")), x, target="cpu",
                      record=False)
    src = "".join(exe.program.sources.values())
    assert "rlx_gemv_packed" in src and "rlx_sgemm_packed(" not in src
    assert calls_packed(exe)
    assert rel_error(exe(x), x @ w.T) < 1e-5


def test_activations_and_batched_weights_are_not_packed() -> None:
    skip_unless_own_sgemm()
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 48), np.float32)
    b = rng.standard_normal((48, 64), np.float32)
    exe = rlx.compile(lambda p, q: p @ q, a, b, target="cpu", record=False)
    assert exe.program.info["prepacked"] == []  # B is an input: it may change every call
    assert not calls_packed(exe)
    wb = rng.standard_normal((3, 48, 64), np.float32)
    xb = rng.standard_normal((3, 16, 48), np.float32)
    exe = rlx.compile(lambda p: p @ rlx.param(wb, "wb"), xb, target="cpu", record=False)
    assert exe.program.info["prepacked"] == []
    assert rel_error(exe(xb), xb @ wb) < 1e-5


def test_a_weight_two_gemms_read_alike_is_packed_once() -> None:
    skip_unless_own_sgemm()
    rng = np.random.default_rng(2)
    x = rng.standard_normal((32, 64), np.float32)
    w = rng.standard_normal((64, 64), np.float32)

    def f(a):
        wp = rlx.param(w, "w")
        h = rlx.nn.relu(a @ wp)
        return (h @ wp) + rlx.nn.linear(a, wp)  # two GEMMs with op(B) = W, one with W^T

    exe = rlx.compile(f, x, target="cpu", record=False)
    layouts = sorted(p["transposed"] for p in exe.program.info["prepacked"])
    assert layouts == [False, True]
    h = np.maximum(x @ w, 0)
    assert rel_error(exe(x), h @ w + x @ w.T) < 1e-5


def test_binding_another_array_packs_it_again() -> None:
    skip_unless_own_sgemm()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 96), np.float32)
    w = rng.standard_normal((128, 96), np.float32)
    exe = rlx.compile(lambda a: rlx.nn.linear(a, rlx.param(w, "w")), x, target="cpu",
                      record=False)
    assert rel_error(exe(x), x @ w.T) < 1e-5
    w_new = rng.standard_normal((128, 96), np.float32)
    exe.params["w"] = w_new
    assert rel_error(exe(x), x @ w_new.T) < 1e-5
    exe.params["w"] = w
    assert rel_error(exe(x), x @ w.T) < 1e-5
    # a second program of the same graph (same shared object, its own arena) binds its own
    other = rlx.compile(lambda a: rlx.nn.linear(a, rlx.param(w_new, "w")), x, target="cpu",
                        record=False)
    assert rel_error(other(x), x @ w_new.T) < 1e-5
    assert rel_error(exe(x), x @ w.T) < 1e-5


def test_jit_module_packs_its_weights_once() -> None:
    skip_unless_own_sgemm()
    rng = np.random.default_rng(4)
    w = rng.standard_normal((96, 80), np.float32)
    bias = rng.standard_normal(96).astype(np.float32)

    @rlx.jit(target="cpu")
    def layer(a):
        return rlx.nn.relu(rlx.nn.linear(a, rlx.param(w, "w"), rlx.param(bias, "b")))

    for rows in (48, 48, 64, 48):  # two specializations, each with its own arena
        x = rng.standard_normal((rows, 80), np.float32)
        assert rel_error(layer(x), np.maximum(x @ w.T + bias, 0)) < 1e-5


def test_no_prepack_switch_keeps_per_call_packing(monkeypatch: pytest.MonkeyPatch) -> None:
    skip_unless_own_sgemm()
    monkeypatch.setenv("RLX_NO_PREPACK", "1")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((32, 64), np.float32)
    w = rng.standard_normal((64, 64), np.float32)
    exe = rlx.compile(lambda a: rlx.nn.linear(a, rlx.param(w, "w")), x, target="cpu",
                      record=False)
    assert exe.program.info["prepacked"] == []
    assert not calls_packed(exe)
    assert rel_error(exe(x), x @ w.T) < 1e-5

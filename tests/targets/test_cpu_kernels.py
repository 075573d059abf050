"""CPU renderer: BLAS vs generated matmul, the entry-point contract, name sanitising, models."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.cli import load_model_file
from rlx_core.ir.graph import Graph
from rlx_core.targets.cpu import sgemm
from rlx_core.targets.cpu.blas import find_blas
from rlx_core.targets.cpu.renderer import render_program
from rlx_core.targets.cpu.target import CpuTarget
from tests.conftest import assert_close

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
pytestmark = pytest.mark.skipif(not CpuTarget().available()[0],
                                reason=f"cpu target unavailable: {CpuTarget().available()[1]}")


def _mm(a, b):
    return rlx.nn.relu(a @ b + 1.0)


def _impls(exe) -> dict[str, str]:
    return {k: v["impl"] for k, v in exe.program.info["kernels"].items()}


def test_f32_matmul_uses_blas_and_i32_a_generated_kernel() -> None:
    blas, why = find_blas()
    if blas is None:
        pytest.skip(f"no BLAS here: {why}")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8, 16), np.float32), rng.standard_normal((16, 4), np.float32)
    exe = rlx.compile(_mm, a, b, target="cpu", record=False)
    assert "blas-sgemm" in _impls(exe).values()
    assert "scipy_cblas_sgemm" in "".join(exe.sources.values())
    assert exe.program.info["blas"].startswith("scipy-openblas32")
    assert_close(exe(a, b), np.maximum(a @ b + 1, 0))
    ai, bi = rng.integers(-5, 5, (8, 16)).astype(np.int32), rng.integers(-5, 5, (16, 4)).astype(np.int32)
    exe_i = rlx.compile(lambda x, y: x @ y, ai, bi, target="cpu", record=False)
    assert list(_impls(exe_i).values()) == ["generated-matmul"]
    np.testing.assert_array_equal(exe_i(ai, bi), ai @ bi)


def test_without_blas_matmul_is_generated_and_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLX_NO_BLAS", "1")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 5, 7), np.float32), rng.standard_normal((2, 7, 3), np.float32)
    exe = rlx.compile(_mm, a, b, target="cpu", record=False)
    info = exe.program.info
    assert info["blas"] is None and any("no BLAS" in n for n in info["notes"])
    assert "generated-matmul" in _impls(exe).values()
    assert info["own_sgemm"] is False and info["own_sgemm_reason"].startswith("no BLAS")
    assert any("BLAS unavailable" in line for line in info["source"].splitlines()[:400])
    assert_close(exe(a, b), np.maximum(a @ b + 1, 0))


def test_f64_batched_matmul_uses_dgemm() -> None:
    if find_blas()[0] is None:
        pytest.skip("no BLAS here")
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 5, 6))
    exe = rlx.compile(lambda x, y: x @ y, a, b, target="cpu", record=False)
    assert "blas-dgemm" in _impls(exe).values()
    assert_close(exe(a, b), a @ b, "f64")


def test_render_program_contract() -> None:
    def f(x, w):
        return rlx.nn.softmax(x @ w, axis=-1), x * 2.0

    x, w = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    _, _, lir, _ = rlx.api.lower(f, x, w, target="cpu", record=False)
    assert isinstance(lir, Graph)
    prog = render_program(lir, "my prefix!*/")
    assert prog.prefix == "my_prefix___" and prog.entry == "my_prefix____run"
    assert f"void {prog.entry}(const void* const* inputs" in prog.source
    assert prog.arena_bytes >= (lir.plan.peak_bytes if lir.plan else 0)
    assert [t.shape for t in prog.output_types] == [(2, 4), (2, 3)]
    lines = prog.source.splitlines()
    for name, (lo, hi) in prog.kernel_lines.items():
        # the kernel's lines of the source, its head naming the line of f it came from there
        # and not in the compiled text (test_build_key_locations.py)
        shown = prog.kernel_sources[name]
        compiled = "\n".join(lines[lo - 1:hi]) + "\n"
        assert re.sub(r" from test_cpu_kernels\.py:\d+(?=: )", "", shown, count=1) == compiled
    assert any(" from test_cpu_kernels.py:" in t for t in prog.kernel_sources.values())
    assert "test_cpu_kernels.py" not in prog.source
    assert set(prog.kernel_impl) == {k.name for k in lir.kernels}


def test_hostile_names_never_reach_the_source() -> None:
    def f(x):
        return rlx.exp(x)

    x = np.ones(3, np.float32)
    exe = rlx.compile(f, x, target="cpu", record=False, name='evil */ #include "x" \n')
    src = exe.program.info["source"]
    assert "#include \"x\"" not in src and "evil */" not in src
    assert_close(exe(x), np.exp(x))


@pytest.mark.parametrize("name", ["mlp", "bert_layer"])
def test_example_models_match_numpy(name: str) -> None:
    fn, inputs, _ = load_model_file(MODELS / f"{name}.py")
    want = rlx.compile(fn, *inputs, target="numpy", record=False)(*inputs)
    exe = rlx.compile(fn, *inputs, target="cpu", record=False)
    got = exe(*inputs)
    assert_close(got, want, "f32", scale=5)
    # f32 GEMMs run on OpenBLAS or, on AVX-512 machines, rlx's own kernel (test_cpu_sgemm.py)
    assert {"blas-sgemm", sgemm.IMPL} & set(_impls(exe).values()) or find_blas()[0] is None


def test_bf16_and_f16_round_trip_through_storage() -> None:
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
    for d in ("f16", "bf16"):
        def f(a, d=d):
            return (a.astype(d) * 3.0).sum(axis=-1).astype("f32")

        want = rlx.compile(f, x, target="numpy", record=False)(x)
        got = rlx.compile(f, x, target="cpu", record=False)(x)
        assert_close(got, want, d)

"""The GEMM epilogue's own erf (cpu/epilogue_erf.py): accurate to 1.2e-6, NaN and +-inf right."""

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.cpu import epilogue_erf

pytest.importorskip("scipy")


def _erf_after_gemm(values: np.ndarray) -> tuple[np.ndarray, str]:
    """erf(0 @ 0 + values): the values reach the erf through a GEMM's epilogue."""
    m, n = values.shape
    a, w = np.zeros((m, 64), np.float32), np.zeros((64, n), np.float32)
    exe = rlx.compile(lambda x, y, v: rlx.erf(x @ y + v), a, w, values, target="cpu",
                      record=False)
    return np.asarray(exe(a, w, values)), "".join(exe.sources.values())


def test_epilogue_erf_is_within_its_bound_over_the_whole_range() -> None:
    from scipy.special import erf

    x = np.linspace(-4.5, 4.5, 512 * 880, dtype=np.float32)
    x[:2001] = np.geomspace(1e-38, 1.0, 2001, dtype=np.float32)  # tiny arguments too
    got, source = _erf_after_gemm(x.reshape(512, 880))
    assert f"{epilogue_erf.NAME}(" in source and "rlx_erf_f(" not in source
    want = erf(x.astype(np.float64)).reshape(512, 880)
    np.testing.assert_allclose(got, want, rtol=0, atol=1.25e-6)
    assert np.abs(got).max() <= 1.0
    np.testing.assert_array_equal(np.signbit(got), np.signbit(x.reshape(512, 880)))


def test_epilogue_erf_special_values() -> None:
    from scipy.special import erf

    special = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, 3.6, -3.6, 1e30, -1e30,
                        4.0] * 88, np.float32)
    special = np.tile(special, 512).reshape(512, 880)  # large enough for the team GEMM
    got, source = _erf_after_gemm(special)
    assert f"{epilogue_erf.NAME}(" in source
    want = erf(special.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=0, atol=1.25e-6)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(special))
    big = np.abs(special) > 4.5
    np.testing.assert_array_equal(got[big], np.sign(special[big]))  # +-1 exactly beyond


def test_an_epilogue_written_after_the_barrier_uses_it_too() -> None:
    """Batches spread over two dimensions: the team GEMM leaves the epilogue to the kernel
    (after a barrier); KernelEnv.erf still names the GEMM epilogue's erf there."""
    from scipy.special import erf

    rng = np.random.default_rng(0)  # small integers / 64: the GEMM is exact in f32
    a = rng.integers(-2, 3, (2, 3, 64, 64)).astype(np.float32)
    b = (rng.integers(-8, 9, (2, 3, 64, 96)) / 64).astype(np.float32)
    exe = rlx.compile(lambda x, y: rlx.erf(x @ y), a, b, target="cpu", record=False)
    source = "".join(exe.sources.values())
    assert f"{epilogue_erf.NAME}(" in source and "rlx_erf_f(" not in source
    np.testing.assert_allclose(np.asarray(exe(a, b)), erf(a.astype(np.float64) @ b),
                               rtol=0, atol=1.25e-6)


def test_one_chunk_and_chunked_gemms_give_gelu_the_same_bits(threads, monkeypatch) -> None:
    """bias + erf-GELU after a GEMM: a GEMM too small to split runs as one chunk (a serial
    kernel), a larger one in claimed chunks over the team; both render the erf with the GEMM
    epilogue's own, so a row's bits do not depend on the batch or the thread count."""
    from tests.targets.own_sgemm import skip_unless_own_sgemm

    skip_unless_own_sgemm()
    monkeypatch.setenv("RLX_NO_GEMV", "1")  # one row on the GEMM kernel, as the others
    rng = np.random.default_rng(3)
    w, bias = rng.standard_normal((330, 160), np.float32), rng.standard_normal(330, np.float32)
    x = rng.standard_normal((64, 160), np.float32)

    def gelu(a):
        return rlx.nn.gelu(rlx.nn.linear(a, rlx.param(w, "w"), rlx.param(bias, "b")))

    threads(2)
    one = rlx.compile(gelu, x[:1], target="cpu", record=False)
    many = rlx.compile(gelu, x, target="cpu", record=False)
    for exe, claimed in ((one, False), (many, True)):
        source = "".join(exe.sources.values())
        assert ("rlx_team_take(" in source) == claimed
        assert f"{epilogue_erf.NAME}(" in source and "rlx_erf_f(" not in source
    outs = []
    for n in (1, 2):
        threads(n)
        outs.append(np.asarray(many(x)))
        assert np.array_equal(np.asarray(one(x[:1])), outs[-1][:1])
    assert np.array_equal(outs[0], outs[1])


def test_the_renderer_names_the_chosen_erf_below_f64_only() -> None:
    from rlx_core.ir import dtypes as dt
    from rlx_core.targets.c_common import expr

    assert expr.render("erf", {}, ["x"], [dt.f32], dt.f32) == "rlx_erf_f(x)"
    assert expr.render("erf", {}, ["x"], [dt.f32], dt.f32, erf="my_erf") == "my_erf(x)"
    assert "my_erf(" in expr.render("erf", {}, ["x"], [dt.f16], dt.f16, erf="my_erf")
    assert expr.render("erf", {}, ["x"], [dt.f64], dt.f64, erf="my_erf") == "erf(x)"

"""The hexagon target: HVX loops in the generated C, clang's v68 check, qemu-hexagon runs.

The conformance suite runs every MIR primitive on hexagon under qemu-hexagon (the target is
``executes (emulated)``); these tests pin the HVX kernels, the checker's typed error, and the
unavailable path.
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.registry import get_target
from tests.models.conftest import target_or_skip


def _source(fn, *args) -> str:
    _, _, lir, _ = rlx.lower(fn, *args, target="hexagon", record=False)
    return get_target("hexagon").render_sources(lir)["program"]


def test_hvx_loops_for_integer_and_f32_elementwise_kernels() -> None:
    i = np.ones((3, 100), np.int32)
    f = np.ones((3, 100), np.float32)
    src = _source(lambda a, b, x: (a + b, rlx.maximum(a, b), x * x), i, i, f)
    assert "Q6_Vw_vadd_VwVw(RLX_VLD(in0 + i), RLX_VLD(in1 + i))" in src
    assert "Q6_Vw_vmax_VwVw" in src
    assert "Q6_Vqf32_vmpy_VsfVsf" in src and "__HVX_ARCH__ >= 68" in src
    assert "i += 32" in src  # 32 lanes of 4 bytes in a 128-byte vector


def test_hvx_int8_wraps_and_the_tail_runs_under_qemu() -> None:
    target_or_skip("hexagon")
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, 300).astype(np.int8)  # 2 vectors of 128 lanes + a tail of 44
    b = rng.integers(-128, 128, 300).astype(np.int8)
    exe = rlx.compile(lambda x, y: (x + y, x - y), a, b, target="hexagon")
    assert "hvx-add-i8" in {k["impl"] for k in exe.program.info["kernels"].values()}
    s, d = exe(a, b)
    np.testing.assert_array_equal(s, (a.astype(np.int16) + b).astype(np.int8))
    np.testing.assert_array_equal(d, (a.astype(np.int16) - b).astype(np.int8))


def test_a_clang_rejection_is_a_typed_error_with_the_kernel_line() -> None:
    from rlx_core.targets.hexagon.toolchain import compile_check, find_clang
    from rlx_core.targets.kernel_check import KernelCheckError

    if find_clang()[0] is None:
        pytest.skip(f"no clang with the Hexagon backend: {find_clang()[1]}")
    src = _source(lambda a: a + a, np.ones(200, np.int32))
    broken = src.replace("Q6_Vw_vadd_VwVw", "Q6_Vw_vadd_NOPE")
    with pytest.raises(KernelCheckError) as info:
        compile_check(broken)
    err = info.value
    assert err.code == "RLX-H003" and err.hint
    assert "Q6_Vw_vadd_NOPE" in err.message and "offending source lines" in err.message
    assert " in k0:" in err.message  # the kernel the line belongs to


def test_unavailable_without_the_emulator(monkeypatch) -> None:
    from rlx_core.targets.hexagon import emulator

    monkeypatch.setattr(emulator, "find_qemu",
                        lambda: (None, "qemu-hexagon is not installed (Debian: qemu-user)"))
    ok, why = get_target("hexagon").available()
    assert not ok and "qemu-hexagon is not installed" in why


def test_mlp_training_step_matches_numpy() -> None:
    target_or_skip("hexagon")
    from rlx_core.models.mlp import init_mlp, mlp_loss
    from rlx_core.optim import Adam, compile_step

    rng = np.random.default_rng(0)
    x = rng.random((8, 12), dtype=np.float32)
    y = rng.integers(0, 4, 8).astype(np.int32)
    got, want = (compile_step(mlp_loss, Adam(1e-2), init_mlp((12, 8, 4), 0), x, y, target=t)
                 for t in ("hexagon", "numpy"))
    np.testing.assert_allclose(got(x, y), want(x, y), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.params["fc1"]["weight"], want.params["fc1"]["weight"],
                               rtol=1e-5, atol=1e-6)


def test_max_keeps_a_nan_in_either_place() -> None:
    """clang-14 turned the prelude's NaN-propagating max into sfmax, which drops a NaN in the
    second operand (the fuzzer's seed (2026, 4)); the renderer spells the NaN tests out."""
    target_or_skip("hexagon")
    x = np.ones((2, 6), np.float32)
    x[0, 0] = x[1, 5] = np.nan
    got = rlx.compile(lambda a: (a.max(axis=1), a.min(axis=1)), x, target="hexagon")(x)
    assert np.isnan(got[0]).all() and np.isnan(got[1]).all()


def test_sin_and_cos_reduce_huge_arguments_exactly() -> None:
    """minirt's sin/cos reduced by Cody-Waite alone, good below ~1e6: sin(1e30) gave -inf
    (the fuzzer's seed 20261220, cases 4,530 and 4,911). Above 2^20 they now reduce by
    Payne-Hanek over a table of 2/pi, so every finite f32 gets numpy's answer to f32 rounding."""
    target_or_skip("hexagon")
    rng = np.random.default_rng(7)
    x = np.concatenate([
        np.array([1e30, -1e30, 3.4028235e38, -2.5e20, 1048576.0, -1048575.9, 999999.9, 0.5,
                  -3.0, 16777216.0, 8.5e37], np.float32),
        (10.0 ** rng.uniform(0, 38, 53) * rng.choice([-1, 1], 53)).astype(np.float32)])
    s, c = rlx.compile(lambda a: (rlx.sin(a), rlx.cos(a)), x, target="hexagon")(x)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(s, np.sin(x64), rtol=0, atol=2e-7)
    np.testing.assert_allclose(c, np.cos(x64), rtol=0, atol=2e-7)


def test_hvx_row_sums_wrap_like_the_reference() -> None:
    target_or_skip("hexagon")
    rng = np.random.default_rng(2)
    cases = [(rng.integers(-2**31, 2**31, (3, 100)).astype(np.int32), (1,)),
             (rng.integers(-128, 128, (2, 300)).astype(np.int8), (1,)),
             (rng.integers(-2**15, 2**15, (2, 3, 50)).astype(np.int16), (1, 2))]
    for x, axes in cases:
        exe = rlx.compile(lambda a, axes=axes: a.sum(axis=axes), x, target="hexagon")
        assert "hvx-row-sum" in {k["impl"] for k in exe.program.info["kernels"].values()}
        want = x.astype(np.int64).sum(axis=axes).astype(x.dtype)  # wraps in the dtype
        np.testing.assert_array_equal(exe(x), want)


@pytest.mark.parametrize("dtype, lo, hi", [("int32", -2**31, 2**31 - 1), ("int16", -300, 300)])
def test_hvx_matmul_tiles_wrap_like_the_reference_under_qemu(dtype: str, lo: int,
                                                             hi: int) -> None:
    """HVX tiles (splat x row of B, 32 i32 / 64 i16 lanes) plus the scalar columns after the
    last whole vector; i32 products are the low 32 bits of even/odd halfword multiplies,
    checked here against the reference's wrapping matmul by running them."""
    target_or_skip("hexagon")
    rng = np.random.default_rng(7)
    a = rng.integers(lo, hi, (2, 5, 9), dtype=np.int64).astype(dtype)
    b = rng.integers(lo, hi, (2, 9, 70), dtype=np.int64).astype(dtype)
    f = lambda x, y: x @ y
    assert "Q6_Vh_vmpyi_VhVh" in _source(f, a, b) or "Q6_Vw_vmpyieo_VhVh" in _source(f, a, b)
    got = rlx.compile(f, a, b, target="hexagon")(a, b)
    np.testing.assert_array_equal(got, rlx.compile(f, a, b, target="numpy")(a, b))


def test_f32_matmul_tiles_are_qf32_for_v68_with_a_scalar_fallback() -> None:
    """f32 tiles need v68's qf32 (clang checks them for v68); the v67 emulator build runs
    the scalar columns, which equal the reference."""
    target_or_skip("hexagon")
    a = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal((16, 40)).astype(np.float32)
    src = _source(lambda x, y: x @ y, a, b)
    assert "Q6_Vqf32_vmpy_VsfVsf" in src and "__HVX_ARCH__ >= 68" in src
    got = rlx.compile(lambda x, y: x @ y, a, b, target="hexagon")(a, b)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("damage", ["truncated", "no-record"])
def test_a_damaged_cached_elf_is_linked_again(damage: str, tmp_path, monkeypatch) -> None:
    """The ELF (and the runtime object) are verified cache entries: a truncated one, or one
    without its record (built before records), is quarantined and linked again, not run."""
    target_or_skip("hexagon")
    from rlx_core.targets import verified_files

    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    x = np.arange(8, dtype=np.float32)

    def f(a):
        return a * 2.0 + 1.0

    first = rlx.compile(f, x, target="hexagon", record=False)
    assert first.program.info["cache"] == "miss"
    elf = tmp_path / "hexagon" / first.program.info["elf"].rsplit("/", 1)[1]
    record = elf.with_name(elf.name + verified_files.RECORD)
    assert record.is_file() and list((tmp_path / "hexagon").glob("minirt-*.o.sha256"))
    if damage == "truncated":
        elf.write_bytes(elf.read_bytes()[:100])
    else:
        record.unlink()
    verified_files.forget()  # as the next process would see it
    again = rlx.compile(f, x, target="hexagon", record=False)
    assert again.program.info["cache"] == "miss" and again.program.info["elf"] == str(elf)
    np.testing.assert_allclose(again(x), x * 2 + 1)
    assert len(list((tmp_path / "hexagon" / "quarantine").glob("*.elf.*.why"))) == 1
    verified_files.forget()
    hit = rlx.compile(f, x, target="hexagon", record=False)
    assert hit.program.info["cache"] == "hit"

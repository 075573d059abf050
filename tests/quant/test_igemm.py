"""The CPU's int8 GEMM (cpu/igemm.py, cpu/igemm_packed.py): claimed whole, exact against the
numpy reference on the kernel this CPU picks and on the portable one, with the weight computed
in the graph (dot kernels) and as a parameter (prepacked, register-tiled), and every VNNI
variant compiles here."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core import quant as Q
from rlx_core.targets.cpu import igemm, igemm_packed
from tests.quant.portable_tile import assert_passes_on_portable_tile


@pytest.fixture
def cpu():
    ok, why = rlx.api.get_target("cpu").available()
    if not ok:
        pytest.skip(f"cpu: {why}")


def _case(rng, m, k, n, xdt):
    info = np.iinfo(np.dtype(xdt))
    x = rng.integers(info.min, info.max, (m, k), endpoint=True).astype(xdt)
    w = rng.integers(-128, 127, (n, k), endpoint=True).astype(np.int8)
    return x, w, rng.integers(-5000, 5000, n).astype(np.int32)


def _int_linear(zx, zw):
    def f(a, ww, bb):
        return Q.int_linear(a, ww, bb, zx, zw)

    return f


@pytest.mark.parametrize("isa", ["picked", "c"])
def test_int_linear_native_kernel_is_exact(cpu, isa, monkeypatch):
    if isa == "c":
        monkeypatch.setenv("RLX_IGEMM_ISA", "c")
    rng = np.random.default_rng(5)
    # K around the 32- and 64-byte steps and their tails; N around the four-column step
    for (m, k, n), xdt, zx, zw in (((1, 64, 8), "int8", 0, 0), ((5, 100, 7), "uint8", 131, 0),
                                   ((17, 31, 70), "int8", -3, 2), ((3, 129, 5), "uint8", 0, -7)):
        x, w, b = _case(rng, m, k, n, xdt)

        exe = rlx.compile(_int_linear(zx, zw), x, w, b, target="cpu")
        assert any("rlx_igemm_block(" in src for src in exe.trace.kernels.values())
        want = (x.astype(np.int64) - zx) @ (w.astype(np.int64) - zw).T + b
        assert exe(x, w, b).tolist() == want.tolist()


def packed_cases() -> None:
    """A parameter weight is prepacked and multiplied by the register-tiled kernel: row counts
    around the 4-row tile and the 32-row work item, columns around the 16-column panel,
    K around the 4-byte group, i8 and u8 x with zero points, a bias, a weight holding
    -128 (the AVX2 sign trick cannot negate it: that weight takes the dot kernels), 7-bit
    weights in [-64, 63] (AVX2: the w7 tiles, no sign trick) and 6-bit weights in [-32, 31]
    (AVX2: u8 x pairs two groups in i16, w77; the extreme sums 4 * 255 * -32 included)."""
    from rlx_core.frontend import ops

    rng = np.random.default_rng(9)
    for (m, k, n), xdt, zx, zw, wmin in (((1, 64, 8), "int8", 0, 0, -127),
                                         ((5, 100, 7), "uint8", 131, 0, -127),
                                         ((35, 31, 70), "int8", -3, 2, -127),
                                         ((3, 129, 17), "uint8", 0, -7, -127),
                                         ((33, 384, 48), "int8", 0, 0, -127),
                                         ((6, 66, 20), "int8", 5, 0, -128),
                                         ((35, 31, 70), "int8", -3, 2, -64),
                                         ((9, 101, 20), "uint8", 131, 0, -64),
                                         ((9, 101, 20), "uint8", 131, 0, -32),
                                         ((6, 70, 18), "int8", 0, 0, -32)):
        x, w, b = _case(rng, m, k, n, xdt)
        w = np.clip(w, wmin, -wmin - 1 if wmin in (-64, -32) else 127).astype(np.int8)
        w[0, 0], w[-1, -1] = wmin, -wmin - 1 if wmin == -32 else 63
        if wmin == -32:  # 6-bit weights (the w77 pairing for any u8 x): the extreme sums
            x[0] = np.iinfo(x.dtype).max
            w[1], w[2] = -32, 31

        def f(a, w=w, b=b, zx=zx, zw=zw):
            return Q.int_linear(a, ops.asarray(w), ops.asarray(b), zx, zw)

        exe = rlx.compile(f, x, target="cpu")
        assert any("rlx_igp_block(" in src for src in exe.trace.kernels.values())
        want = (x.astype(np.int64) - zx) @ (w.astype(np.int64) - zw).T + b
        assert exe(x).tolist() == want.tolist(), (m, k, n, xdt)
        # a newly bound weight is packed again before the next call
        exe.params["w"] = np.ascontiguousarray(w[::-1])
        want = (x.astype(np.int64) - zx) @ (w[::-1].astype(np.int64) - zw).T + b
        assert exe(x).tolist() == want.tolist(), (m, k, n, xdt)


def test_packed_int8_gemm_is_exact(cpu):
    packed_cases()


def test_packed_int8_gemm_portable_is_exact(cpu):
    """The portable tile forced (RLX_IGEMM_ISA=c), in a process of its own: the kernel reads
    the variable once per loaded program, and this process has loaded the same programs."""
    assert_passes_on_portable_tile("import tests.quant.test_igemm as t; t.packed_cases()")


def test_vnni_variants_compile_here(tmp_path):
    """The VNNI kernels cannot run on a CPU without VNNI; they must at least compile."""
    from rlx_core.targets.cpu.toolchain import find_compiler

    cc = find_compiler()
    src = tmp_path / "ig.c"
    # a table of every kernel's address keeps the unused static ones in the object file
    src.write_text(igemm.SOURCE + igemm_packed.SOURCE
                   + "\n#ifdef RLX_IG_X86\nvoid *rlx_ig_table[] = {"
                   "(void *)rlx_idot4_vnni512_s, (void *)rlx_idot4_vnni512_u, "
                   "(void *)rlx_idot4_avxvnni_s, (void *)rlx_idot4_avxvnni_u, "
                   "(void *)rlx_idot4_avx2_s, (void *)rlx_idot4_avx2_u, "
                   "(void *)rlx_igemm_block, (void *)rlx_igp_tile_vnni512, "
                   "(void *)rlx_igp_tile_avxvnni, (void *)rlx_igp_tile_avx2_s, "
                   "(void *)rlx_igp_tile_avx2_u, (void *)rlx_igp_block};\n#endif\n")
    obj = tmp_path / "ig.o"
    res = subprocess.run([cc.path, "-O2", "-c", str(src), "-o", str(obj)], capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stderr
    syms = subprocess.run(["nm", str(obj)], capture_output=True, text=True).stdout
    import platform

    if platform.machine() in ("x86_64", "AMD64"):
        for name in ("rlx_idot4_vnni512_s", "rlx_idot4_vnni512_u", "rlx_idot4_avxvnni_s",
                     "rlx_idot4_avxvnni_u", "rlx_idot4_avx2_s", "rlx_idot4_avx2_u",
                     "rlx_igp_tile_vnni512", "rlx_igp_tile_avxvnni", "rlx_igp_tile_avx2_s"):
            assert name in syms, name
        dis = subprocess.run(["objdump", "-d", str(obj)], capture_output=True, text=True).stdout
        assert "vpdpbusd" in dis and "vpmaddwd" in dis
        assert "vpmaddubsw" in dis and "vpsignb" in dis  # the packed AVX2 tile's sign trick


@pytest.mark.parametrize("zero_point", [False, True])
def test_int4_linear_kernel_matches_reference(cpu, zero_point):
    from rlx_core.quant.int4 import quantize_int4
    from rlx_core.targets.numpy_ref import quant_semantics as ref

    rng = np.random.default_rng(6)
    w = rng.normal(size=(37, 256)).astype(np.float32)
    x = rng.normal(size=(3, 5, 256)).astype(np.float32)
    q = quantize_int4(w, group=32, zero_point=zero_point)
    exe = rlx.compile(lambda a: Q.int4_linear(a, q), x, target="cpu")
    assert any("rlx_i4gemm_block(" in src for src in exe.trace.kernels.values())
    got = exe(x)
    want = ref.int4_linear({"group": 32}, [x, q.packed, q.scale] + (
        [q.zero] if zero_point else []))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert np.array_equal(ref.int4_weight(q.packed, q.scale, q.zero if zero_point else None,
                                          32), q.dequantize())
    # int4 stays close to f32 (a quarter of a step per weight on average)
    assert np.abs(got - x @ w.T).max() < 0.15 * np.abs(x @ w.T).max()


def test_int_linear_over_an_empty_contraction_is_the_bias(cpu):
    """Fuzz finding (fuzz_long_cpu, seed [20261205, 20526, 9, 55]): with k == 0 the row count
    came out as 0 and the output was left unwritten instead of holding the bias."""
    from rlx_core.ir.parser import parse

    g = parse("""hir @fuzz {
  input %x : i8[0]
  input %w : i8[5,0]
  input %b : i32[5]
  %y : i32[5] = int_linear(%x, %w, %b) {a_zero_point=-3, b_zero_point=-2}
  return %y
}""")
    xs = [np.zeros((0,), np.int8), np.zeros((5, 0), np.int8), np.arange(1, 6, dtype=np.int32)]
    np.testing.assert_array_equal(rlx.compile(g, *xs, target="cpu")(*xs), [1, 2, 3, 4, 5])

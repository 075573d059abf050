"""The CPU's int8 GEMM (cpu/igemm.py): claimed whole, exact against the numpy reference on
the dot kernel this CPU picks and on the portable one, and every VNNI variant compiles here."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core import quant as Q
from rlx_core.targets.cpu import igemm


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


def test_vnni_variants_compile_here(tmp_path):
    """The VNNI kernels cannot run on a CPU without VNNI; they must at least compile."""
    from rlx_core.targets.cpu.toolchain import find_compiler

    cc = find_compiler()
    src = tmp_path / "ig.c"
    # a table of every kernel's address keeps the unused static ones in the object file
    src.write_text(igemm.SOURCE + "\n#ifdef RLX_IG_X86\nvoid *rlx_ig_table[] = {"
                   "(void *)rlx_idot4_vnni512_s, (void *)rlx_idot4_vnni512_u, "
                   "(void *)rlx_idot4_avxvnni_s, (void *)rlx_idot4_avxvnni_u, "
                   "(void *)rlx_idot4_avx2_s, (void *)rlx_idot4_avx2_u, "
                   "(void *)rlx_igemm_block};\n#endif\n")
    obj = tmp_path / "ig.o"
    res = subprocess.run([cc.path, "-O2", "-c", str(src), "-o", str(obj)], capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stderr
    syms = subprocess.run(["nm", str(obj)], capture_output=True, text=True).stdout
    import platform

    if platform.machine() in ("x86_64", "AMD64"):
        for name in ("rlx_idot4_vnni512_s", "rlx_idot4_vnni512_u", "rlx_idot4_avxvnni_s",
                     "rlx_idot4_avxvnni_u", "rlx_idot4_avx2_s", "rlx_idot4_avx2_u"):
            assert name in syms, name
        dis = subprocess.run(["objdump", "-d", str(obj)], capture_output=True, text=True).stdout
        assert "vpdpbusd" in dis and "vpmaddwd" in dis


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

"""ISA detection for the CPU target (rlx_core/targets/cpu/isa.py): families from cpuinfo flags,
forced lower paths (RLX_CPU_ISA), cache sizes, the sgemm blocking, and the cache key."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_core.targets.cpu import isa
from rlx_core.targets.cpu.isa import Caches, CpuIsaError, gemm_blocking, make

ZEN4 = {"sse2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16",
        "avx512_vnni"}
SPR = ZEN4 | {"amx_tile", "amx_bf16", "amx_int8", "avx_vnni"}
ZEN1 = {"sse2", "avx", "avx2", "fma"}


@pytest.mark.parametrize("flags, family", [(SPR, "avx512"), (ZEN4, "avx512"), (ZEN1, "avx2"),
                                           ({"sse2", "avx"}, "sse"), ({"avx2"}, "sse")])
def test_family_is_the_highest_the_flags_allow(flags: set[str], family: str) -> None:
    assert make(flags, machine="x86_64").family == family
    assert make(flags, machine="aarch64").family == "generic"


def test_extensions_follow_the_family() -> None:
    spr = make(SPR, machine="x86_64")
    assert spr.extensions == ("avx512_bf16", "avx512_vnni", "avx_vnni", "amx_tile", "amx_bf16",
                              "amx_int8")
    low = make(SPR, "avx2", machine="x86_64")  # a forced avx2 path drops AVX-512's extensions
    assert low.forced and low.family == "avx2" and low.extensions == ("avx_vnni",)
    assert low.flags and "-mno-avx512f" in low.flags and spr.flags == ()
    assert make(SPR, "sse", machine="x86_64").extensions == ()
    assert spr.key() != low.key()


@pytest.mark.parametrize("wanted", ["avx512", "avx9000"])
def test_a_path_above_the_cpu_or_unknown_is_rlx_j001(wanted: str) -> None:
    with pytest.raises(CpuIsaError) as err:
        make(ZEN1, wanted, machine="x86_64")
    assert err.value.code == "RLX-J001" and err.value.hint


def test_caches_come_from_sysfs(tmp_path) -> None:
    for i, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"),
                                             (2, "Unified", "2048K"), (3, "Unified", "105M")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    assert isa.read_caches(tmp_path) == Caches(48 << 10, 2 << 20, 105 << 20)


def test_blocking_is_the_tuned_one_on_the_tuned_caches_and_smaller_on_smaller() -> None:
    zen4 = gemm_blocking("avx512", Caches(32 << 10, 1 << 20, 32 << 20))
    assert (zen4.mr, zen4.nr, zen4.kc, zen4.mc, zen4.nc) == (8, 32, 384, 64, 256)
    zen3 = gemm_blocking("avx2", Caches(32 << 10, 512 << 10, 32 << 20))
    assert (zen3.mr, zen3.nr, zen3.kc, zen3.mc, zen3.nc) == (6, 16, 384, 60, 256)
    hsw = gemm_blocking("avx2", Caches(32 << 10, 256 << 10, 0))  # Haswell..Skylake client
    assert (hsw.kc, hsw.mc, hsw.nc) == (384, 30, 128)
    small_l1 = gemm_blocking("avx512", Caches(16 << 10, 1 << 20, 0))
    assert small_l1.kc == 192 and small_l1.mc % 8 == 0 and small_l1.nc % 32 == 0
    assert gemm_blocking("avx2", Caches()) == zen3  # nothing reported: the tuned values
    assert "#define RLX_SG_NC 256" in zen4.defines()


def test_blocking_override_is_checked(monkeypatch) -> None:
    monkeypatch.setenv("RLX_SGEMM_BLOCKING", "256,48,128")
    assert gemm_blocking("avx2", Caches()).mc == 48
    monkeypatch.setenv("RLX_SGEMM_BLOCKING", "256,50,128")  # 50 rows: not whole 6-row tiles
    with pytest.raises(CpuIsaError):
        gemm_blocking("avx2", Caches())


def test_detection_runs_once_per_process_and_value() -> None:
    assert isa.detect() is isa.detect()
    paths = isa.forced_paths()
    assert paths[0] == isa.detect().native or isa.detect().forced


def test_the_isa_path_is_part_of_the_content_hash_key(monkeypatch) -> None:
    from rlx_core.targets.cpu import toolchain

    monkeypatch.delenv("RLX_CPU_ISA", raising=False)
    native = toolchain.host_key()
    lower = [p for p in isa.forced_paths()[1:]]
    if not lower:
        pytest.skip("this machine runs no path below its own")
    monkeypatch.setenv("RLX_CPU_ISA", lower[0])
    assert toolchain.host_key() != native


def test_a_forced_lower_path_compiles_with_its_flags_and_runs(monkeypatch) -> None:
    from rlx_core.targets.cpu.target import CpuTarget

    ok, why = CpuTarget().available()
    if not ok:
        pytest.skip(f"cpu target unavailable: {why}")
    lower = isa.forced_paths()[1:]
    if not lower:
        pytest.skip("this machine runs no path below its own")
    import rlx_core as rlx

    monkeypatch.setenv("RLX_CPU_ISA", lower[-1])
    rng = np.random.default_rng(2)
    a = rng.standard_normal((40, 72), np.float32)
    w = rng.standard_normal((72, 64), np.float32)
    exe = rlx.compile(lambda x, y: rlx.nn.gelu(x @ y), a, w, target="cpu", record=False)
    info = exe.program.info
    assert set(isa.detect().flags) <= set(info["flags"])
    if lower[-1] == "sse":
        assert info["own_sgemm_isa"] in (None, "c")  # no AVX: the own kernel is not used
    h = a.astype(np.float64) @ w
    want = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
    from math import erf

    exact = 0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2)))
    got = exe(a, w)
    assert min(np.max(np.abs(got - want)), np.max(np.abs(got - exact))) < 1e-3

"""The cuda target's runtime path: NVRTC images, the driver API, scripts/gpu_check.sh.

Without an NVIDIA GPU (this machine, CI) the compiler half is tested for real: NVRTC builds
cubins for sm_80/sm_90 and PTX for a newer arch from the generated kernels; the driver half
skips with the reason (no libcuda.so.1 / no device) and the target stays ``compile-check``.
On a GPU (``scripts/gpu_check.sh``) the GPU tests below run kernels and compare with numpy.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.gpu_common.checked_target import unit
from rlx_core.targets.gpu_common.kernels import render_graph
from rlx_core.targets.registry import get_target

ROOT = Path(__file__).resolve().parents[2]


def _nvrtc():
    from rlx_core.targets.cuda.nvrtc import find_nvrtc

    lib, why = find_nvrtc()
    if lib is None:
        pytest.skip(why)
    return lib


def _gpu():
    tgt = get_target("cuda")
    ok, why = tgt.executes_here()
    if not ok:
        pytest.skip(f"no GPU runs the cuda target here: {why}")
    return tgt


def _corpus_unit() -> str:
    """The first legal graphs of the fuzz generator's cuda profile, in one unit."""
    from rlx_core.testing.generator import generate
    from rlx_core.testing.profile import profile_for

    tgt, parts = get_target("cuda"), []
    for i in range(12):
        try:
            _, _, lir, _ = rlx.lower(generate(profile_for("cuda"), (2026, i)).graph,
                                     target="cuda", record=False)
        except rlx.RlxError:
            continue
        parts.append(unit(tgt.dialect, render_graph(tgt.dialect, lir))
                     .replace("rlx_kernel_", f"rlx_kernel_c{i}_"))
    assert len(parts) >= 6
    return "\n".join(parts)


def test_nvrtc_builds_cubins_and_ptx_for_a_newer_arch() -> None:
    from rlx_core.targets.cuda.nvrtc import compile_nvrtc, supported_archs

    lib = _nvrtc()
    src = _corpus_unit()
    image, kind = compile_nvrtc(lib, src, 80)  # sm_90: every cuda build (toolchain.check)
    assert kind == "cubin" and image[:4] == b"\x7fELF"
    newer = max(supported_archs(lib)) + 10  # a GPU newer than this NVRTC: PTX the driver JITs
    image, kind = compile_nvrtc(lib, src, newer)
    assert kind == "ptx" and b".entry rlx_kernel_c" in image


def test_an_nvrtc_rejection_is_the_checker_error_with_the_line() -> None:
    from rlx_core.targets.cuda.nvrtc import compile_nvrtc
    from rlx_core.targets.kernel_check import KernelCheckError

    lib = _nvrtc()
    _, _, lir, _ = rlx.lower(lambda a: a.sum(axis=1), np.ones((4, 300), np.float32),
                             target="cuda", record=False)
    tgt = get_target("cuda")
    src = unit(tgt.dialect, render_graph(tgt.dialect, lir)).replace("__syncthreads",
                                                                     "__syncthreadz")
    with pytest.raises(KernelCheckError) as info:
        compile_nvrtc(lib, src, 90)
    assert info.value.code == "RLX-H003" and "nvrtc" in info.value.message
    assert "__syncthreadz" in info.value.message


def test_without_a_gpu_the_target_says_why_and_stays_compile_check() -> None:
    tgt = get_target("cuda")
    ok, why = tgt.executes_here()
    if ok:
        pytest.skip("a GPU runs the cuda target here")
    assert tgt.verification == "compile-check"
    assert "CUDA driver" in why or "cuInit" in why or "no device" in why or "NVRTC" in why


def test_a_driver_failure_is_a_typed_error_naming_the_call() -> None:
    from rlx_core.targets.cuda.driver import CudaDriverError, check

    with pytest.raises(CudaDriverError) as info:
        check(None, 700, "cuLaunchKernel", "k3")
    assert info.value.code == "RLX-H005"
    assert "cuLaunchKernel (k3)" in info.value.message
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in info.value.message


def test_gpu_check_says_there_is_no_gpu_and_exits_77() -> None:
    from rlx_core.targets.cuda.driver import load

    try:
        load()
    except rlx.RlxError:
        pass
    else:
        pytest.skip("a GPU is present: scripts/gpu_check.sh would run for real")
    p = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "RLX_GPU_CHECK_DRY": "0"})
    assert p.returncode == 77, p.stdout + p.stderr
    assert "no NVIDIA GPU here" in p.stdout and "skipped" in p.stdout


# ---- on a GPU (scripts/gpu_check.sh) ----------------------------------------------------------


def test_gpu_runs_softmax_of_a_matmul_like_numpy() -> None:
    _gpu()
    x = np.random.default_rng(0).standard_normal((64, 40)).astype(np.float32)
    f = lambda a: rlx.nn.softmax(a @ a.T, axis=-1)
    got = rlx.compile(f, x, target="cuda")(x)
    want = rlx.compile(f, x, target="numpy")(x)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def test_gpu_parameters_are_uploaded_again_when_they_change() -> None:
    _gpu()
    x = np.ones((3, 8), np.float32)
    exe = rlx.compile(lambda a: (a * 3).sum(axis=1), x, target="cuda")
    np.testing.assert_array_equal(exe(x), np.full(3, 24, np.float32))
    np.testing.assert_array_equal(exe(x * 2), np.full(3, 48, np.float32))
    info = exe.program.info
    assert info["device"] and "sm_" in info["backend"]

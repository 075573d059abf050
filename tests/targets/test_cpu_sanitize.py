"""The CPU's convolution, depthwise and pooling kernels built with AddressSanitizer and
UndefinedBehaviorSanitizer (``RLX_CPU_SANITIZE=1``, toolchain.SANITIZE_FLAGS: -O3 kept, the
first report stops the process), on the conv tests' shapes: edges, strides, dilations, odd
planes, NCHW and NCHW8c. A read past an input, a parameter, an output or a scratch buffer, a
misaligned or overflowing access, a shift out of range: the run fails with the report.

A program built so needs the ASan runtime loaded first, so the tests run in a child pytest
with it preloaded (``LD_PRELOAD``); leak checking is off (the Python interpreter's own
allocations are not ours). The arena is one allocation: a read past one activation into the
next is not seen (a read injected past a depthwise row's end was caught as a wrong value by
the child test, not by ASan), only past the arena's, the inputs', parameters', outputs' and
scratch buffers' ends.

Not CI-sized (each program compiles with the sanitizers, 2-3 CPU minutes in all, 13 minutes
of wall time at load 14 on the 2-core Zen 1): it runs when asked,
``RLX_TEST_SANITIZE=1 python -m pytest tests/targets/test_cpu_sanitize.py -n 0``, and is
skipped otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlx_core.targets.cpu.target import CpuTarget
from rlx_core.targets.cpu.toolchain import find_compiler

cpu_ok, cpu_why = CpuTarget().available()
pytestmark = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TESTS = [  # NCHW direct + depthwise (phase planes and rows), NCHW8c depthwise, pooling (both),
    # Winograd on NCHW8c sides (its tile-pair gather on AVX-512), the blocked conv
    "test_cpu_conv.py::test_conv_kernels_match_the_reference",
    "test_cpu_conv.py::test_depthwise_phase_planes_and_rows_match_the_reference",
    "test_cpu_depthwise.py",
    "test_cpu_pool.py::test_pool_kernels_match_the_reference",
    "test_cpu_pool.py::test_blocked_pools_match_the_reference",
    "test_cpu_winograd.py::test_blocked_sides_in_a_chain",
    # the blocked conv's kernel library (its tiles' intrinsics form: ASan sees no asm)
    "test_cpu_conv_blocked.py::test_parameter_filters_run_blocked_and_match_the_reference",
    "test_cpu_conv_blocked.py::test_the_tiles_store_a_blocked_output_with_its_epilogue",
]
def _runtime(cc: str) -> str | None:
    """The compiler's ASan runtime library, or None (gcc: libasan.so; clang: its compiler-rt
    library)."""
    for name in ("libasan.so", "libclang_rt.asan-x86_64.so"):
        out = subprocess.run([cc, f"-print-file-name={name}"], capture_output=True, text=True)
        path = out.stdout.strip()
        if out.returncode == 0 and os.path.isabs(path) and os.path.exists(path):
            return path
    return None


@pytest.mark.skipif(not os.environ.get("RLX_TEST_SANITIZE"),
                    reason="minutes of sanitized compiles: run with RLX_TEST_SANITIZE=1")
def test_kernels_are_clean_under_asan_and_ubsan(tmp_path: Path) -> None:
    comp = find_compiler()
    lib = _runtime(comp.path)
    if lib is None:
        pytest.skip(f"{comp.path} has no AddressSanitizer runtime")
    env = dict(os.environ)
    env.update({
        "RLX_CPU_SANITIZE": "1",
        "LD_PRELOAD": lib,
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=99",
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=98",
        "RLX_CACHE_DIR": str(tmp_path / "cache"),  # sanitized programs apart from the rest
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p),
        "OMP_NUM_THREADS": "2",
    })
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p",
           "no:xdist", "-p", "no:randomly", *(str(HERE / t) for t in TESTS)]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    out = run.stdout + run.stderr
    assert "AddressSanitizer" not in out and "runtime error:" not in out, out[-6000:]
    assert run.returncode == 0, out[-6000:]
    assert " passed" in out and "skipped" not in out.split("\n")[-2], out[-3000:]
    built = list((tmp_path / "cache").rglob("*.so"))  # the programs carry the ASan runtime calls
    assert any(b"__asan_report" in so.read_bytes() for so in built), built

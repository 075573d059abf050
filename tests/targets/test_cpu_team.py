"""Team mode on the CPU target: one parallel region per call, kernels split over its threads,
serial kernels on thread 0, barriers between (rlx_core/targets/cpu/team.py)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.cpu import team
from rlx_core.targets.cpu.target import CpuTarget
from rlx_core.targets.cpu.threads import num_threads, set_num_threads

cpu_ok, cpu_why = CpuTarget().available()
needs_cpu = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")


def _body(*lines: str) -> list[str]:
    return ["    " + ln if ln else "" for ln in lines]


def test_team_safe_accepts_worksharing_loops_gemm_blocks_and_barriers() -> None:
    body = _body("float* restrict dot_c = (float*)(scratch + 0);",
                 team.GEMM_BLOCK, "    call();", "}", team.SYNC,
                 team.FOR_PRAGMA + " collapse(2)", "for (int64_t i = 0; i < 4; ++i) {",
                 "    x[i] = 0;", "}",
                 team.SINGLE_PRAGMA, "for (int64_t j = 0; j < 2; ++j) {", "    y[j] = 1;", "}")
    assert team.team_safe(body)


@pytest.mark.parametrize("body", [
    _body("memcpy(out0, in0, 16);"),  # a serial statement
    _body("for (int64_t i = 0; i < 4; ++i) {", "    x[i] = 0;", "}"),  # a loop without pragma
    _body(team.FOR_PRAGMA, "x[0] = 1;"),  # a pragma not followed by a loop
    _body("if (tid == 0) {", "    f();", "}"),
])
def test_team_safe_rejects_anything_else(body: list[str]) -> None:
    assert not team.team_safe(body)


def test_team_calls_put_barriers_only_where_a_team_kernel_is_involved() -> None:
    calls = ["    a();", "    b();", "    c();", "    d();"]
    out = team.team_calls(calls, [False, False, True, False])
    text = "\n".join(out)
    assert text.count(team.SYNC) == 2  # before c (after serial b) and after c
    assert "if (rlx_team_tid == 0) a();" in text and "if (rlx_team_tid == 0) d();" in text
    assert "        c();" in out


@pytest.fixture
def threads():
    before = num_threads()
    yield set_num_threads
    set_num_threads(before)


@needs_cpu
@pytest.mark.parametrize("n", [1, 2, 3])
def test_mixed_team_and_serial_kernels_match_numpy_at_any_thread_count(n: int,
                                                                       threads) -> None:
    threads(n)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((96, 64), np.float32)
    w = rng.standard_normal((64, 80), np.float32)
    idx = rng.integers(0, 96, 40).astype(np.int32)

    def f(a, b, i):
        h = rlx.nn.relu(a @ b + 1.0)           # team: GEMM block, barrier, epilogue loop
        g = rlx.take(h, i, axis=0)             # serial: gather runs on thread 0
        return rlx.nn.softmax(g * 0.5, axis=-1), h.sum()

    exe = rlx.compile(f, x, w, idx, target="cpu", record=False)
    src = exe.program.info["source"]
    assert src.count("#pragma omp parallel num_threads") == 1  # one region per call
    assert "if (rlx_team_tid == 0)" in src and "/* team gemm */" in src
    got_s, got_t = exe(x, w, idx)
    h = np.maximum(x.astype(np.float64) @ w + 1.0, 0.0)
    g = h[idx] * 0.5
    e = np.exp(g - g.max(-1, keepdims=True))
    np.testing.assert_allclose(got_s, e / e.sum(-1, keepdims=True), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got_t, h.sum(), rtol=1e-4)


@needs_cpu
def test_profiling_renders_one_region_per_kernel_instead(monkeypatch) -> None:
    monkeypatch.setenv("RLX_CPU_PROFILE", "1")
    x = np.ones((256, 256), np.float32)
    exe = rlx.compile(lambda a: (a * 2.0).sum(axis=1), x, target="cpu", record=False)
    src = exe.program.info["source"]
    assert "rlx_team_tid" not in src  # kernels are timed one by one
    np.testing.assert_allclose(exe(x), np.full(256, 512.0, np.float32))

"""CPU target performance plumbing: thread counts, the profiling mode, the run fast path."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.errors import ArgumentError
from rlx_core.targets.cpu import sgemm, threads
from rlx_core.targets.registry import get_target

pytestmark = pytest.mark.skipif(not get_target("cpu").available()[0],
                                reason="the cpu target is unavailable here (no C compiler)")


def _mlp(x, w, b):
    # big enough (256 x 256 results) that the epilogue loop is an OpenMP parallel loop
    return rlx.nn.relu(x @ w + b) * 2.0


def _inputs(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((256, 64), dtype=np.float32),
            rng.standard_normal((64, 256), dtype=np.float32),
            rng.standard_normal((256,), dtype=np.float32))


def _want(x, w, b):
    return np.maximum(x.astype(np.float64) @ w + b, 0.0) * 2.0  # f64 oracle


def test_thread_counts_give_the_same_results() -> None:
    x, w, b = _inputs()
    exe = rlx.compile(_mlp, x, w, b, target="cpu")
    before = threads.num_threads()
    try:
        outs = []
        for n in (1, 2, 3):
            threads.set_num_threads(n)
            assert threads.num_threads() == n
            outs.append(exe(x, w, b))
        for o in outs:
            np.testing.assert_allclose(o, _want(x, w, b), rtol=1e-4, atol=1e-4)
    finally:
        threads.set_num_threads(before)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", 10**12, threads.MAX_THREADS + 1])
def test_bad_thread_count_is_a_typed_error(bad) -> None:
    with pytest.raises(ArgumentError):
        threads.set_num_threads(bad)


def test_env_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLX_NUM_THREADS", "3")
    assert threads.default_threads() == 3
    monkeypatch.setenv("RLX_NUM_THREADS", "many")
    with pytest.raises(ArgumentError, match="RLX_NUM_THREADS"):
        threads.default_threads()
    monkeypatch.setenv("RLX_NUM_THREADS", "0")
    with pytest.raises(ArgumentError):
        threads.default_threads()
    # past a C int: the programs' setters would get it truncated (10**12 -> 727,379,968)
    monkeypatch.setenv("RLX_NUM_THREADS", str(10**12))
    with pytest.raises(ArgumentError, match=f"from 1 to {threads.MAX_THREADS}"):
        threads.default_threads()


def test_profiling_mode_counts_every_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLX_CPU_PROFILE", "1")
    x, w, b = _inputs(1)
    exe = rlx.compile(_mlp, x, w, b, target="cpu")
    prof = exe.program.info["profile"]
    for _ in range(3):
        np.testing.assert_allclose(exe(x, w, b), _want(x, w, b), rtol=1e-4, atol=1e-4)
    rows = prof()
    assert set(rows) == {k.name for k in exe.lir.kernels}
    assert all(r["calls"] == 3 and r["seconds"] >= 0.0 for r in rows.values())
    assert any(r["impl"].startswith(("blas-", "generated-matmul", sgemm.IMPL)) for r in rows.values())
    assert "_profile(" in exe.program.info["source"]


def test_profile_is_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RLX_CPU_PROFILE", raising=False)
    x, w, b = _inputs(2)
    exe = rlx.compile(_mlp, x, w, b, target="cpu")
    assert "profile" not in exe.program.info
    # no per-kernel timers (the thread team reads the clock for its spin budget either way)
    src = exe.program.info["source"]
    assert "_prof_s" not in src and "_profile(" not in src


def test_run_fast_path_still_converts_odd_inputs() -> None:
    x, w, b = _inputs(3)
    exe = rlx.compile(_mlp, x, w, b, target="cpu")
    run = exe.program.run
    # a transposed view (not C-contiguous) and a float64 array both take the converting path
    wt = np.ascontiguousarray(w.T).T
    got = run([x, wt, b.astype(np.float64)], exe.params)[0]
    np.testing.assert_allclose(got, _want(x, w, b), rtol=1e-4, atol=1e-4)
    # outputs are fresh arrays per call, never the previous call's buffer
    again = run([x, w, b], exe.params)[0]
    assert again is not got
    np.testing.assert_array_equal(again, got)
    with pytest.raises(ArgumentError):
        run([x, w], exe.params)


def _heads(x):
    """A head split and merge around elementwise work: two reshapes of arena values."""
    h = rlx.tanh(x).reshape(4, 8, 4)
    return (rlx.exp(h) * 2.0).reshape(4, 32) + x


@pytest.mark.parametrize("profile", [False, True])
def test_aliased_reshapes_run_no_kernel_and_no_barrier(monkeypatch: pytest.MonkeyPatch,
                                                       profile: bool) -> None:
    if profile:
        monkeypatch.setenv("RLX_CPU_PROFILE", "1")
    x = np.random.default_rng(3).standard_normal((4, 32)).astype(np.float32)
    exe = rlx.compile(_heads, x, target="cpu", record=False)
    kernels = exe.lir.kernels
    aliased = [k.name for k in kernels if k.nodes[0].op == "reshape"]
    assert len(aliased) == 2 and all(exe.lir.plan.is_alias(k.outputs[0]) for k in kernels
                                     if k.name in aliased)
    h = np.tanh(x).reshape(4, 8, 4)
    want = (np.exp(h) * 2.0).reshape(4, 32) + x
    for _ in range(2):
        np.testing.assert_allclose(exe(x), want, rtol=1e-6, atol=1e-6)
    info = exe.program.info
    src = info["source"]
    run = src[src.index("_run("):]
    called = [k.name for k in kernels if f"_{k.name}(" in run]
    assert called == [k.name for k in kernels if k.name not in aliased]
    assert all(info["kernels"][k]["impl"] == "alias" for k in aliased)
    if profile:
        rows = info["profile"]()
        assert all(rows[k]["calls"] == 0 for k in aliased)
        assert all(r["calls"] == 2 for k, r in rows.items() if k not in aliased)

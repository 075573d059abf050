"""A layer_norm / rms_norm after a GEMM (and its bias + residual epilogue) runs inside the
matmul kernel on the cpu (passes/fuse.py's place_norm, c_common/matmul.py): each claimed
chunk of whole rows is normalised right after the GEMM wrote it. Checked bit for bit
against the same graph with the norm in a kernel of its own (RLX_NO_NORM_EPILOGUE=1), and
against float64 numpy, on the GEMM paths a norm can meet: row chunks of whole sequences
(MiniLM's (batch, seq, d) shape), few rows, a norm straight after the dot, batched GEMMs
(whose per-batch rows the chunks narrow), rows not a multiple of the four the row loop
runs side by side, one thread and the team, f32 and f64."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.cpu.target import CpuTarget

cpu_ok, cpu_why = CpuTarget().available()
pytestmark = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")


def _ref(op: str, h: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    if op == "layer_norm":
        c = h - h.mean(axis=-1, keepdims=True)
        return c / np.sqrt((c * c).mean(axis=-1, keepdims=True) + eps) * w + b
    return h / np.sqrt((h * h).mean(axis=-1, keepdims=True) + eps) * w


# (norm, x shape, weight shape, epilogue): "res" adds a bias and a residual as MiniLM's
# attention output and FFN2 do, "bias" a bias, "none" normalises the dot itself
CASES = [
    ("layer_norm", (8, 128, 64), (64, 384), "res"),  # row chunks of whole sequences
    ("layer_norm", (100, 96), (96, 384), "res"),  # few rows: column chunks, then the norm
    ("layer_norm", (1, 128, 96), (96, 384), "res"),  # one sequence (MiniLM at batch 1)
    ("rms_norm", (1001, 48), (48, 40), "none"),  # rows not a multiple of 4 or 16
    ("layer_norm", (3, 70, 32), (3, 32, 48), "bias"),  # a batched GEMM
    ("layer_norm", (2, 5, 40), (40, 100), "res"),  # small: one thread's chunk
]


def _graph(op: str, w: np.ndarray, kind: str, eps: float):
    rng = np.random.default_rng(w.shape[-1])
    nw = rng.standard_normal(w.shape[-1]).astype(w.dtype)
    nb = rng.standard_normal(w.shape[-1]).astype(w.dtype)
    bias = rng.standard_normal(w.shape[-1]).astype(w.dtype)

    def f(x, res):
        h = x @ rlx.param(w, "w")
        if kind != "none":
            h = h + rlx.param(bias, "bias")
        if kind == "res":
            h = h + res
        if op == "layer_norm":
            return rlx.nn.layer_norm(h, rlx.param(nw, "nw"), rlx.param(nb, "nb"), eps=eps)
        return rlx.nn.rms_norm(h, rlx.param(nw, "nw"), eps=eps)

    def ref(x, res):
        h = x.astype(np.float64) @ w.astype(np.float64)
        if kind != "none":
            h = h + bias
        if kind == "res":
            h = h + res
        return _ref(op, h, nw, nb, eps)

    return f, ref


def _fused(exe, op: str) -> bool:
    return any(k.kind == "matmul" and k.nodes[-1].op == op for k in exe.lir.kernels)


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op,xs,ws,kind", CASES,
                         ids=[f"{c[0]}-{'x'.join(map(str, c[1]))}-{c[3]}" for c in CASES])
def test_norm_in_the_matmul_kernel_matches_the_separate_kernel(
        op: str, xs: tuple, ws: tuple, kind: str, dtype: str, n: int, threads,
        monkeypatch: pytest.MonkeyPatch) -> None:
    threads(n)
    rng = np.random.default_rng(sum(xs) + n)
    x = rng.standard_normal(xs).astype(dtype)
    w = (rng.standard_normal(ws) / np.sqrt(ws[-2])).astype(dtype)
    out_shape = xs[:-1] + ws[-1:]
    res = rng.standard_normal(out_shape).astype(dtype)
    f, ref = _graph(op, w, kind, 1e-5)
    exe = rlx.compile(f, x, res, target="cpu", record=False)
    assert _fused(exe, op), [k.kind + ":" + "+".join(m.op for m in k.nodes)
                             for k in exe.lir.kernels]
    monkeypatch.setenv("RLX_NO_NORM_EPILOGUE", "1")
    apart = rlx.compile(f, x, res, target="cpu", record=False)
    assert not _fused(apart, op)
    got = np.asarray(exe(x, res))
    np.testing.assert_array_equal(got, np.asarray(apart(x, res)))
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(got, ref(x, res), rtol=tol, atol=tol)


def _ffn2_norm(batch: int, seq: int, seed: int):
    """MiniLM's FFN2 + residual + layer norm at ``batch`` x ``seq`` tokens, compiled for cpu:
    (graph, reference, x, residual, executable, the matmul kernel's source), after checking
    the norm ends that one matmul kernel."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, seq, 1536)).astype(np.float32)
    w = (rng.standard_normal((1536, 384)) / 40).astype(np.float32)
    res = rng.standard_normal((batch, seq, 384)).astype(np.float32)
    f, ref = _graph("layer_norm", w, "res", 1e-12)
    exe = rlx.compile(f, x, res, target="cpu", record=False)
    (k,) = [k for k in exe.lir.kernels if k.kind == "matmul"]
    assert k.nodes[-1].op == "layer_norm"
    return f, ref, x, res, exe, exe.program.sources[k.name]


def test_minilm_shaped_norm_runs_in_the_gemm_chunks(threads) -> None:
    """MiniLM's FFN2 + residual + layer norm at batch 8: one claimed phase (the chunks of
    whole sequences normalise their rows), no barrier and no second pass over C."""
    threads(2)
    _, ref, x, res, exe, src = _ffn2_norm(8, 128, seed=5)
    if exe.program.info.get("own_sgemm") and "rlx_team_take(" in src:
        assert src.count("rlx_team_take(") == 1, src
    np.testing.assert_allclose(np.asarray(exe(x, res)), ref(x, res), rtol=1e-4, atol=1e-4)


def test_a_norm_after_the_barrier_is_shared_out_however_small(
        threads, monkeypatch: pytest.MonkeyPatch) -> None:
    """MiniLM's FFN2 + residual + layer norm at batch 2 x 8 tokens: 16 rows make no chunks of
    whole rows, so the GEMM runs in column chunks and the norm follows the team's barrier. Its
    four groups of four rows are claimed chunks there (small as it is: the threads meet at the
    barrier anyway), not one chunk one thread runs while the other waits; the same bits as the
    norm in a kernel of its own."""
    threads(2)
    f, ref, x, res, exe, src = _ffn2_norm(2, 8, seed=9)
    if exe.program.info.get("own_sgemm") and "rlx_team_take(" in src:
        assert "rlx_team_done(rlx_work" in src, src  # the barrier after the column chunks
        assert "rlx_team_take(rlx_work, 2, 2, 4)" in src, src  # the norm: 4 chunks, not 1
    got = np.asarray(exe(x, res))
    np.testing.assert_allclose(got, ref(x, res), rtol=1e-4, atol=1e-4)
    monkeypatch.setenv("RLX_NO_NORM_EPILOGUE", "1")
    apart = rlx.compile(f, x, res, target="cpu", record=False)
    np.testing.assert_array_equal(got, np.asarray(apart(x, res)))


def test_a_norm_whose_input_is_read_elsewhere_keeps_its_own_kernel() -> None:
    """The pre-norm sum is also returned: the kernel would have to store both, so the norm
    stays apart (place_norm's single-use rule)."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    w = rng.standard_normal((32, 48)).astype(np.float32)
    nw, nb = np.ones(48, np.float32), np.zeros(48, np.float32)

    def f(a):
        h = a @ rlx.param(w, "w")
        return h, rlx.nn.layer_norm(h, rlx.param(nw, "nw"), rlx.param(nb, "nb"))

    exe = rlx.compile(f, x, target="cpu", record=False)
    assert not _fused(exe, "layer_norm")
    h, y = (np.asarray(o) for o in exe(x))
    np.testing.assert_allclose(y, _ref("layer_norm", h.astype(np.float64), nw, nb, 1e-5),
                               rtol=1e-4, atol=1e-4)

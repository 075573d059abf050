"""CPU fast paths against numpy: GEMMs split over the team (serial without OpenMP),
vectorised exp/erf/tanh, kernels sharing one function, and the training step's direct call."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.errors import ArgumentError
from rlx_core.targets.cpu.blas import find_blas
from rlx_core.targets.cpu.target import CpuTarget

pytestmark = pytest.mark.skipif(not CpuTarget().available()[0],
                                reason=f"cpu target unavailable: {CpuTarget().available()[1]}")


@pytest.mark.parametrize("case", ["plain", "lhs_t", "rhs_t", "batched", "few_batches"])
def test_split_gemm_matches_numpy(case: str, two_threads: None) -> None:
    if find_blas()[0] is None:
        pytest.skip("no BLAS: the split is a BLAS path")
    rng = np.random.default_rng(3)
    # large enough to pass TEAM_GEMM_MIN; 203 rows is no multiple of the 16-row blocks
    shapes = {"plain": ((203, 96), (96, 80)), "lhs_t": ((96, 203), (96, 80)),
              "rhs_t": ((203, 96), (80, 96)), "batched": ((5, 70, 64), (5, 64, 72)),
              "few_batches": ((1, 150, 64), (1, 64, 72))}[case]
    a = rng.standard_normal(shapes[0], np.float32)
    b = rng.standard_normal(shapes[1], np.float32)
    fns = {"plain": lambda x, y: x @ y, "lhs_t": lambda x, y: x.T @ y,
           "rhs_t": lambda x, y: x @ y.T, "batched": lambda x, y: x @ y,
           "few_batches": lambda x, y: x @ y}
    exe = rlx.compile(fns[case], a, b, target="cpu", record=False)
    src = "".join(exe.sources.values())
    # split by rows or batches, on OpenBLAS or rlx's own kernel (cpu/sgemm.py)
    assert "/* team gemm */" in src and ("cblas_sgemm" in src or "rlx_sgemm(" in src)
    want = {"lhs_t": lambda: a.T @ b, "rhs_t": lambda: a @ b.T}.get(case, lambda: a @ b)()
    np.testing.assert_allclose(exe(a, b), want, rtol=1e-5, atol=1e-4)


def test_without_openmp_a_large_gemm_runs_serial_with_its_epilogue() -> None:
    """A compiler without OpenMP: no team, no pragma; a GEMM large enough to split over a
    team runs on the calling thread, its bias + GELU after it (with the same erf as a team
    GEMM's epilogue)."""
    if find_blas()[0] is None:
        pytest.skip("no BLAS: the GEMM is a generated loop nest")
    from rlx_core.targets.cpu import epilogue_erf
    from rlx_core.targets.cpu.renderer import render_program

    rng = np.random.default_rng(4)
    x = rng.standard_normal((450, 64), np.float32)
    w, b = rng.standard_normal((64, 72), np.float32), rng.standard_normal(72, np.float32)
    exe = rlx.compile(lambda t: rlx.nn.gelu(t @ rlx.param(w, "w") + rlx.param(b, "b")), x,
                      target="cpu", record=False)
    assert "/* team gemm */" in "".join(exe.sources.values())
    src = render_program(exe.lir, openmp=False).source
    assert "#pragma omp" not in src and "/* team gemm */" not in src
    assert "for (int64_t bb = 0; bb < 1; ++bb)" in src
    assert f"= {epilogue_erf.NAME}(" in src and "= rlx_erf_f(" not in src


def test_exp_erf_vectorised_forms_match_numpy() -> None:
    from scipy.special import erf

    x = np.concatenate([np.linspace(-110, 95, 4001, dtype=np.float32),
                        np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 88.72, -87.4, 0.4999,
                                  0.5, 1e-30], np.float32)])
    exe = rlx.compile(lambda t: (rlx.exp(t), rlx.erf(t)), x, target="cpu", record=False)
    got_e, got_r = exe(x)
    with np.errstate(over="ignore"):
        want_e = np.exp(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(got_e, want_e, rtol=3e-7, atol=1e-38, equal_nan=True)
    np.testing.assert_allclose(got_r, erf(x.astype(np.float64)), rtol=0, atol=5e-7,
                               equal_nan=True)
    assert "rlx_exp_f(" in "".join(exe.sources.values())


def test_erf_rational_is_accurate_across_its_range_and_relative_near_zero() -> None:
    from scipy.special import erf

    # dense where the rational approximation lives, plus its clamp point and tiny arguments
    x = np.concatenate([np.linspace(-4.5, 4.5, 200_001, dtype=np.float32),
                        np.float32(4.0) + np.arange(-4, 5, dtype=np.float32) * 4.8e-7,
                        np.geomspace(1e-38, 1.0, 2001, dtype=np.float32)])
    got = rlx.compile(rlx.erf, x, target="cpu", record=False)(x)
    want = erf(x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=0, atol=4.5e-7)
    small = np.abs(x) < 1.0
    np.testing.assert_allclose(got[small], want[small], rtol=5e-7, atol=0)
    assert np.abs(got).max() <= 1.0
    np.testing.assert_array_equal(np.signbit(got), np.signbit(x))
    # the specials: the clamps let a NaN through (no select on x != x), infinities clamp
    special = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30] * 4,
                       np.float32)
    got = rlx.compile(rlx.erf, special, target="cpu", record=False)(special)
    np.testing.assert_array_equal(got, erf(special.astype(np.float64)).astype(np.float32))
    np.testing.assert_array_equal(np.signbit(got[2:8]), np.signbit(special[2:8]))


def test_tanh_vectorised_form_is_accurate_across_its_range() -> None:
    # dense over both halves (the polynomial below |x| = 0.625), the switch and the clamp,
    # tiny arguments (relative error), and the specials
    x = np.concatenate([np.linspace(-12, 12, 240_001, dtype=np.float32),
                        np.float32(0.625) + np.arange(-4, 5, dtype=np.float32) * 6e-8,
                        np.geomspace(1e-38, 1.0, 2001, dtype=np.float32),
                        np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 9.0, 10.0, 89.0],
                                 np.float32)])
    exe = rlx.compile(rlx.tanh, x, target="cpu", record=False)
    got = exe(x)
    want = np.tanh(x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=0, equal_nan=True)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(x))
    assert np.nanmax(np.abs(got)) <= 1.0
    assert "rlx_tanh_f(" in "".join(exe.sources.values())


def test_repeated_blocks_share_one_kernel_function() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 8), np.float32)

    def f(t):
        for _ in range(3):  # a reduction per block, so each block is kernels of its own
            t = rlx.nn.softmax(t * 1.5, axis=-1)
        return t

    exe = rlx.compile(f, x, target="cpu", record=False)
    shared = [s for s in exe.sources.values() if "same code as" in s]
    assert shared, "the three identical blocks should reuse one function"
    want = x.astype(np.float64)
    for _ in range(3):
        e = np.exp(want * 1.5 - (want * 1.5).max(-1, keepdims=True))
        want = e / e.sum(-1, keepdims=True)
    np.testing.assert_allclose(exe(x), want, rtol=1e-5, atol=1e-6)


def test_training_step_direct_call_matches_checked_call() -> None:
    from rlx_core.models.mlp import mlp_loss
    from rlx_core.optim import SGD, compile_step

    params, x, y = _tiny_mlp(5, 1)
    fast = compile_step(mlp_loss, SGD(0.1), params, x, y, target="cpu")
    slow = compile_step(mlp_loss, SGD(0.1), params, x, y, target="cpu")
    for _ in range(3):
        fast(x, y)
        slow(x.tolist(), y.astype(np.int64))  # lists / other dtypes take the checked path
    assert fast._fast((*[a for a in _leaves(fast.params)], x, y))
    assert not slow._fast((*[a for a in _leaves(slow.params)], x.tolist(), y))
    for a, b in zip(_leaves(fast.params), _leaves(slow.params), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert fast.losses == pytest.approx(slow.losses, rel=1e-6)
    with pytest.raises(ArgumentError):
        fast(x[:3], y[:3])  # a wrong shape still fails with the executable's error


def test_training_step_misses_go_to_the_checked_path_not_a_new_specialization() -> None:
    """With its leaves of the compiled types a step calls the module straight away: a batch
    the guards refuse (another shape, another dtype) runs the executable's checked path
    (refused typed, or converted), and the cache compiles nothing new."""
    from rlx_core.models.mlp import mlp_loss
    from rlx_core.optim import SGD, compile_step

    params, x, y = _tiny_mlp(8, 4)
    step = compile_step(mlp_loss, SGD(0.1), params, x, y, target="cpu")
    ref = compile_step(mlp_loss, SGD(0.1), params, x, y, target="numpy")
    cache = step.jitted.cache
    assert cache.fallback is step.executable
    for _ in range(2):
        step(x, y)
        ref(x, y)
    assert step._leaves_ok and cache.hits == 2
    with pytest.raises(ArgumentError):
        step(x[:3], y[:3])
    step(x.astype(np.float64), y)  # converted by the executable
    ref(x, y)
    assert cache.misses == 1 and len(cache.specializations) == 1 and cache.hits == 2
    assert step.losses == pytest.approx(ref.losses, rel=1e-5)
    assert all(type(a) is np.ndarray for a in _leaves(step.params))


def _tiny_mlp(data_seed: int, param_seed: int) -> tuple:
    """A 12-8-3 MLP's parameters and one batch of six (x, integer labels)."""
    from rlx_core.models.mlp import init_mlp

    rng = np.random.default_rng(data_seed)
    x = rng.standard_normal((6, 12), np.float32)
    y = rng.integers(0, 3, 6).astype(np.int32)
    return init_mlp((12, 8, 3), seed=param_seed), x, y


def _leaves(tree):
    from rlx_core.autodiff.pytree import flatten

    return flatten(tree)[0]


def test_training_step_on_cpu_runs_through_the_specialization_cache_module() -> None:
    from rlx_core.models.mlp import mlp_loss
    from rlx_core.optim import SGD, compile_step

    params, x, y = _tiny_mlp(6, 2)
    step = compile_step(mlp_loss, SGD(0.1), params, x, y, target="cpu")
    ref = compile_step(mlp_loss, SGD(0.1), params, x, y, target="numpy")
    for _ in range(3):
        step(x, y)
        ref(x, y)
    cache = step.jitted.cache
    assert cache.misses == 1 and cache.hits == 3  # lookup compiled it; every step hit
    for a, b in zip(_leaves(step.params), _leaves(ref.params), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_training_step_keeps_leaves_and_rebuilds_the_pytree_on_read() -> None:
    """The step keeps flat leaves; ``params`` is rebuilt when read, assigning it restarts
    from the new values, and a batch of another dtype takes the checked path (converted)."""
    from rlx_core.models.mlp import mlp_loss
    from rlx_core.optim import SGD, compile_step

    params, x, y = _tiny_mlp(7, 3)
    step = compile_step(mlp_loss, SGD(0.1), params, x, y, target="cpu")
    assert step.params is params  # nothing has run: the tree as given
    first = step(x, y)
    p1 = step.params
    assert p1 is step.params and set(p1) == set(params)  # cached until the next step
    assert set(p1["fc1"]) == set(params["fc1"])
    step(x, y)
    assert step.params is not p1 and step.jitted.cache.hits == 2
    step.params = params  # back to the start: the same first loss again
    assert step(x, y) == pytest.approx(first, rel=1e-6)
    again = step(x.astype(np.float64), y)  # converted by the checked path, not a new entry
    assert np.isfinite(again) and step.jitted.cache.misses == 1
    fresh = compile_step(mlp_loss, SGD(0.1), params, x, y, target="cpu")
    for _ in range(2):  # as many steps as since the reset
        fresh(x, y)
    for a, b in zip(_leaves(step.params), _leaves(fresh.params), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("in_place", [False, True])
def test_assigning_state_or_params_mid_run_is_what_the_next_fast_step_runs_on(
        in_place: bool) -> None:
    """The per-step path calls the module with the leaves of the last step; assigning
    ``state`` (momentum buffers) or ``params`` between fast steps replaces them: the steps
    after it match a step compiled from those values, in place or not."""
    from rlx_core.models.mlp import mlp_loss
    from rlx_core.optim import SGD, compile_step

    params, x, y = _tiny_mlp(9, 5)
    opt = SGD(0.1, momentum=0.9)
    step = compile_step(mlp_loss, opt, params, x, y, target="cpu", in_place=in_place)
    for _ in range(3):
        step(x, y)
    assert step._leaves_ok  # the last steps took the per-step path
    mid_p = {k: {n: np.array(a) for n, a in v.items()} for k, v in step.params.items()}
    step.state = opt.init(params)  # momentum back to zero, parameters kept
    fresh = compile_step(mlp_loss, opt, mid_p, x, y, target="cpu")
    got = [step(x, y) for _ in range(3)]
    want = [fresh(x, y) for _ in range(3)]
    assert got == pytest.approx(want, rel=1e-6)
    step.params = params  # and back to the start, momentum as it is now
    mid_s = [np.array(a) for a in _leaves(step.state)]
    again = compile_step(mlp_loss, opt, params, x, y, target="cpu")
    again.state = _unflatten_like(again.state, mid_s)
    assert [step(x, y) for _ in range(2)] == pytest.approx([again(x, y) for _ in range(2)],
                                                           rel=1e-6)
    for a, b in zip(_leaves(step.params), _leaves(again.params), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def _unflatten_like(tree, leaves):
    from rlx_core.autodiff.pytree import flatten, unflatten

    return unflatten(flatten(tree)[1], list(leaves))

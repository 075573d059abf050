"""rlx.splat's ops through the dispatch contract on every target with their kernels, against
the numpy oracle: forward, the VJP ops, rlx.grad of a loss through render, culling and zero
opacity; and RLX-S020 on a target without them."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.dispatch.errors import LegalizationError
from rlx_core.splat import layout as L
from rlx_core.splat import reference as ref
from rlx_core.splat import scene
from rlx_core.targets.registry import get_target
from tests.splat.conftest import H, W

TARGETS = ["numpy", "cpu", "webgpu"]
GRAD_TARGETS = TARGETS
BG = (0.1, 0.2, 0.3)


def _compile(fn, *args, target: str):
    ok, why = get_target(target).available()
    if not ok:
        pytest.skip(f"{target}: {why}")
    return rlx.compile(fn, *args, target=target)


def _scene_with_edge_cases(cam) -> list[np.ndarray]:
    """12 Gaussians, three of them culled (behind the camera, at its centre, flat and far off
    screen), one of zero opacity and one degenerate (a zero scale)."""
    view, _ = cam
    g = scene.random_gaussians(12, 3, seed=1, extent=0.6, scale=0.15)
    means, scales, opac = g.means.copy(), g.scales.copy(), g.opacities.copy()
    campos = -view[:3, :3].T @ view[:3, 3]
    means[0] = campos - 2 * (means[1] - campos)
    means[1] = campos
    means[2] = means[2] + 50 * view[0, :3]
    scales[3, 1] = 0.0
    opac[4] = 0.0
    return [means, g.quats, scales, opac, g.sh]


@pytest.mark.parametrize("target", TARGETS)
def test_project_and_rasterize_match_the_oracle(target, cam) -> None:
    view, K = cam
    gs = _scene_with_edge_cases(cam)
    exe = _compile(lambda *a: rlx.splat.project(*a, width=W, height=H), *gs, view, K,
                   target=target)
    rec = np.asarray(exe(*gs, view, K))
    want = ref.project(*gs, view, K, W, H)
    assert (want[:3] == 0).all() and (want[3:, L.RADIUS] > 0).all()
    np.testing.assert_allclose(rec, want, rtol=2e-5, atol=2e-5)
    exe = _compile(lambda r: rlx.splat.rasterize(r, width=W, height=H, background=BG), want,
                   target=target)
    np.testing.assert_allclose(np.asarray(exe(want)), ref.rasterize(want, W, H, BG), atol=2e-5)


@pytest.mark.parametrize("target", GRAD_TARGETS)
def test_vjp_ops_match_the_oracle(target, cam) -> None:
    view, K = cam
    gs = _scene_with_edge_cases(cam)
    rec = ref.project(*gs, view, K, W, H)
    rng = np.random.default_rng(5)
    g_img = rng.normal(size=(H, W, 3)).astype(np.float32)
    g_rec = rng.normal(size=rec.shape).astype(np.float32)
    exe = _compile(lambda r, g: rlx.splat.rasterize_vjp(r, g, width=W, height=H, background=BG),
                   rec, g_img, target=target)
    want = ref.rasterize_vjp(rec, g_img, W, H, BG)
    np.testing.assert_allclose(np.asarray(exe(rec, g_img)), want, rtol=1e-4,
                               atol=1e-4 * np.abs(want).max())
    exe = _compile(lambda *a: rlx.splat.project_vjp(*a, width=W, height=H), *gs, view, K, g_rec,
                   target=target)
    want = ref.project_vjp(*gs, view, K, g_rec, W, H)
    np.testing.assert_allclose(np.asarray(exe(*gs, view, K, g_rec)), want, rtol=1e-4,
                               atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("target", GRAD_TARGETS)
def test_grad_of_a_photometric_loss(target, cam) -> None:
    """rlx.grad through render (the HIR VJP rules) equals the oracle's chained backward."""
    view, K = cam
    gs = _scene_with_edge_cases(cam)
    goal = np.random.default_rng(6).uniform(size=(H, W, 3)).astype(np.float32)

    def loss(m, q, s, o, sh, v, k, t):
        img = rlx.splat.render(m, q, s, o, sh, v, k, width=W, height=H, background=BG)
        return ((img - t) ** 2).sum()

    vg = rlx.value_and_grad(loss, argnums=(0, 1, 2, 3, 4))

    def step(*a):
        value, grads = vg(*a)
        return (value, *grads)

    value, *grads = rlx.jit(step, target=target)(*gs, view, K, goal)
    rec = ref.project(*gs, view, K, W, H, dtype=np.float64)
    img = ref.rasterize(rec, W, H, BG, dtype=np.float64)
    np.testing.assert_allclose(float(value), ((img - goal) ** 2).sum(), rtol=1e-5)
    g_rec = ref.rasterize_vjp(rec, 2 * (img - goal), W, H, BG, dtype=np.float64)
    want = ref.project_vjp(*gs, view, K, g_rec, W, H, dtype=np.float64)
    o = L.grad_cols(16)
    for i, got in enumerate(grads):
        w = want[:, o[i]:o[i + 1]]
        np.testing.assert_allclose(np.asarray(got).reshape(len(w), -1), w, rtol=1e-3,
                                   atol=1e-4 * np.abs(w).max(), err_msg=f"operand {i}")
        if i < 4:
            assert (np.asarray(got)[:3] == 0).all()  # culled: no gradient


def test_eager_calls_and_render_backward(cam) -> None:
    view, K = cam
    gs = _scene_with_edge_cases(cam)
    img = rlx.splat.render(*gs, view, K, width=W, height=H)
    np.testing.assert_allclose(np.asarray(img), ref.rasterize(ref.project(*gs, view, K, W, H),
                                                              W, H), atol=1e-6)
    g = np.ones((H, W, 3), np.float32)
    grads = rlx.splat.render_backward(*gs, view, K, g, width=W, height=H)
    rec = ref.project(*gs, view, K, W, H)
    want = ref.project_vjp(*gs, view, K, ref.rasterize_vjp(rec, g, W, H), W, H)
    assert [np.asarray(x).shape for x in grads] == [a.shape for a in gs]
    np.testing.assert_allclose(np.asarray(grads[0]), want[:, :3], rtol=1e-5, atol=1e-5)


def test_other_targets_fail_with_rlx_s020(cam) -> None:
    view, K = cam
    gs = _scene_with_edge_cases(cam)
    with pytest.raises(LegalizationError) as err:
        rlx.compile(lambda *a: rlx.splat.render(*a, width=W, height=H), *gs, view, K,
                    target="opencl")
    assert err.value.codes == ["RLX-S020", "RLX-S020"]
    assert "cpu or webgpu" in str(err.value)


def test_shape_rules_name_the_operand(cam) -> None:
    view, K = cam
    gs = _scene_with_edge_cases(cam)
    bad = [gs[0], gs[1], gs[2], gs[3], gs[4][:, :5]]
    with pytest.raises(rlx.ShapeError, match="sh must be"):
        rlx.splat.project(*bad, view, K, width=W, height=H)
    with pytest.raises(rlx.DTypeError, match="f32"):
        rlx.splat.rasterize(np.zeros((3, 11)), width=W, height=H)


def _webgpu_scene(cam) -> tuple[np.ndarray, ...]:
    if not get_target("webgpu").available()[0]:
        pytest.skip(f"webgpu: {get_target('webgpu').available()[1]}")
    view, K = cam
    g = scene.random_gaussians(12, 1, seed=1, extent=0.6, scale=0.15)
    return g.means, g.quats, g.scales, g.opacities, g.sh, view, K


def test_webgpu_tile_entry_overflow_is_rlx_s021(cam) -> None:
    """A tile list too small for the scene raises RLX-S021 naming the count it needs (it
    rendered NaN before); with that many entries the result is the oracle's."""
    from rlx_core.splat.errors import TileEntriesOverflowError

    args = _webgpu_scene(cam)
    rec = ref.project(*args, W, H)
    g_img = np.random.default_rng(2).normal(size=(H, W, 3)).astype(np.float32)

    def fwd(te):
        return rlx.compile(lambda *a: rlx.splat.render(*a, width=W, height=H, background=BG,
                                                         tile_entries=te), *args, target="webgpu")

    with pytest.raises(TileEntriesOverflowError) as err:
        fwd(4)(*args)
    assert err.value.code == "RLX-S021" and "tile_entries=" in err.value.hint
    needed = int(str(err.value).split("needs ")[1].split()[0])
    assert needed > 4
    np.testing.assert_allclose(np.asarray(fwd(needed)(*args)), ref.rasterize(rec, W, H, BG),
                               atol=2e-5)
    with pytest.raises(TileEntriesOverflowError):
        rlx.compile(lambda r, g: rlx.splat.rasterize_vjp(r, g, width=W, height=H,
                                                         tile_entries=needed - 1),
                    rec, g_img, target="webgpu")(rec, g_img)


@pytest.mark.slow
def test_webgpu_default_tile_list_overflow_on_huge_gaussians() -> None:
    """The default list (2^16 entries here) and 300 Gaussians each covering all 256 tiles of a
    256x256 image: 76,800 entries needed, a typed error, not a NaN image."""
    from rlx_core.splat.errors import TileEntriesOverflowError

    if not get_target("webgpu").available()[0]:
        pytest.skip(f"webgpu: {get_target('webgpu').available()[1]}")
    g = scene.random_gaussians(300, 1, seed=1, extent=0.3, scale=2.0)
    args = (g.means, g.quats, g.scales, g.opacities, g.sh, scene.orbit(20.0, 10.0, 3.0),
            scene.intrinsics(256, 256))
    exe = rlx.compile(lambda *a: rlx.splat.render(*a, width=256, height=256), *args,
                      target="webgpu")
    with pytest.raises(TileEntriesOverflowError, match="needs 76800 .* holds 65536"):
        exe(*args)


def test_cpu_rasterizer_shares_tiles_over_the_team() -> None:
    """On 2 threads the rasterizer and its VJP run in the team (tiles shared out): the image is
    bit for bit the 1-thread one, the gradients agree to rounding (other summation order) and
    repeat bit for bit."""
    from rlx_core.targets.cpu.runtime import load_library
    from rlx_core.targets.cpu.threads import num_threads, set_num_threads
    from tests.targets.test_cpu_host_overhead import _regions

    if not get_target("cpu").available()[0]:
        pytest.skip(f"cpu: {get_target('cpu').available()[1]}")
    w = h = 64
    g = scene.random_gaussians(600, 3, seed=3, extent=0.8, scale=0.08)
    args = (*g.arrays(), scene.orbit(30.0, 20.0, 3.0), scene.intrinsics(w, h))
    gimg = np.random.default_rng(4).normal(size=(h, w, 3)).astype(np.float32)
    vg = rlx.value_and_grad(lambda *a: (rlx.splat.render(*a[:7], width=w, height=h) * a[7])
                            .sum(), argnums=(0, 1, 2, 3, 4))
    fwd = rlx.jit(lambda *a: rlx.splat.render(*a, width=w, height=h), target="cpu")
    both = rlx.jit(lambda *a: (lambda v, gr: (v, *gr))(*vg(*a)), target="cpu")

    def reset(fn) -> None:  # the next call is a team call, however loaded the machine
        (spec,) = fn.cache.specializations
        getattr(load_library(fn.cache.module_path), f"{spec.program.prefix}_team_reset")()

    before = num_threads()
    try:
        set_num_threads(1)
        img1, grads1 = np.asarray(fwd(*args)), [np.asarray(x) for x in both(*args, gimg)]
        set_num_threads(2)
        runs = []
        for _ in range(2):
            reset(fwd)
            reset(both)
            runs.append((np.asarray(fwd(*args)), [np.asarray(x) for x in both(*args, gimg)]))
    finally:
        set_num_threads(before)
    assert _regions(fwd) == 2 and _regions(both) == 2
    np.testing.assert_allclose(img1, ref.rasterize(ref.project(*args, w, h), w, h), atol=2e-5)
    for img2, grads2 in runs:
        np.testing.assert_array_equal(img2, img1)
        for a, b, c in zip(grads2, grads1, runs[0][1], strict=True):
            np.testing.assert_array_equal(a, c)
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * np.abs(b).max())

"""The numpy oracle of rlx.splat: its backward against finite differences, its forward and
backward against an independent PyTorch version (autograd), and against gsplat's pure-PyTorch
projection, SH and tile intersection where those run on a CPU."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_core.splat import layout as L
from rlx_core.splat import reference as ref
from rlx_core.splat import scene
from tests.splat.conftest import H, W

F = np.float64


def _f64(g: scene.Gaussians) -> list[np.ndarray]:
    return [a.astype(F) for a in g.arrays()]


def _fd(fn, args: list[np.ndarray], which: int, eps: float = 1e-6) -> np.ndarray:
    a = args[which]
    out = np.zeros(a.size)
    for j in range(a.size):
        hi = [x.copy() for x in args]
        lo = [x.copy() for x in args]
        hi[which].reshape(-1)[j] += eps
        lo[which].reshape(-1)[j] -= eps
        out[j] = (fn(hi) - fn(lo)) / (2 * eps)
    return out.reshape(len(a), -1)


def test_project_vjp_matches_finite_differences(gauss, cam) -> None:
    view, K = cam
    args = _f64(gauss)
    proj = ref.project(*args, view, K, W, H, dtype=F)
    assert (proj[:, L.RADIUS] > 0).all()
    g = np.random.default_rng(0).normal(size=proj.shape)
    an = ref.project_vjp(*args, view, K, g, W, H, dtype=F)

    def loss(a):
        return float(np.sum(g * ref.project(*a, view, K, W, H, dtype=F)))

    num = np.concatenate([_fd(loss, args, i) for i in range(5)], axis=1)
    np.testing.assert_allclose(an, num, atol=1e-6 * np.abs(an).max())


def test_rasterize_vjp_matches_finite_differences(gauss, cam) -> None:
    view, K = cam
    proj = ref.project(*_f64(gauss), view, K, W, H, dtype=F)
    gi = np.random.default_rng(1).normal(size=(H, W, 3))
    bg = (0.1, 0.2, 0.3)
    an = ref.rasterize_vjp(proj, gi, W, H, bg, dtype=F)

    def loss(a):
        return float(np.sum(gi * ref.rasterize(a[0], W, H, bg, dtype=F)))

    num = _fd(loss, [proj], 0)
    num[:, [L.DEPTH, L.RADIUS]] = 0  # they only order and bin: piecewise constant
    np.testing.assert_allclose(an, num, atol=1e-6 * np.abs(an).max())


def test_culling_behind_camera_degenerate_and_offscreen(cam) -> None:
    view, K = cam
    g = scene.random_gaussians(6, 1, seed=3, extent=0.3)
    means = g.means.copy()
    campos = -view[:3, :3].T @ view[:3, 3]
    means[0] = campos - 2 * (means[1] - campos)  # behind the camera
    means[1] = campos  # at the camera centre (z = 0)
    means[2] = means[3] + 100 * view[0, :3]  # far to the right, off screen
    scales = g.scales.copy()
    scales[3] = 0  # a degenerate (flat) Gaussian still renders as the EWA low-pass
    rec = ref.project(means, g.quats, scales, g.opacities, g.sh, view, K, W, H)
    assert (rec[:3] == 0).all()
    assert rec[3, L.RADIUS] > 0 and np.isfinite(rec).all()
    grads = ref.project_vjp(means, g.quats, scales, g.opacities, g.sh, view, K,
                            np.ones_like(rec), W, H)
    assert (grads[:3] == 0).all() and np.isfinite(grads).all()


def test_zero_opacity_adds_nothing(gauss, cam) -> None:
    view, K = cam
    args = _f64(gauss)
    proj = ref.project(*args, view, K, W, H, dtype=F)
    img = ref.rasterize(proj, W, H, dtype=F)
    ghost = proj.copy()
    ghost[:, L.OPACITY] = 0
    bg = (0.25, 0.5, 0.75)
    np.testing.assert_array_equal(ref.rasterize(ghost, W, H, bg, dtype=F),
                                  np.broadcast_to(bg, img.shape))
    g = ref.rasterize_vjp(ghost, np.ones((H, W, 3)), W, H, bg, dtype=F)
    assert (g[:, [L.U, L.V, L.RED]] == 0).all()


def test_early_termination_stops_at_t_min() -> None:
    rec = np.zeros((5, L.PROJ_COLS))
    rec[:, L.U], rec[:, L.V] = 8.5, 8.5  # on pixel (8, 8)'s centre: alpha = opacity there
    rec[:, L.CONIC_A], rec[:, L.CONIC_C] = 0.01, 0.01
    rec[:, L.DEPTH] = np.arange(5)[::-1] + 1.0  # the last one is in front
    rec[:, L.RADIUS], rec[:, L.OPACITY] = 4, 0.95
    rec[:, L.RED:] = [[1, 1, 1], [1, 1, 1], [0, 0, 1], [0, 1, 0], [1, 0, 0]]
    img = ref.rasterize(rec, 16, 16, (1.0, 1.0, 1.0), dtype=F)
    # T: 1 -> 0.05 -> 0.0025 -> 1.25e-4; a fourth would take it to 6.25e-6 <= T_MIN: stop
    np.testing.assert_allclose(img[8, 8], np.array([0.95, 0.0475, 0.002375]) + 1.25e-4)


torch = pytest.importorskip("torch")


def test_torch_peer_agrees_forward_and_backward(gauss, cam) -> None:
    from benchmarks import splat_torch as ts

    view, K = cam
    args = _f64(gauss)
    bg = (0.1, 0.2, 0.3)
    tt = ts.tensors(args, torch.float64)
    v, k = (torch.tensor(x, dtype=torch.float64) for x in (view, K))
    rec = ts.project(*tt, v, k, W, H)
    np.testing.assert_allclose(rec.detach().numpy(), ref.project(*args, view, K, W, H, dtype=F),
                               rtol=1e-10, atol=1e-10)
    img = ts.rasterize(rec, W, H, bg)
    want = ref.rasterize(rec.detach().numpy(), W, H, bg, dtype=F)
    np.testing.assert_allclose(img.detach().numpy(), want, atol=1e-10)
    gi = np.random.default_rng(2).normal(size=(H, W, 3))
    (img * torch.tensor(gi)).sum().backward()
    proj = ref.project(*args, view, K, W, H, dtype=F)
    g_rec = ref.rasterize_vjp(proj, gi, W, H, bg, dtype=F)
    grads = ref.project_vjp(*args, view, K, g_rec, W, H, dtype=F)
    o = L.grad_cols(args[4].shape[1])
    for i, t in enumerate(tt):
        got = t.grad.numpy().reshape(len(t), -1)
        np.testing.assert_allclose(grads[:, o[i]:o[i + 1]], got, atol=1e-9, rtol=1e-7)


def test_gsplat_projection_sh_and_tiles_agree(gauss, cam) -> None:
    gs = pytest.importorskip("gsplat.cuda._torch_impl", reason="gsplat is not installed")
    view, K = cam
    args = _f64(gauss)
    means, quats, scales, opac, sh = (torch.tensor(a) for a in args)
    v, k = torch.tensor(view, dtype=torch.float64), torch.tensor(K, dtype=torch.float64)
    covars, _ = gs._quat_scale_to_covar_preci(quats, scales, compute_preci=False)
    radii, means2d, depths, conics, _ = gs._fully_fused_projection(
        means, covars, v[None], k[None], W, H)
    proj = ref.project(*args, view, K, W, H, dtype=F)
    # every Gaussian lies inside gsplat's frustum clamp (1.3 x the field of view), where the
    # two projections are the same equations
    np.testing.assert_allclose(means2d[0].numpy(), proj[:, [L.U, L.V]], rtol=1e-12)
    np.testing.assert_allclose(depths[0].numpy(), proj[:, L.DEPTH], rtol=1e-12)
    np.testing.assert_allclose(conics[0].numpy(), proj[:, L.CONIC_A:L.CONIC_C + 1], rtol=1e-10)
    campos = -view[:3, :3].T.astype(F) @ view[:3, 3]
    cols = gs._spherical_harmonics(3, means - torch.tensor(campos), sh)
    np.testing.assert_allclose(np.maximum(cols.numpy() + 0.5, 0), proj[:, L.RED:L.BLUE + 1],
                               rtol=1e-10, atol=1e-12)
    # gsplat's box is per axis (3.33 sigma); given our radius on both axes, its intersection
    # and sort (tile, then depth bits) give our per-tile lists
    r = torch.tensor(np.stack([proj[:, L.RADIUS]] * 2, 1))
    tw, th = -(-W // L.TILE), -(-H // L.TILE)
    _, isect, flat = gs._isect_tiles(torch.tensor(proj[:, :2])[None], r[None],
                                     torch.tensor(proj[:, L.DEPTH], dtype=torch.float32)[None],
                                     L.TILE, tw, th)
    tiles = (isect >> 32).numpy()
    lists = ref.tile_lists(proj, W, H)
    assert sum(len(x) for x in lists.values()) == len(tiles)
    for (ty, tx), ids in lists.items():
        np.testing.assert_array_equal(flat.numpy()[tiles == ty * tw + tx], ids)

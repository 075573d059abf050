"""The numpy oracle of 3D Gaussian splatting, written from the 3DGS paper (Kerbl et al. 2023)
and its EWA splatting (Zwicker et al. 2002), forward and backward, in float64.

Projection, per Gaussian (mean p, quaternion q = (w, x, y, z), scales s, SH coefficients)::

    p_c = R p + t                          camera space (viewmat = [R t; 0 1], world -> camera)
    cull when z <= NEAR
    Sigma = (Rq S)(Rq S)^T                 Rq = rotation of q / |q|, S = diag(s)
    J = [[fx/z, 0, -fx x/z^2], [0, fy/z, -fy y/z^2]]      the perspective's Jacobian at p_c
    Sigma2 = J R Sigma R^T J^T + EPS2D I   (a, b; b, c)
    conic = (c, -b, a) / (a c - b^2)       the inverse 2-D covariance; cull when det <= 0
    radius = ceil(3 sqrt(lambda_max))      lambda_max = mid + sqrt(max(0.1, mid^2 - det))
    (u, v) = (fx x / z + cx, fy y / z + cy); cull when the 3-sigma box misses the image
    colour = max(sum_k Y_k(dir) sh_k + 0.5, 0),   dir = (p - campos) / |p - campos|

A culled Gaussian's record is all zeros (radius 0). Rasterization: the image is cut into
16 x 16 tiles; a Gaussian joins every tile its box ``[u - r, u + r] x [v - r, v + r]`` touches
(``floor((u - r) / 16)`` to ``ceil((u + r) / 16)``, exclusive); each tile's list is sorted by
depth (ties by index). Each pixel (centre ``(x + 0.5, y + 0.5)``) composites its tile's list
front to back::

    sigma = 0.5 (A dx^2 + C dy^2) + B dx dy        (dx, dy) = (u, v) - pixel; skip sigma < 0
    alpha = min(ALPHA_MAX, opacity exp(-sigma));   skip alpha < ALPHA_MIN
    if T (1 - alpha) <= T_MIN: stop (this Gaussian is not added)
    C += alpha T colour;  T *= 1 - alpha
    C += T background

The backward is the closed form of these sums (not the kernels' back-to-front recursion), so
it checks them independently; tests check it by finite differences.
"""

from __future__ import annotations

import numpy as np

from rlx_core.splat import layout as L
from rlx_core.splat import sh as shm

F = np.float64


def _quat_rot(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], 1)


def _quat_rot_vjp(q: np.ndarray, g: np.ndarray) -> np.ndarray:
    """d loss / d q (unit q) from d loss / d R (N, 3, 3)."""
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    d = g
    gw = 2 * (-z * d[:, 0, 1] + y * d[:, 0, 2] + z * d[:, 1, 0] - x * d[:, 1, 2]
              - y * d[:, 2, 0] + x * d[:, 2, 1])
    gx = 2 * (y * d[:, 0, 1] + z * d[:, 0, 2] + y * d[:, 1, 0] - 2 * x * d[:, 1, 1]
              - w * d[:, 1, 2] + z * d[:, 2, 0] + w * d[:, 2, 1] - 2 * x * d[:, 2, 2])
    gy = 2 * (-2 * y * d[:, 0, 0] + x * d[:, 0, 1] + w * d[:, 0, 2] + x * d[:, 1, 0]
              + z * d[:, 1, 2] - w * d[:, 2, 0] + z * d[:, 2, 1] - 2 * y * d[:, 2, 2])
    gz = 2 * (-2 * z * d[:, 0, 0] - w * d[:, 0, 1] + x * d[:, 0, 2] + w * d[:, 1, 0]
              - 2 * z * d[:, 1, 1] + y * d[:, 1, 2] + x * d[:, 2, 0] + y * d[:, 2, 1])
    return np.stack([gw, gx, gy, gz], 1)


class _Proj:
    """The forward's intermediates, kept for the backward."""

    def __init__(self, means, quats, scales, opac, sh, view, intr, width, height):
        self.means, self.scales, self.sh = F(means), F(scales), F(sh)
        self.opac = F(opac)
        view, intr = F(view), F(intr)
        self.R, t = view[:3, :3], view[:3, 3]
        self.fx, self.fy, self.cx, self.cy = intr[0, 0], intr[1, 1], intr[0, 2], intr[1, 2]
        self.pc = self.means @ self.R.T + t
        x, y, z = self.pc.T
        self.qnorm = np.linalg.norm(F(quats), axis=1)
        self.qn = F(quats) / np.where(self.qnorm > 0, self.qnorm, 1)[:, None]
        self.Rq = _quat_rot(self.qn)
        self.M = self.Rq * self.scales[:, None, :]
        sig = self.M @ self.M.transpose(0, 2, 1)
        self.Sc = self.R @ sig @ self.R.T
        front = z > L.NEAR
        zs = np.where(front, z, 1.0)
        J = np.zeros((len(z), 2, 3))
        J[:, 0, 0] = self.fx / zs
        J[:, 0, 2] = -self.fx * x / zs**2
        J[:, 1, 1] = self.fy / zs
        J[:, 1, 2] = -self.fy * y / zs**2
        self.J, self.zs = J, zs
        s2 = J @ self.Sc @ J.transpose(0, 2, 1)
        a, b, c = s2[:, 0, 0] + L.EPS2D, s2[:, 0, 1], s2[:, 1, 1] + L.EPS2D
        det = a * c - b * b
        dsafe = np.where(det > 0, det, 1.0)
        self.conic = np.stack([c / dsafe, -b / dsafe, a / dsafe], 1)
        mid = 0.5 * (a + c)
        lam = mid + np.sqrt(np.maximum(0.1, mid * mid - det))
        radius = np.ceil(3 * np.sqrt(lam))
        u = self.fx * x / zs + self.cx
        v = self.fy * y / zs + self.cy
        onscreen = (u + radius > 0) & (u - radius < width) & (v + radius > 0) & (v - radius < height)
        self.valid = front & (det > 0) & (radius > 0) & onscreen
        self.u, self.v, self.radius = u, v, radius
        campos = -self.R.T @ t
        dirs = self.means - campos
        self.dlen = np.linalg.norm(dirs, axis=1)
        self.dn = dirs / np.where(self.dlen > 0, self.dlen, 1)[:, None]
        self.k = sh.shape[1]
        self.basis = shm.basis(self.dn, self.k)
        self.col_raw = np.einsum("nk,nkc->nc", self.basis, self.sh) + 0.5

    def record(self) -> np.ndarray:
        out = np.zeros((len(self.u), L.PROJ_COLS))
        out[:, L.U], out[:, L.V] = self.u, self.v
        out[:, L.CONIC_A:L.CONIC_C + 1] = self.conic
        out[:, L.DEPTH], out[:, L.RADIUS] = self.pc[:, 2], self.radius
        out[:, L.OPACITY] = self.opac
        out[:, L.RED:L.BLUE + 1] = np.maximum(self.col_raw, 0)
        out[~self.valid] = 0
        return out


def project(means, quats, scales, opacities, sh, viewmat, intrinsics, width: int,
            height: int, dtype: type = np.float32) -> np.ndarray:
    """The f32[N, 11] record of every Gaussian (layout.PROJ_NAMES), zeros where culled."""
    p = _Proj(means, quats, scales, opacities, sh, viewmat, intrinsics, width, height)
    return p.record().astype(dtype)


def project_vjp(means, quats, scales, opacities, sh, viewmat, intrinsics, g, width: int,
                height: int, dtype: type = np.float32) -> np.ndarray:
    """Gradients of sum(g * project(...)) for means, quats, scales, opacities and sh, side by
    side (layout.grad_cols); viewmat and intrinsics get none."""
    p = _Proj(means, quats, scales, opacities, sh, viewmat, intrinsics, width, height)
    g = F(g) * p.valid[:, None]
    n, k = len(p.u), p.k
    x, y, z = p.pc.T
    zs, fx, fy = p.zs, p.fx, p.fy
    # colour: max(B sh + 0.5, 0)
    gcol = g[:, L.RED:L.BLUE + 1] * (p.col_raw > 0)
    g_sh = p.basis[:, :, None] * gcol[:, None, :]
    g_dn = np.einsum("nc,nkc,nkd->nd", gcol, p.sh, shm.basis_grad(p.dn, k))
    g_dn -= p.dn * np.sum(p.dn * g_dn, axis=1, keepdims=True)
    g_means = g_dn / np.where(p.dlen > 0, p.dlen, 1)[:, None]
    # conic = inverse of Sigma2: dSigma2 = -Inv G Inv, the off-diagonal cotangent split in two
    A, B, C = p.conic.T
    inv = np.stack([np.stack([A, B], -1), np.stack([B, C], -1)], 1)
    G = np.stack([np.stack([g[:, L.CONIC_A], 0.5 * g[:, L.CONIC_B]], -1),
                  np.stack([0.5 * g[:, L.CONIC_B], g[:, L.CONIC_C]], -1)], 1)
    gs2 = -inv @ G @ inv
    J = p.J
    gsc = J.transpose(0, 2, 1) @ gs2 @ J
    gJ = 2 * gs2 @ J @ p.Sc
    gsig = p.R.T @ gsc @ p.R
    gM = 2 * gsig @ p.M
    g_scales = np.sum(gM * p.Rq, axis=1)
    g_qn = _quat_rot_vjp(p.qn, gM * p.scales[:, None, :])
    g_quats = (g_qn - p.qn * np.sum(p.qn * g_qn, 1, keepdims=True)) / np.where(
        p.qnorm > 0, p.qnorm, 1)[:, None]
    gu, gv = g[:, L.U], g[:, L.V]
    gx = fx / zs * gu - fx / zs**2 * gJ[:, 0, 2]
    gy = fy / zs * gv - fy / zs**2 * gJ[:, 1, 2]
    gz = (-fx * x / zs**2 * gu - fy * y / zs**2 * gv + g[:, L.DEPTH]
          - fx / zs**2 * gJ[:, 0, 0] + 2 * fx * x / zs**3 * gJ[:, 0, 2]
          - fy / zs**2 * gJ[:, 1, 1] + 2 * fy * y / zs**3 * gJ[:, 1, 2])
    g_means += np.stack([gx, gy, gz], 1) @ p.R
    o = L.grad_cols(k)
    out = np.zeros((n, o[5]))
    out[:, o[0]:o[1]], out[:, o[1]:o[2]], out[:, o[2]:o[3]] = g_means, g_quats, g_scales
    out[:, o[3]] = g[:, L.OPACITY]
    out[:, o[4]:o[5]] = g_sh.reshape(n, 3 * k)
    out[~p.valid] = 0
    return out.astype(dtype)


# ---- rasterization --------------------------------------------------------------------------


def tile_lists(proj: np.ndarray, width: int, height: int) -> dict[tuple[int, int], np.ndarray]:
    """Every non-empty tile's Gaussians, sorted by depth (ties by index)."""
    proj = F(proj)
    tw, th = -(-width // L.TILE), -(-height // L.TILE)
    u, v, r, depth = proj[:, L.U], proj[:, L.V], proj[:, L.RADIUS], proj[:, L.DEPTH]
    x0 = np.clip(np.floor((u - r) / L.TILE), 0, tw).astype(int)
    x1 = np.clip(np.ceil((u + r) / L.TILE), 0, tw).astype(int)
    y0 = np.clip(np.floor((v - r) / L.TILE), 0, th).astype(int)
    y1 = np.clip(np.ceil((v + r) / L.TILE), 0, th).astype(int)
    order = np.argsort(depth, kind="stable")
    lists: dict[tuple[int, int], list[int]] = {}
    for i in order:
        if r[i] <= 0:
            continue
        for ty in range(y0[i], y1[i]):
            for tx in range(x0[i], x1[i]):
                lists.setdefault((ty, tx), []).append(int(i))
    return {k: np.array(v, dtype=np.int64) for k, v in lists.items()}


def _tile_pass(proj: np.ndarray, ids: np.ndarray, ty: int, tx: int, width: int, height: int):
    """One tile's compositing: pixel coordinates, alpha, and which (pixel, Gaussian) pairs
    contribute, with the transmittance before each."""
    ys = np.arange(ty * L.TILE, min((ty + 1) * L.TILE, height))
    xs = np.arange(tx * L.TILE, min((tx + 1) * L.TILE, width))
    py, px = np.meshgrid(ys, xs, indexing="ij")
    py, px = py.reshape(-1), px.reshape(-1)
    g = proj[ids]
    dx = g[None, :, L.U] - (px[:, None] + 0.5)
    dy = g[None, :, L.V] - (py[:, None] + 0.5)
    A, B, C = g[None, :, L.CONIC_A], g[None, :, L.CONIC_B], g[None, :, L.CONIC_C]
    sigma = 0.5 * (A * dx * dx + C * dy * dy) + B * dx * dy
    raw = g[None, :, L.OPACITY] * np.exp(-sigma)
    alpha = np.minimum(L.ALPHA_MAX, raw)
    live = (sigma >= 0) & (alpha >= L.ALPHA_MIN)
    npx, n = len(px), len(ids)
    contrib = np.zeros((npx, n), bool)
    t_before = np.zeros((npx, n))
    T = np.ones(npx)
    done = np.zeros(npx, bool)
    for j in range(n):
        take = live[:, j] & ~done
        nxt = T * (1 - alpha[:, j])
        stop = take & (nxt <= L.T_MIN)
        done |= stop
        take &= ~stop
        contrib[:, j] = take
        t_before[:, j] = T
        T = np.where(take, nxt, T)
    return py, px, dx, dy, sigma, raw, alpha, contrib, t_before, T


def rasterize(proj: np.ndarray, width: int, height: int,
              background: tuple[float, float, float] = (0.0, 0.0, 0.0),
              dtype: type = np.float32) -> np.ndarray:
    """The f32[height, width, 3] image of ``proj`` records (see the module docstring)."""
    proj = F(proj)
    bg = F(background)
    img = np.zeros((height, width, 3)) + bg
    for (ty, tx), ids in tile_lists(proj, width, height).items():
        py, px, *_, alpha, contrib, t_before, T = _tile_pass(proj, ids, ty, tx, width, height)
        w = alpha * t_before * contrib
        img[py, px] = w @ proj[ids][:, L.RED:L.BLUE + 1] + T[:, None] * bg
    return img.astype(dtype)


def rasterize_vjp(proj: np.ndarray, g_img: np.ndarray, width: int, height: int,
                  background: tuple[float, float, float] = (0.0, 0.0, 0.0),
                  dtype: type = np.float32) -> np.ndarray:
    """Gradient of sum(g_img * rasterize(proj)) with respect to ``proj`` (f32[N, 11]); the
    depth and radius columns get zero (they only order and bin)."""
    proj, g_img, bg = F(proj), F(g_img), F(background)
    out = np.zeros_like(proj)
    for (ty, tx), ids in tile_lists(proj, width, height).items():
        py, px, dx, dy, sigma, raw, alpha, contrib, t_before, T = _tile_pass(
            proj, ids, ty, tx, width, height)
        gp = g_img[py, px]  # (P, 3)
        col = proj[ids][:, L.RED:L.BLUE + 1]  # (n, 3)
        w = alpha * t_before * contrib  # (P, n)
        out_col = w.T @ gp
        # S_j: what lies behind j, sum_{i > j} w_i c_i + T_final bg (a reverse cumulative sum)
        wc = w[:, :, None] * col[None]
        behind = np.cumsum(wc[:, ::-1], axis=1)[:, ::-1] - wc + (T[:, None] * bg[None])[:, None]
        g_alpha = np.einsum("pnc,pc->pn", t_before[:, :, None] * col[None]
                            - behind / (1 - alpha)[:, :, None], gp) * contrib
        unclamped = raw < L.ALPHA_MAX
        g_opac = np.where(unclamped, g_alpha * np.exp(-sigma), 0).sum(0)
        g_sig = np.where(unclamped, -g_alpha * alpha, 0)
        A, B, C = (proj[ids][None, :, c] for c in (L.CONIC_A, L.CONIC_B, L.CONIC_C))
        np.add.at(out[:, L.U], ids, (g_sig * (A * dx + B * dy)).sum(0))
        np.add.at(out[:, L.V], ids, (g_sig * (C * dy + B * dx)).sum(0))
        np.add.at(out[:, L.CONIC_A], ids, (g_sig * 0.5 * dx * dx).sum(0))
        np.add.at(out[:, L.CONIC_B], ids, (g_sig * dx * dy).sum(0))
        np.add.at(out[:, L.CONIC_C], ids, (g_sig * 0.5 * dy * dy).sum(0))
        np.add.at(out[:, L.OPACITY], ids, g_opac)
        np.add.at(out[:, L.RED:L.BLUE + 1], ids, out_col)
    return out.astype(dtype)

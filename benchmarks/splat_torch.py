"""A PyTorch (CPU) implementation of rlx.splat's rendering, differentiated by autograd.

The benchmark's peer and a second, independent backward for the tests: the same equations as
rlx_core/splat/reference.py, but compositing is vectorised over each tile's list (an
exclusive cumulative product of 1 - alpha instead of a loop; the early stop is the mask
``T_after > T_MIN``, exact because T only falls), and gradients come from autograd. gsplat's
own pure-PyTorch rasterizer needs its CUDA kernels (rasterize_to_indices_in_range) and
nerfacc, so it cannot run here; its projection and SH functions are compared in the tests.
"""

from __future__ import annotations

import numpy as np
import torch

from rlx_core.splat import layout as L
from rlx_core.splat import sh as shm

TILE_CHUNK = 32  # tiles composited together (padded to the chunk's longest list)


def _basis(d: torch.Tensor, k: int) -> torch.Tensor:
    x, y, z = d[:, 0], d[:, 1], d[:, 2]
    xx, yy, zz = x * x, y * y, z * z
    C2, C3 = shm.C2, shm.C3
    b = [torch.full_like(x, shm.C0), -shm.C1 * y, shm.C1 * z, -shm.C1 * x,
         C2[0] * x * y, C2[1] * y * z, C2[2] * (2 * zz - xx - yy), C2[3] * x * z,
         C2[4] * (xx - yy),
         C3[0] * y * (3 * xx - yy), C3[1] * x * y * z, C3[2] * y * (4 * zz - xx - yy),
         C3[3] * z * (2 * zz - 3 * xx - 3 * yy), C3[4] * x * (4 * zz - xx - yy),
         C3[5] * z * (xx - yy), C3[6] * x * (xx - 3 * yy)]
    return torch.stack(b[:k], 1)


def _quat_rot(q: torch.Tensor) -> torch.Tensor:
    q = q / q.norm(dim=1, keepdim=True)
    w, x, y, z = q.unbind(1)
    return torch.stack([
        torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        torch.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        torch.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], 1)


def project(means, quats, scales, opac, sh, view, K, width: int, height: int) -> torch.Tensor:
    """(N, 11) records as rlx.splat's splat_project (culled rows zero)."""
    R, t = view[:3, :3], view[:3, 3]
    pc = means @ R.T + t
    x, y, z = pc.unbind(1)
    front = z > L.NEAR
    zs = torch.where(front, z, torch.ones_like(z))
    M = _quat_rot(quats) * scales[:, None, :]
    Sc = R @ (M @ M.transpose(1, 2)) @ R.T
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    o = torch.zeros_like(z)
    J = torch.stack([fx / zs, o, -fx * x / zs**2, o, fy / zs, -fy * y / zs**2], 1).reshape(-1, 2, 3)
    s2 = J @ Sc @ J.transpose(1, 2)
    a, b, c = s2[:, 0, 0] + L.EPS2D, s2[:, 0, 1], s2[:, 1, 1] + L.EPS2D
    det = a * c - b * b
    ok = det > 0
    ds = torch.where(ok, det, torch.ones_like(det))
    mid = 0.5 * (a + c)
    radius = torch.ceil(3 * torch.sqrt(mid + torch.sqrt(torch.clamp(mid * mid - det, min=0.1))))
    u, v = fx * x / zs + cx, fy * y / zs + cy
    valid = (front & ok & (radius > 0) & (u + radius > 0) & (u - radius < width)
             & (v + radius > 0) & (v - radius < height))
    campos = -R.T @ t
    d = means - campos
    d = d / d.norm(dim=1, keepdim=True)
    col = torch.clamp((_basis(d, sh.shape[1])[:, :, None] * sh).sum(1) + 0.5, min=0)
    rec = torch.cat([torch.stack([u, v, c / ds, -b / ds, a / ds, z, radius.detach(), opac], 1),
                     col], 1)
    return torch.where(valid[:, None], rec, torch.zeros_like(rec))


def _tiles(rec: torch.Tensor, width: int, height: int):
    """(tile index, sorted Gaussian ids) of every non-empty tile (numpy, no gradient)."""
    r = rec.detach().cpu().numpy().astype(np.float64)
    tw, th = -(-width // L.TILE), -(-height // L.TILE)
    u, v, rad = r[:, L.U], r[:, L.V], r[:, L.RADIUS]
    x0 = np.clip(np.floor((u - rad) / L.TILE), 0, tw).astype(np.int64)
    x1 = np.clip(np.ceil((u + rad) / L.TILE), 0, tw).astype(np.int64)
    y0 = np.clip(np.floor((v - rad) / L.TILE), 0, th).astype(np.int64)
    y1 = np.clip(np.ceil((v + rad) / L.TILE), 0, th).astype(np.int64)
    live = np.nonzero(rad > 0)[0]
    nx, ny = (x1 - x0)[live], (y1 - y0)[live]
    count = nx * ny
    gid = np.repeat(live, count)
    k = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    tile = (np.repeat(y0[live], count) + k // np.repeat(nx, count)) * tw + (
        np.repeat(x0[live], count) + k % np.repeat(nx, count))
    order = np.lexsort((gid, r[gid, L.DEPTH], tile))  # tile, then depth, then index
    tile, gid = tile[order], gid[order]
    cuts = np.nonzero(np.diff(tile))[0] + 1
    return [(int(t[0]), g) for t, g in zip(np.split(tile, cuts), np.split(gid, cuts),
                                               strict=True) if len(t)], tw


def rasterize(rec: torch.Tensor, width: int, height: int,
              background=(0.0, 0.0, 0.0)) -> torch.Tensor:
    """(H, W, 3) image of the records, differentiable in every column but depth and radius."""
    lists, tw = _tiles(rec, width, height)
    bg = torch.tensor(background, dtype=rec.dtype)
    tiles_y = -(-height // L.TILE)
    img = torch.zeros(tiles_y * L.TILE, tw * L.TILE, 3, dtype=rec.dtype) + bg
    iy, ix = torch.meshgrid(torch.arange(L.TILE), torch.arange(L.TILE), indexing="ij")
    iy, ix = iy.reshape(-1).to(rec.dtype), ix.reshape(-1).to(rec.dtype)
    rows = []
    for s in range(0, len(lists), TILE_CHUNK):
        chunk = lists[s:s + TILE_CHUNK]
        n = max(len(g) for _, g in chunk)
        ids = np.zeros((len(chunk), n), np.int64)
        pad = np.ones((len(chunk), n), bool)
        for i, (_, g) in enumerate(chunk):
            ids[i, :len(g)], pad[i, :len(g)] = g, False
        ids_t, pad_t = torch.from_numpy(ids), torch.from_numpy(pad)
        tiles = torch.tensor([t for t, _ in chunk])
        px = ((tiles % tw) * L.TILE)[:, None].to(rec.dtype) + ix[None] + 0.5  # (C, 256)
        py = ((tiles // tw) * L.TILE)[:, None].to(rec.dtype) + iy[None] + 0.5
        g = rec[ids_t]  # (C, n, 11)
        dx = g[:, None, :, L.U] - px[:, :, None]
        dy = g[:, None, :, L.V] - py[:, :, None]
        sig = (0.5 * (g[:, None, :, L.CONIC_A] * dx * dx + g[:, None, :, L.CONIC_C] * dy * dy)
               + g[:, None, :, L.CONIC_B] * dx * dy)
        alpha = torch.clamp(g[:, None, :, L.OPACITY] * torch.exp(-sig), max=L.ALPHA_MAX)
        live = (sig >= 0) & (alpha >= L.ALPHA_MIN) & ~pad_t[:, None, :]
        a = torch.where(live, alpha, torch.zeros_like(alpha))
        t_after = torch.cumprod(1 - a, dim=2)
        take = live & (t_after > L.T_MIN)
        a = torch.where(take, alpha, torch.zeros_like(alpha))
        t_after = torch.cumprod(1 - a, dim=2)
        t_before = torch.cat([torch.ones_like(t_after[..., :1]), t_after[..., :-1]], 2)
        w = a * t_before
        col = torch.einsum("cpn,cnk->cpk", w, g[..., L.RED:L.BLUE + 1]) + t_after[..., -1:] * bg
        rows.append((tiles, col))
    for tiles, col in rows:
        for i, t in enumerate(tiles.tolist()):
            y, x = (t // tw) * L.TILE, (t % tw) * L.TILE
            img[y:y + L.TILE, x:x + L.TILE] = col[i].reshape(L.TILE, L.TILE, 3)
    return img[:height, :width]


def render(means, quats, scales, opac, sh, view, K, width, height, background=(0.0, 0.0, 0.0)):
    return rasterize(project(means, quats, scales, opac, sh, view, K, width, height),
                     width, height, background)


def tensors(arrays, dtype=torch.float32, grad: bool = True) -> list[torch.Tensor]:
    return [torch.tensor(np.asarray(a), dtype=dtype, requires_grad=grad) for a in arrays]


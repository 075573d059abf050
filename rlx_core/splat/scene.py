"""Cameras and procedural scenes for splatting tests, the demo notebook and the benchmark."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def look_at(eye: np.ndarray, target: np.ndarray, up: tuple[float, float, float] = (0, 1, 0),
            ) -> np.ndarray:
    """World -> camera 4x4 (OpenCV axes: x right, y down, z forward)."""
    eye, target, up = (np.asarray(a, np.float64) for a in (eye, target, up))
    f = target - eye
    f /= np.linalg.norm(f)
    r = np.cross(f, up)
    r /= np.linalg.norm(r)
    d = np.cross(f, r)
    R = np.stack([r, d, f])
    view = np.eye(4)
    view[:3, :3], view[:3, 3] = R, -R @ eye
    return view.astype(np.float32)


def orbit(azimuth: float, elevation: float, radius: float,
          target: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> np.ndarray:
    """The view matrix of a camera on a sphere around ``target`` (angles in degrees)."""
    a, e = math.radians(azimuth), math.radians(elevation)
    eye = np.array(target) + radius * np.array(
        [math.cos(e) * math.sin(a), -math.sin(e), -math.cos(e) * math.cos(a)])
    return look_at(eye, np.array(target))


def intrinsics(width: int, height: int, fov_deg: float = 50.0) -> np.ndarray:
    """A pinhole camera's 3x3 K with the given horizontal field of view."""
    fx = 0.5 * width / math.tan(math.radians(fov_deg) / 2)
    return np.array([[fx, 0, width / 2], [0, fx, height / 2], [0, 0, 1]], np.float32)


@dataclass
class Gaussians:
    """Splatting parameters, already activated (unit-free scales, opacities in [0, 1])."""

    means: np.ndarray  # (N, 3)
    quats: np.ndarray  # (N, 4), w x y z, any length
    scales: np.ndarray  # (N, 3)
    opacities: np.ndarray  # (N,)
    sh: np.ndarray  # (N, K, 3)

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.means, self.quats, self.scales, self.opacities, self.sh


def random_gaussians(n: int, sh_degree: int = 3, seed: int = 0, extent: float = 1.0,
                     scale: float = 0.08) -> Gaussians:
    """``n`` random Gaussians in a cube of half-size ``extent`` around the origin."""
    rng = np.random.default_rng(seed)
    k = (sh_degree + 1) ** 2
    sh = rng.normal(0, 0.3, (n, k, 3))
    sh[:, 0] = rng.uniform(-1.0, 1.0, (n, 3))
    return Gaussians(rng.uniform(-extent, extent, (n, 3)).astype(np.float32),
                     rng.normal(size=(n, 4)).astype(np.float32),
                     (scale * np.exp(rng.normal(0, 0.4, (n, 3)))).astype(np.float32),
                     rng.uniform(0.2, 0.95, n).astype(np.float32),
                     sh.astype(np.float32))


def procedural_scene(n: int, seed: int = 0) -> Gaussians:
    """A coloured torus knot of ``n`` Gaussians: a structured target for the fitting demo."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 2 * math.pi, n)
    p, q = 2, 3
    r = 0.6 + 0.25 * np.cos(q * t)
    means = np.stack([r * np.cos(p * t), 0.25 * np.sin(q * t) * 1.4, r * np.sin(p * t)], 1)
    means += rng.normal(0, 0.04, means.shape)
    hue = t / (2 * math.pi)
    rgb = np.stack([0.5 + 0.5 * np.cos(2 * math.pi * (hue + o)) for o in (0, 1 / 3, 2 / 3)], 1)
    sh = np.zeros((n, 16, 3))
    sh[:, 0] = (rgb - 0.5) / 0.28209479177387814
    sh[:, 1:4] = rng.normal(0, 0.1, (n, 3, 3))
    return Gaussians(means.astype(np.float32), rng.normal(size=(n, 4)).astype(np.float32),
                     (0.035 * np.exp(rng.normal(0, 0.3, (n, 3)))).astype(np.float32),
                     rng.uniform(0.6, 0.95, n).astype(np.float32), sh.astype(np.float32))

"""Cameras and procedural scenes for splatting tests, the demo notebooks and the benchmark.

The cameras and the torus knot also come as plain Python lists (``*_values``): the JupyterLite
demo (binder/lite/content/rlx-splat-demo.ipynb) builds its scene in Pyodide, where there is no
numpy; numpy is imported only by the functions that return arrays.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

Vec3 = Sequence[float]
SH_C0 = 0.28209479177387814  # the degree-0 SH basis constant: colour = SH_C0 * sh0 + 0.5


def _unit(v: Vec3) -> list[float]:
    n = math.sqrt(sum(c * c for c in v))
    return [c / n for c in v]


def _cross(a: Vec3, b: Vec3) -> list[float]:
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def look_at_values(eye: Vec3, target: Vec3, up: Vec3 = (0, 1, 0)) -> list[float]:
    """World -> camera 4x4, row-major, as 16 floats (OpenCV axes: x right, y down, z forward)."""
    f = _unit([t - e for t, e in zip(target, eye, strict=True)])
    r = _unit(_cross(f, up))
    d = _cross(f, r)
    out: list[float] = []
    for row in (r, d, f):
        out += [*row, -sum(a * b for a, b in zip(row, eye, strict=True))]
    return out + [0.0, 0.0, 0.0, 1.0]


def orbit_values(azimuth: float, elevation: float, radius: float,
                 target: Vec3 = (0.0, 0.0, 0.0)) -> list[float]:
    """``orbit`` as 16 floats."""
    a, e = math.radians(azimuth), math.radians(elevation)
    step = (math.cos(e) * math.sin(a), -math.sin(e), -math.cos(e) * math.cos(a))
    return look_at_values([t + radius * s for t, s in zip(target, step, strict=True)], target)


def intrinsics_values(width: int, height: int, fov_deg: float = 50.0) -> list[float]:
    """``intrinsics`` as 9 floats."""
    fx = 0.5 * width / math.tan(math.radians(fov_deg) / 2)
    return [fx, 0.0, width / 2, 0.0, fx, height / 2, 0.0, 0.0, 1.0]


def look_at(eye: Vec3, target: Vec3, up: Vec3 = (0, 1, 0)) -> np.ndarray:
    """World -> camera 4x4 (OpenCV axes: x right, y down, z forward)."""
    import numpy as np

    return np.array(look_at_values(list(map(float, eye)), list(map(float, target)), up),
                    np.float32).reshape(4, 4)


def orbit(azimuth: float, elevation: float, radius: float,
          target: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> np.ndarray:
    """The view matrix of a camera on a sphere around ``target`` (angles in degrees)."""
    import numpy as np

    return np.array(orbit_values(azimuth, elevation, radius, target), np.float32).reshape(4, 4)


def intrinsics(width: int, height: int, fov_deg: float = 50.0) -> np.ndarray:
    """A pinhole camera's 3x3 K with the given horizontal field of view."""
    import numpy as np

    return np.array(intrinsics_values(width, height, fov_deg), np.float32).reshape(3, 3)


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
    import numpy as np

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
    import numpy as np

    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 2 * math.pi, n)
    p, q = 2, 3
    r = 0.6 + 0.25 * np.cos(q * t)
    means = np.stack([r * np.cos(p * t), 0.25 * np.sin(q * t) * 1.4, r * np.sin(p * t)], 1)
    means += rng.normal(0, 0.04, means.shape)
    hue = t / (2 * math.pi)
    rgb = np.stack([0.5 + 0.5 * np.cos(2 * math.pi * (hue + o)) for o in (0, 1 / 3, 2 / 3)], 1)
    sh = np.zeros((n, 16, 3))
    sh[:, 0] = (rgb - 0.5) / SH_C0
    sh[:, 1:4] = rng.normal(0, 0.1, (n, 3, 3))
    return Gaussians(means.astype(np.float32), rng.normal(size=(n, 4)).astype(np.float32),
                     (0.035 * np.exp(rng.normal(0, 0.3, (n, 3)))).astype(np.float32),
                     rng.uniform(0.6, 0.95, n).astype(np.float32), sh.astype(np.float32))


def torus_knot_values(n: int, seed: int = 0) -> list[tuple[tuple[int, ...], list[float]]]:
    """``procedural_scene``'s torus knot drawn with Python's ``random`` (no numpy; not the same
    draws): (shape, flat values) of means, quats, scales, opacities and SH (degree 3)."""
    rng = random.Random(seed)
    means, quats, scales, opac, sh = [], [], [], [], []
    p, q = 2, 3
    for _ in range(n):
        t = rng.uniform(0, 2 * math.pi)
        r = 0.6 + 0.25 * math.cos(q * t)
        means += [r * math.cos(p * t) + rng.gauss(0, 0.04),
                  0.35 * math.sin(q * t) + rng.gauss(0, 0.04),
                  r * math.sin(p * t) + rng.gauss(0, 0.04)]
        quats += [rng.gauss(0, 1) for _ in range(4)]
        scales += [0.035 * math.exp(rng.gauss(0, 0.3)) for _ in range(3)]
        opac.append(rng.uniform(0.6, 0.95))
        hue = t / (2 * math.pi)
        sh += [(0.5 * math.cos(2 * math.pi * (hue + o)) / SH_C0) for o in (0, 1 / 3, 2 / 3)]
        sh += [rng.gauss(0, 0.1) for _ in range(9)] + [0.0] * 36
    return [((n, 3), means), ((n, 4), quats), ((n, 3), scales), ((n,), opac), ((n, 16, 3), sh)]

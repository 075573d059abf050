"""Real spherical harmonics up to degree 3 (3DGS's constants and sign convention), with the
gradient of the basis with respect to the unit direction."""

from __future__ import annotations

import numpy as np

C0 = 0.28209479177387814
C1 = 0.4886025119029199
C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792,
      0.5462742152960396)
C3 = (-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154,
      -0.4570457994644658, 1.445305721320277, -0.5900435899266435)


def basis(d: np.ndarray, k: int) -> np.ndarray:
    """The first ``k`` basis functions at unit directions ``d`` (N, 3): shape (N, k)."""
    x, y, z = d[:, 0], d[:, 1], d[:, 2]
    xx, yy, zz = x * x, y * y, z * z
    one = np.ones_like(x)
    b = [C0 * one,
         -C1 * y, C1 * z, -C1 * x,
         C2[0] * x * y, C2[1] * y * z, C2[2] * (2 * zz - xx - yy), C2[3] * x * z,
         C2[4] * (xx - yy),
         C3[0] * y * (3 * xx - yy), C3[1] * x * y * z, C3[2] * y * (4 * zz - xx - yy),
         C3[3] * z * (2 * zz - 3 * xx - 3 * yy), C3[4] * x * (4 * zz - xx - yy),
         C3[5] * z * (xx - yy), C3[6] * x * (xx - 3 * yy)]
    return np.stack(b[:k], axis=1)


def basis_grad(d: np.ndarray, k: int) -> np.ndarray:
    """d basis_j / d (x, y, z) at ``d`` (N, 3), without the unit-length constraint:
    shape (N, k, 3)."""
    x, y, z = d[:, 0], d[:, 1], d[:, 2]
    xx, yy, zz = x * x, y * y, z * z
    o = np.zeros_like(x)
    c = np.ones_like(x)
    g = [(o, o, o),
         (o, -C1 * c, o), (o, o, C1 * c), (-C1 * c, o, o),
         (C2[0] * y, C2[0] * x, o), (o, C2[1] * z, C2[1] * y),
         (-2 * C2[2] * x, -2 * C2[2] * y, 4 * C2[2] * z), (C2[3] * z, o, C2[3] * x),
         (2 * C2[4] * x, -2 * C2[4] * y, o),
         (6 * C3[0] * x * y, C3[0] * (3 * xx - 3 * yy), o),
         (C3[1] * y * z, C3[1] * x * z, C3[1] * x * y),
         (-2 * C3[2] * x * y, C3[2] * (4 * zz - xx - 3 * yy), 8 * C3[2] * y * z),
         (-6 * C3[3] * x * z, -6 * C3[3] * y * z, C3[3] * (6 * zz - 3 * xx - 3 * yy)),
         (C3[4] * (4 * zz - 3 * xx - yy), -2 * C3[4] * x * y, 8 * C3[4] * x * z),
         (2 * C3[5] * x * z, -2 * C3[5] * y * z, C3[5] * (xx - yy)),
         (C3[6] * (3 * xx - 3 * yy), -6 * C3[6] * x * y, o)]
    return np.stack([np.stack(t, axis=1) for t in g[:k]], axis=1)

"""The packed layouts of the splatting ops' values (standard library only).

An IR node has one result, so ``splat_project`` returns one f32[N, 11] record per Gaussian
and the VJP ops return their gradients side by side in one f32 matrix; ``rlx.splat`` slices
the columns back apart. The constants below are the one place the column order is written.
"""

from __future__ import annotations

# splat_project's record, one row per Gaussian
U, V, CONIC_A, CONIC_B, CONIC_C, DEPTH, RADIUS, OPACITY, RED, GREEN, BLUE = range(11)
PROJ_COLS = 11
PROJ_NAMES = ("u", "v", "conic_a", "conic_b", "conic_c", "depth", "radius", "opacity",
              "r", "g", "b")

TILE = 16  # pixels per tile side (the 3DGS paper's 16 x 16 tiles)
NEAR = 0.01  # Gaussians whose camera-space z is not beyond this are culled (gsplat's default)
EPS2D = 0.3  # added to the 2-D covariance's diagonal (a pixel-sized low-pass, as in 3DGS)
ALPHA_MAX = 0.99  # alpha is clamped to this, so 1 - alpha never vanishes
ALPHA_MIN = 1.0 / 255.0  # a Gaussian adding less than this to a pixel is skipped
T_MIN = 1e-4  # compositing stops before transmittance would fall below this

SH_DEGREES = {1: 0, 4: 1, 9: 2, 16: 3}  # coefficients per channel -> degree


def grad_cols(k: int) -> tuple[int, int, int, int, int, int]:
    """Column offsets of means, quats, scales, opacities, sh and the total width in
    ``splat_project_vjp``'s result, for ``k`` SH coefficients per channel."""
    return 0, 3, 7, 10, 11, 11 + 3 * k

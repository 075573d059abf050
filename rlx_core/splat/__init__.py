"""rlx.splat: 3D Gaussian splatting (projection, tile rasterization, their backward)."""

"""The WebGPU target: kernels rendered to WGSL (the renderer is planned; see caps.py)."""

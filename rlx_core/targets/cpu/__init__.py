"""The CPU target: MIR kernels rendered to C (the renderer is being built; see caps.py)."""

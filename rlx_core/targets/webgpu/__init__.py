"""The WebGPU target: LIR kernels rendered to WGSL, run through wgpu or navigator.gpu."""

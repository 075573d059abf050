"""Target "webgpu-browser": WGSL kernels run on the GPU of the browser tab attached to the kernel."""

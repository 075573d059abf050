"""The metal target: Metal Shading Language kernels, syntax-checked by clang against a shim."""

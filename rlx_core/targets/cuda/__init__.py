"""The cuda target: CUDA C kernels (a dialect of gpu_common), checked by nvcc and ptxas."""

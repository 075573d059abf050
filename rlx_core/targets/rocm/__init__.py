"""The rocm target: HIP kernels (the CUDA dialect's spelling for HIP), checked by hipcc."""

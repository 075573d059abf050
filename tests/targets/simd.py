"""The skip shared by the tests of the cpu's blocked kernels (NCHW8c convs, pooling, depthwise,
Winograd, the arena's in-place convs): the renderer picks them only where the compiler
targets AVX2 + FMA or AVX-512."""

from __future__ import annotations

import pytest

from rlx_core.targets.cpu.toolchain import find_compiler

BLOCKED = "the blocked kernels are picked only where the compiler targets AVX2 + FMA"


def skip_unless_simd(reason: str = BLOCKED) -> None:
    """Skip the calling test (with ``reason``) unless the cpu's compiler targets AVX2 + FMA or
    AVX-512."""
    comp = find_compiler()
    if not (comp.avx2_fma or comp.avx512):
        pytest.skip(reason)

"""The CPU kernels' per-thread scratch buffer (rlx_core/targets/cpu/scratch.py), built alone: it
is 64-byte aligned, kept while a call needs no more, replaced by a larger one when it does, one
buffer per name and per thread, and 0 (the old buffer kept) for a size it cannot hold."""

from __future__ import annotations

import ctypes

from rlx_core.targets.cpu import scratch
from tests.targets.own_sgemm import build_harness

HARNESS = "#include <pthread.h>\n" + scratch.SOURCE + r"""
RLX_SCRATCH(one, float)
RLX_SCRATCH(two, double)
uintptr_t one_at(int64_t n) { return (uintptr_t)one(n); }
uintptr_t two_at(int64_t n) { return (uintptr_t)two(n); }
int64_t one_bytes(void) { return one_cap; }
static void *other_thread(void *out) { *(uintptr_t *)out = (uintptr_t)one(10); return 0; }
uintptr_t one_in_another_thread(void) {
    pthread_t t;
    uintptr_t got = 0;
    if (pthread_create(&t, 0, other_thread, &got) != 0) return 0;
    pthread_join(t, 0);
    return got;
}
"""


def test_scratch_grows_is_kept_and_is_one_per_name_and_thread(tmp_path) -> None:
    lib = build_harness(tmp_path, "native", HARNESS)
    for f in ("one_at", "two_at", "one_in_another_thread"):
        getattr(lib, f).restype = ctypes.c_size_t
    lib.one_bytes.restype = ctypes.c_int64
    lib.one_at.argtypes = lib.two_at.argtypes = [ctypes.c_int64]
    first = lib.one_at(100)
    assert first and first % 64 == 0 and lib.one_bytes() == 400
    assert lib.one_at(50) == first and lib.one_at(100) == first  # kept: no smaller block
    grown = lib.one_at(1 << 20)
    assert grown and grown % 64 == 0 and lib.one_bytes() == 4 << 20
    assert lib.one_at(10) == grown
    other = lib.two_at(100)
    assert other and other not in (first, grown)
    assert lib.one_in_another_thread() not in (0, grown)  # each thread its own buffer
    # bytes past int64 (an allocator's own refusal depends on the machine's overcommit)
    assert lib.one_at(1 << 62) == 0 and lib.one_bytes() == 4 << 20  # refused: the old one kept
    assert lib.one_at(10) == grown

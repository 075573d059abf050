"""One thread's scratch buffer in the CPU kernels' C: grown on demand, kept for the next call.

A kernel that needs a work buffer per call (packed panels, a row of weights, a tile's
transforms) keeps one per thread instead of allocating each time: ``RLX_SCRATCH(name, T)``
defines ``static T *name(int64_t count)``, this thread's buffer of at least ``count`` elements
of ``T``, 64-byte aligned, kept between calls and replaced by a larger one (never shrunk) when a
call needs more. It returns 0 when memory runs out (the old buffer stays), and each kernel then
takes a path without it. Each name is its own buffer: a kernel that calls another one while
its buffer is in use (Winograd's transforms around the GEMMs) keeps a name of its own.

The block is guarded, so every kernel source that uses it prepends ``SOURCE``.
"""

from __future__ import annotations

SOURCE = r"""
#ifndef RLX_SCRATCH_H
#define RLX_SCRATCH_H
#include <stdint.h>
#include <stdlib.h>
/* *buf (holding *cap bytes) replaced by a 64-byte aligned block of at least `bytes` when it is
   smaller; 0 when that cannot be had (the old block kept) */
static inline void *rlx_scratch_grow(void **buf, int64_t *cap, int64_t bytes) {
    if (bytes > *cap) {
        void *p = 0;
        if (posix_memalign(&p, 64, (size_t)bytes) != 0) return 0;
        free(*buf);
        *buf = p;
        *cap = bytes;
    }
    return *buf;
}
/* static T *NAME(int64_t count): this thread's buffer of at least count Ts, kept and grown
   (0 also for a count whose bytes overflow) */
#define RLX_SCRATCH(NAME, T)                                                               \
    static _Thread_local void *NAME##_buf = 0;                                             \
    static _Thread_local int64_t NAME##_cap = 0;                                           \
    static T *NAME(int64_t count) {                                                        \
        if (count > INT64_MAX / (int64_t)sizeof(T)) return 0;                              \
        return (T *)rlx_scratch_grow(&NAME##_buf, &NAME##_cap, count * (int64_t)sizeof(T)); \
    }
#endif
"""

__all__ = ["SOURCE"]

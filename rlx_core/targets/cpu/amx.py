"""AMX tiles on Linux: the one-time permission request, and the C every AMX kernel shares.

Linux keeps the AMX tile data state (XTILEDATA, 8 KB per thread) off until a process asks for
it: ``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``, once per process, before any
thread executes a tile instruction (one that does without it gets SIGILL). The permission is
the process's, so threads started before or after the request may use tiles. Each thread must
still load its own tile configuration (``_tile_loadconfig``): the configuration is per thread.

Two ways in, for two callers:

* ``request()``: Python asks for the permission (ctypes ``syscall``), once per process, and says
  whether tiles may be used; the renderer calls it before it picks an AMX path.
* ``SOURCE``: C for generated code. ``rlx_amx_ready()`` does the same request on its first call
  in a process (so a cached library loaded without rendering is safe) and returns 1 when the
  tiles are usable; ``rlx_amx_tilecfg`` is the 64-byte ``LDTILECFG`` operand (palette 1).
  Kernels that use tiles call ``rlx_amx_ready()`` and fall back to another path on 0.

``RLX_NO_AMX=1`` keeps the tiles off; it is read twice: ``disabled()`` for Python
(``request()`` reports no tiles, so the renderer picks no AMX path; ``0`` or unset: tiles, any
other value RLX-R001, env.env_flag) and ``rlx_amx_disabled()`` in ``SOURCE`` (which cannot
raise: any value but empty and ``0`` is off there, the same answer for every value Python
accepts), which
``rlx_amx_ready()`` checks before it asks Linux, so a kernel built with an AMX path (bf16's,
picked when the program was rendered; int8's, picked when it runs) takes its fallback when
the variable is set in the process that runs it. Both read it once per process (per loaded
program in C); every AMX kernel's fallback can so be tested on an AMX machine.
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass

from rlx_core.targets.cpu import isa
from rlx_core.targets.cpu.env import env_flag

ARCH_GET_XCOMP_PERM = 0x1022
ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18
SYS_ARCH_PRCTL = 158  # x86-64 syscall number


@dataclass(frozen=True)
class AmxStatus:
    """Whether this process may execute tile instructions, and why not when it may not."""

    usable: bool
    why: str = ""


def disabled() -> bool:
    """True when ``RLX_NO_AMX=1`` (tests force the non-AMX paths on an AMX machine); ``0`` or
    unset: False; anything else: ArgumentError (RLX-R001). The C kernels'
    ``rlx_amx_disabled()`` gives the same answer for ``1``, ``0`` and unset."""
    return env_flag("RLX_NO_AMX", False)


@functools.cache
def _request() -> AmxStatus:
    if platform.system() != "Linux" or platform.machine().lower() not in ("x86_64", "amd64"):
        return AmxStatus(False, f"AMX permission is requested on x86-64 Linux only "
                                f"({platform.system()} {platform.machine()})")
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        rc = libc.syscall(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)
    except (OSError, AttributeError) as e:
        return AmxStatus(False, f"arch_prctl could not be called: {e}")
    if rc != 0:
        err = ctypes.get_errno()
        return AmxStatus(False, f"arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) failed: "
                                f"{os.strerror(err)} (errno {err}; a kernel before 5.16, or "
                                f"tiles disabled)")
    return AmxStatus(True)


def request(feature: str = "amx_bf16") -> AmxStatus:
    """Ask Linux for the tile data state (once per process) and say whether ``feature``
    (``amx_bf16`` or ``amx_int8``) can run here: the CPU reports it, the ISA path keeps it
    (``RLX_CPU_ISA``), ``RLX_NO_AMX`` is unset and the kernel granted the permission."""
    if disabled():
        return AmxStatus(False, "disabled by RLX_NO_AMX")
    ext = isa.detect().extensions
    if "amx_tile" not in ext or feature not in ext:
        return AmxStatus(False, f"this ISA path has no {feature} ({isa.detect().describe()})")
    return _request()


# The permission request and the tile configuration layout, for C kernels (guarded, so that
# several sources may include it). GCC and clang define __AMX_TILE__ when -march=native (or
# -mamx-tile) allows tile instructions.
SOURCE = r"""
#ifndef RLX_AMX_H
#define RLX_AMX_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AMX_TILE__) && defined(__linux__) && defined(__x86_64__)
#include <unistd.h>
#include <sys/syscall.h>
#define RLX_AMX_COMPILED 1
/* the 64-byte operand of LDTILECFG, palette 1: bytes per row and rows of each tile */
typedef struct {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((aligned(64))) rlx_amx_tilecfg;
/* 1 when RLX_NO_AMX is set to anything but "" and "0" (amx.disabled()'s answer for 0 and 1;
   no error can be raised here) */
static int rlx_amx_disabled(void) {
    const char *no = getenv("RLX_NO_AMX");
    return no && no[0] && strcmp(no, "0") != 0;
}
/* 1 when this process may run tile instructions: RLX_NO_AMX unset, and Linux granted the
   tile state (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 18, asked once); else 0 */
static int rlx_amx_ready(void) {
    static volatile int state = 0;  /* 0: not asked, 1: granted, -1: off or refused */
    if (state == 0)
        state = !rlx_amx_disabled() && syscall(SYS_arch_prctl, 0x1023, 18) == 0 ? 1 : -1;
    return state == 1;
}
#else
#define RLX_AMX_COMPILED 0
static inline int rlx_amx_ready(void) { return 0; }
#endif
#endif
"""

__all__ = ["SOURCE", "AmxStatus", "disabled", "request"]

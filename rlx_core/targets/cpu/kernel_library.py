"""Kernels built once per compiler and ISA into a cached object that programs link.

The blocked convolution's ``rlx_cb_conv2`` (conv_blocked.py) is ~145 KB of machine code; GCC
spent 15-19 s of CPU compiling it inside every program with a blocked or Winograd convolution
(the content-hash cache only helps the exact same program). Here it is compiled once into
``<cache>/<key>.o`` (cached_build.compile_object: keyed by the library's source, the flags, the
compiler and the host with its ISA path, so ``RLX_CPU_ISA=avx2`` or another ``RLX_CB_*``
define is another object), and each program declares it (``RLX_CB_EXTERN``) and links that
object into its own shared object instead. The function keeps its name and arguments; the
object defines it with hidden visibility, so two loaded programs never share or clash on it.

What it needs from the program's other sources it compiles itself (the prelude, the own
sgemm's macros and scratch, conv.SOURCE): its scratch buffer (``rlx_sgemm_scratch``, one per
thread) is its own, beside the program's. Nothing else is per program: the geometry, the
epilogue and the team's share come as arguments.

On a miss it compiles while the program does (``pending``: a cached_build.ObjectBuild that
build_shared starts before it compiles the program's source with ``-c``, then links both), so a
cold first program costs the longer compile, not the sum; a failure or an interrupt of either
stops the other and leaves nothing in the cache. A damaged object fails its size + sha256
record and is built again (verified_files.lookup); two processes that miss together build it
once: the second finds the lock file held, starts nothing, and at its link waits on the lock and
then finds the object. The specialization cache's modules (runtime/specialization_cache.py) link the
object once per module, started before their units compile. ``RLX_CPU_KERNEL_LIBRARY=0``:
every program compiles the kernel inline (A/B).
"""

from __future__ import annotations

from rlx_core.targets.c_common.prelude import prelude
from rlx_core.targets.cpu import conv, conv_blocked, isa, sgemm
from rlx_core.targets.cpu.cached_build import BuildResult, ObjectBuild, object_build
from rlx_core.targets.cpu.env import env_flag
from rlx_core.targets.cpu.toolchain import Compiler

CONV_BLOCKED = "conv_blocked"  # the library of rlx_cb_conv2
# what a program defines before conv_blocked.SOURCE to link the library instead of compiling
EXTERN_DEFINE = "#define RLX_CB_EXTERN 1\n"
NAMES: tuple[str, ...] = (CONV_BLOCKED,)


def enabled() -> bool:
    """``RLX_CPU_KERNEL_LIBRARY``: ``0`` compiles the kernels into every program (A/B)."""
    return env_flag("RLX_CPU_KERNEL_LIBRARY", True)


def source(name: str) -> str:
    """The C of library ``name``: the program's headers it uses, then the kernel defined with
    hidden visibility (read at each call: a test or benchmark may rewrite conv_blocked.SOURCE)."""
    if name != CONV_BLOCKED:
        raise KeyError(f"no kernel library {name!r} (known: {', '.join(NAMES)})")
    return (prelude() + "#ifdef _OPENMP\n#include <omp.h>\n#endif\n" + isa.blocking().defines()
            + sgemm.defines() + sgemm.SOURCE + conv.SOURCE + "#define RLX_CB_LIBRARY 1\n" + conv_blocked.SOURCE)


def pending(name: str, compiler: Compiler) -> ObjectBuild:
    """Library ``name``'s object, not yet looked up: a program's build (cached_build.build_shared)
    starts its compiler on a miss and compiles the program meanwhile. Under a lock file, so
    concurrent builds of it compile it once (``lib-<name>-<key>.lock``: one per object)."""
    return object_build(source(name), compiler=compiler, lock=f"lib-{name}")


def build(name: str, compiler: Compiler) -> BuildResult:
    """Library ``name``'s object in the cache: found there, or compiled once (under the lock)
    and published with its record."""
    return pending(name, compiler).result()


__all__ = ["CONV_BLOCKED", "EXTERN_DEFINE", "NAMES", "build", "enabled", "pending", "source"]

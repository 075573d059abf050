"""The lowering registry: where each target's capability table lives, and the two route tables
(decompositions for common-IR, rewrite rules for rewritten) the legalizer consults."""

from __future__ import annotations

import importlib
from functools import cache

from rlx_core.dispatch.capabilities import Capabilities
from rlx_core.dispatch.decompositions import DECOMPOSITIONS, Decomposition
from rlx_core.dispatch.rewrites import REWRITES, Rewrite, rewrites_for
from rlx_core.targets.registry import UnknownTargetError

# target name -> module holding its ``CAPS``. A table can exist before the target's renderer
# does; its ``verification`` field then says "planned" (DESIGN.md section 6).
CAPS_TABLES: dict[str, str] = {
    "numpy": "rlx_core.targets.numpy_ref.caps",
    "cpu": "rlx_core.targets.cpu.caps",
    "webgpu": "rlx_core.targets.webgpu.caps",
    "opencl": "rlx_core.targets.opencl.caps",
    "opengl": "rlx_core.targets.opengl.caps",
    "vulkan": "rlx_core.targets.vulkan.caps",
    "directx": "rlx_core.targets.directx.caps",
    "tpu": "rlx_core.targets.tpu.caps",
    "hexagon": "rlx_core.targets.hexagon.caps",
    "cuda": "rlx_core.targets.cuda.caps",
    "rocm": "rlx_core.targets.rocm.caps",
    "metal": "rlx_core.targets.metal.caps",
}


@cache
def caps_for(name: str) -> Capabilities:
    """The capability table of target ``name`` (no target object or toolchain needed)."""
    if name not in CAPS_TABLES:
        raise UnknownTargetError(f"no capability table for target {name!r}",
                                 hint=f"choose one of: {', '.join(CAPS_TABLES)}")
    return importlib.import_module(CAPS_TABLES[name]).CAPS


def caps_names() -> tuple[str, ...]:
    return tuple(CAPS_TABLES)


def decomposition_for(op: str) -> Decomposition | None:
    return DECOMPOSITIONS.get(op)


__all__ = ["CAPS_TABLES", "caps_for", "caps_names", "decomposition_for", "rewrites_for",
           "REWRITES", "Rewrite", "DECOMPOSITIONS"]

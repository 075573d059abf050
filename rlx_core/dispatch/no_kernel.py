"""The rewrite route of the dense linear algebra and sparse ops on a target without them.

These ops have no common-IR decomposition and rlx never copies a value to the host behind
the user's back, so on a target that does not claim them the only honest outcome is a
legalization failure (RLX-S002) that says what to do instead.
"""

from __future__ import annotations

from typing import Any

from rlx_core.dispatch.capabilities import Reason
from rlx_core.ir.builder import Builder
from rlx_core.ir.graph import Node, Value
from rlx_core.ir.ops.linalg import LINALG_OPS
from rlx_core.ir.ops.sparse import SPARSE_OPS

NO_KERNEL_OPS: tuple[str, ...] = LINALG_OPS + SPARSE_OPS


def host_kernel_only(node: Node, ins: list[Value], b: Builder, env: Any) -> Value:
    """Always refuses, with the code and the fix a user needs (raised as NotApplicable)."""
    from rlx_core.dispatch.rewrites import NotApplicable  # rewrites.py imports this module

    family = "sparse" if node.op in SPARSE_OPS else "dense linear algebra"
    raise NotApplicable(Reason(
        "RLX-S002", f"{env.caps.target} has no kernel for the {family} op {node.op}, and rlx "
        "does not copy it to the host on its own",
        f"run {node.op} in a function compiled for target cpu (LAPACK / CSR kernels) or "
        f"numpy and pass its result to the {env.caps.target} function; or keep the whole "
        "computation on cpu"))

"""rlx_explorer: interactive views of every IR level, dispatch decision and kernel of a compile.

    from rlx_explorer import explore
    ex = explore(model, x, targets=["numpy", "webgpu"])
    ex.widget()            # in Jupyter;  ex.save_html("out.html") anywhere
    %load_ext rlx_explorer # then %%rlx cells and %rlx explain EXPR
"""

from __future__ import annotations

from typing import Any

from rlx_explorer.explorer import Explorer, explore
from rlx_explorer.session import Session, build_bundle

__all__ = ["Explorer", "Session", "build_bundle", "explore", "load_ipython_extension"]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext rlx_explorer``: registers the ``%%rlx`` / ``%rlx`` magics."""
    from rlx_explorer.magics import register

    register(ipython)

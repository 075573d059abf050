"""``rlx.nn``: model-level (HIR) ops; see rlx_core/frontend/nn.py."""

from rlx_core.frontend.nn import *  # noqa: F401,F403
from rlx_core.frontend.nn import __all__  # noqa: F401

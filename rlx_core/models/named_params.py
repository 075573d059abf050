"""Layers whose parameters are looked up by name in a weights mapping (HuggingFace names:
``<layer>.weight`` and ``<layer>.bias``), as the model files trace them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import rlx_core.frontend.nn as nn
from rlx_core.frontend import ops


def param(weights: Mapping[str, Any], name: str) -> Any:
    """``weights[name]`` as an rlx parameter of that name."""
    return ops.param(weights[name], name)


def linear(weights: Mapping[str, Any], x: Any, layer: str) -> Any:
    """``nn.linear`` with ``<layer>.weight`` (out, in) and ``<layer>.bias``."""
    return nn.linear(x, param(weights, layer + ".weight"), param(weights, layer + ".bias"))


def layer_norm(weights: Mapping[str, Any], x: Any, layer: str, eps: float) -> Any:
    """``nn.layer_norm`` over the last axis with ``<layer>.weight`` and ``<layer>.bias``."""
    return nn.layer_norm(x, param(weights, layer + ".weight"), param(weights, layer + ".bias"),
                         eps=eps)

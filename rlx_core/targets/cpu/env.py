"""Numeric settings of the cpu target read from the environment (tuning knobs such as
RLX_GV_PF, RLX_GV_ROW_FLOATS, RLX_WAIT_PREFETCH): unset means the default, a value that is not
a whole number >= 0 is an ArgumentError (RLX-R001), never silently the default."""

from __future__ import annotations

import os

from rlx_core.errors import ArgumentError


def env_count(name: str, what: str) -> int | None:
    """The whole number >= 0 in environment variable ``name``, None where it is unset or blank;
    anything else is an ArgumentError naming ``what`` it should be."""
    env = os.environ.get(name, "").strip()
    if not env:
        return None
    try:
        value = int(env)
    except ValueError:
        value = -1
    if value < 0:
        raise ArgumentError(f"{name}={env!r} is not a whole number >= 0",
                            hint=f"set it to {what}, or unset it")
    return value

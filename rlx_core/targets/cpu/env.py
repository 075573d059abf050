"""Numeric settings of the cpu target read from the environment (tuning knobs such as
RLX_GV_PF, RLX_GV_ROW_FLOATS, RLX_WAIT_PREFETCH): unset means the default, a value that is not
a whole number from 0 to the knob's bound is an ArgumentError (RLX-R001), never silently the
default, and never a number too large for the C it is written into."""

from __future__ import annotations

import os

from rlx_core.errors import ArgumentError


def env_count(name: str, what: str, most: int) -> int | None:
    """The whole number from 0 to ``most`` in environment variable ``name``, None where it is
    unset or blank; anything else is an ArgumentError naming ``what`` it should be.

    ``most`` is each knob's sane bound: the value becomes a #define in generated C (a loop
    count, a pointer offset, an int64 compared with a size), where RLX_GV_ROW_FLOATS=10**20
    would not fit an int64 and RLX_WAIT_PREFETCH=10**12 would overflow the loop's int."""
    env = os.environ.get(name, "").strip()
    if not env:
        return None
    try:
        value = int(env)
    except ValueError:
        value = -1
    if value < 0:
        raise ArgumentError(f"{name}={env!r} is not a whole number >= 0",
                            hint=f"set it to {what} (at most {most}), or unset it")
    if value > most:
        raise ArgumentError(f"{name}={env!r} is above its bound {most}",
                            hint=f"set it to {what} (at most {most}), or unset it")
    return value

"""Settings of the cpu target read from the environment: numeric tuning knobs (RLX_GV_PF,
RLX_GV_ROW_FLOATS, RLX_WAIT_PREFETCH, RLX_CB_FOLD) and the switches of single kernel paths
(RLX_CONV_BLOCKED, RLX_CONV_PAIR, RLX_WINOGRAD, RLX_WG_LAZY). Unset means the default; a
number that is not a whole number from 0 to the knob's bound, or a switch that is not one of
its values, is an ArgumentError (RLX-R001): never silently the default (an A/B run with a typo
would time the default twice), and never a number too large for the C it is written into."""

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


def env_choice(name: str, choices: tuple[str, ...]) -> str:
    """The value of environment variable ``name``, one of ``choices``, or "" where it is unset
    or blank; anything else is an ArgumentError listing the choices."""
    env = os.environ.get(name, "").strip()
    if env and env not in choices:
        raise ArgumentError(f"{name}={env!r} is not one of {', '.join(choices)}",
                            hint=f"set it to one of {', '.join(choices)}, or unset it for the "
                                 "rule table")
    return env

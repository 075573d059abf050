"""Settings of the cpu target read from the environment: numeric tuning knobs (RLX_GV_PF,
RLX_GV_ROW_FLOATS, RLX_WAIT_PREFETCH, RLX_CB_FOLD), the switches of single kernel paths that
take named values (RLX_CONV_BLOCKED, RLX_CONV_PAIR, RLX_WINOGRAD, RLX_WG_LAZY, RLX_CPU_PROFILE)
and the on/off switches (RLX_NO_BLAS, RLX_ROW_SPLIT, ...: ``1`` or ``0``). Unset or blank means
the default; a number that is not a whole number from 0 to the knob's bound, or a switch that
is not one of its values, is an ArgumentError (RLX-R001): never silently the default (an A/B
run with a typo would time the default twice), and never a number too large for the C it is
written into."""

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


def env_choice(name: str, choices: tuple[str, ...], unset: str = "the rule table") -> str:
    """The value of environment variable ``name``, one of ``choices``, or "" where it is unset
    or blank; anything else is an ArgumentError listing the choices (and what ``unset`` means)."""
    env = os.environ.get(name, "").strip()
    if env and env not in choices:
        raise ArgumentError(f"{name}={env!r} is not one of {', '.join(choices)}",
                            hint=f"set it to one of {', '.join(choices)}, or unset it for "
                                 f"{unset}")
    return env


def env_flag(name: str, default: bool) -> bool:
    """The on/off switch in environment variable ``name``: ``1`` on, ``0`` off, ``default``
    where it is unset or blank; anything else (``yes``, ``true``, ``off``) is an ArgumentError.
    The set is the one the path switches take (``0`` and a value), not every spelling of yes:
    one way to write each, so that an A/B script's value means one thing everywhere."""
    env = env_choice(name, ("0", "1"), unset=f"its default ({'1' if default else '0'})")
    return default if not env else env == "1"

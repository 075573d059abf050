"""Sanitising every name that goes into generated source (identifiers and comments)."""

from __future__ import annotations

import re

from rlx_core.ir.builder import clean_name

_NOT_IDENT = re.compile(r"[^A-Za-z0-9_]")


def c_ident(text: str, prefix: str = "v") -> str:
    """A C identifier made from ``text``: only [A-Za-z0-9_], never starting with a digit.

    Graph and value names already pass ``clean_name``; this escapes again because generated
    source must never depend on what an importer or a user chose to call something.
    """
    out = _NOT_IDENT.sub("_", clean_name(str(text)))
    if not out or out[0].isdigit():
        out = f"{prefix}_{out}"
    return out[:64]


def c_comment(text: str) -> str:
    """Text safe inside a ``/* ... */`` comment: no comment terminators, no newlines."""
    safe = clean_name(str(text)).replace("*/", "*_/")
    return safe[:80]

"""The typed error of a vendor kernel checker (clang-hexagon, ptxas, hipcc, an MSL syntax pass):
the tool's own diagnostics, the generated lines they point at, and the kernel those lines are in.
"""

from __future__ import annotations

import re

from rlx_core.errors import RlxError


class KernelCheckError(RlxError):
    """A vendor toolchain (clang-hexagon, ptxas, hipcc, the MSL syntax pass) rejected
    generated kernel source; the message carries the tool's output and the kernel line."""

    code = "RLX-H003"


def checker_error(tool: str, output: str, source: str, what: str) -> KernelCheckError:
    """A KernelCheckError quoting ``tool``'s first diagnostics and the source lines they name."""
    # errors first (nvcc and hipcc print pages of warnings before them), then the rest
    out = output.strip().splitlines()
    errors = [x for x in out if "error" in x.lower()]
    shown = "\n".join((errors + [x for x in out if x not in errors])[:12])
    lines = source.splitlines()
    quoted = []
    # clang "file:LINE:COL: error", nvcc "file(LINE): error"
    for m in re.finditer(r"(?::(\d+):(?:\d+:)?|\((\d+)\):) *(?:error|fatal)", output):
        n = int(m.group(1) or m.group(2))
        line = f">{n:6} | {lines[n - 1]}" if 1 <= n <= len(lines) else ""
        if line and line not in quoted and len(quoted) < 3:
            quoted.append(line)
    kernel = ""
    if quoted:
        first = int(re.search(r"\d+", quoted[0]).group(0))
        heads = [i + 1 for i, s in enumerate(lines[:first]) if s.startswith("/* kernel ")
                 or s.startswith("// kernel ")]
        if heads:
            kernel = f" in {lines[heads[-1] - 1].strip('/* ').split(' ')[1]}"
    text = f"{tool} rejected the generated {what}{kernel}:\n{shown}"
    if quoted:
        text += "\noffending source lines:\n" + "\n".join(quoted)
    return KernelCheckError(text, hint="a renderer bug, not a user error: report it with "
                                       "`rlx compile FILE --target TARGET --emit source`")


__all__ = ["KernelCheckError", "checker_error"]

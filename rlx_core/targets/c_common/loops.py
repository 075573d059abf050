"""Index arithmetic and loop nests: affine offsets over loop variables, and loop merging.

Every element access in a kernel is an affine function of the loop variables,
``offset = const + sum_l coef[l] * i_l``. Broadcasts (stride 0), transposes (permuted
strides) and slices (start + stride * i) are all such maps, so a whole fused loop body is
described by the affines it touches. Adjacent loops ``l, l+1`` merge into one when every
access has ``coef[l] == coef[l+1] * extent[l+1]`` (the pair walks memory as one axis), and
loops of extent 1 disappear: a contiguous [B, S, D] elementwise kernel becomes one flat loop,
a bias add over [M, N] stays two (the bias has stride 0 along M).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlx_core.ir.graph import Shape, row_strides


@dataclass(frozen=True)
class Affine:
    """``const + sum(coefs[l] * i_l)`` in elements."""

    const: int
    coefs: tuple[int, ...]

    def __add__(self, other: Affine) -> Affine:
        return Affine(self.const + other.const,
                      tuple(a + b for a, b in zip(self.coefs, other.coefs, strict=True)))

    def scale(self, k: int) -> Affine:
        return Affine(self.const * k, tuple(c * k for c in self.coefs))

    def shift(self, k: int) -> Affine:
        return Affine(self.const + k, self.coefs)


AxisMap = tuple[Affine, ...]  # the coordinate of each axis of a value, as affines


def zero(n: int) -> Affine:
    return Affine(0, (0,) * n)


def var(n: int, lv: int) -> Affine:
    return Affine(0, tuple(1 if k == lv else 0 for k in range(n)))


def offset(amap: AxisMap, shape: Shape, nvars: int) -> Affine:
    """Row-major element offset of a value of ``shape`` at coordinates ``amap``."""
    total = zero(nvars)
    for a, st in zip(amap, row_strides(shape), strict=True):
        total = total + a.scale(st)
    return total


def identity(nvars: int, var_of_axis: tuple[int, ...]) -> AxisMap:
    return tuple(var(nvars, v) for v in var_of_axis)


@dataclass(frozen=True)
class Loop:
    """One emitted loop: the original variables it stands for (outermost first)."""

    olds: tuple[int, ...]
    extent: int
    group: int


@dataclass(frozen=True)
class LoopPlan:
    """Original loop variables -> emitted loops (merged, extent-1 ones dropped)."""

    extents: tuple[int, ...]
    groups: tuple[int, ...]
    loops: tuple[Loop, ...]

    @staticmethod
    def plan(extents: tuple[int, ...], groups: tuple[int, ...], accesses: list[Affine],
             merge: bool = True) -> LoopPlan:
        loops: list[Loop] = []
        for lv, (e, g) in enumerate(zip(extents, groups, strict=True)):
            if e == 1:
                continue  # the variable is always 0
            if merge and loops and loops[-1].group == g:
                prev = loops[-1]
                inner = prev.olds[-1]
                # merge when every access walks (prev, l) as one axis of extent prev * e
                if all(a.coefs[inner] == a.coefs[lv] * e for a in accesses) and \
                        all(extents[k] == 1 for k in range(inner + 1, lv)):
                    loops[-1] = Loop(prev.olds + (lv,), prev.extent * e, g)
                    continue
            loops.append(Loop((lv,), e, g))
        return LoopPlan(extents, groups, tuple(loops))

    def name(self, k: int) -> str:
        return f"i{k}"

    def fmt(self, a: Affine) -> str:
        """C expression of ``a`` over the emitted loop variables."""
        terms = []
        for k, loop in enumerate(self.loops):
            # a merged loop's variable counts in units of its innermost original variable
            coef = a.coefs[loop.olds[-1]]
            for o in loop.olds[:-1]:
                if a.coefs[o] != coef * math.prod(self.extents[p] for p in loop.olds
                                                  if p > o):
                    raise ValueError("access not affine in the merged loop")
            if coef == 1:
                terms.append(self.name(k))
            elif coef != 0:
                terms.append(f"{self.name(k)} * {coef}")
        if a.const or not terms:
            terms.append(str(a.const))
        return " + ".join(terms)

    def coord(self, old: int) -> str:
        """The value of original variable ``old`` (valid when it was not merged away)."""
        if self.extents[old] == 1:
            return "0"
        for k, loop in enumerate(self.loops):
            if loop.olds == (old,):
                return self.name(k)
        raise ValueError(f"loop variable {old} was merged; coordinates need merge=False")

    def of_group(self, g: int) -> list[tuple[int, Loop]]:
        return [(k, lp) for k, lp in enumerate(self.loops) if lp.group == g]


class Writer:
    """Indented C lines."""

    def __init__(self, indent: int = 1):
        self.lines: list[str] = []
        self.depth = indent

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text if text else "")

    def open(self, header: str) -> None:
        self.line(header + " {")
        self.depth += 1

    def close(self) -> None:
        self.depth -= 1
        self.line("}")

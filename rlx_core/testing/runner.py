"""Run cases on a target and classify every output against the reference.

Cases are packed (``pack``) so one compile checks many; a pack that fails to compile or run is
bisected down to the cases that fail on their own. A failure is a *crash* when the exception is
not a typed ``RlxError`` (a bug whatever the input), a *rejection* when it is (a well-typed graph
the target refused: also reported). A mismatch is *known* when an entry of ``deviations``
explains it, *overflow-ambiguous* when the cone runs within 2^6 of the dtype's overflow threshold
and the result is NaN/inf on one side only (evaluation order decides), else *unexplained*.
A pack whose error names the packed values of some of its cases (``%c7_3``: a legalization
report, a renderer error) runs those alone and the rest again as one pack; only an error that
names none is bisected (each failing half is another compile).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import rlx_core as rlx
from rlx_core.errors import RlxError
from rlx_core.testing.deviations import explain
from rlx_core.testing.generator import Case
from rlx_core.testing.pack import pack
from rlx_core.testing.reference import Reference, evaluate
from rlx_core.testing.refusals import fused_only, refused_pairs
from rlx_core.testing.tolerance import verdict

OK, MISMATCH, KNOWN, AMBIGUOUS, CRASH, REJECTED, REF_ERROR, TIMEOUT = (
    "ok", "mismatch", "known", "overflow-ambiguous", "crash", "rejected", "reference-error",
    "timeout")
# a packed value is named c<i>_<name> (pack.py): an error that names one names its case
_CASE_NAME = re.compile(r"%c(\d+)_")


@dataclass
class Outcome:
    """The result of one case on one target."""

    case: Case
    status: str
    detail: str = ""
    output: int = -1  # the first output that differs
    known: str = ""  # the deviation id that explains it
    extra: dict[str, Any] = field(default_factory=dict)


def execute(target: str, g: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Compile ``g`` for ``target`` and run it once: its outputs as a list."""
    out = rlx.compile(g, target=target, record=False)(*inputs)
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


def _failure(err: BaseException) -> tuple[str, str]:
    kind = REJECTED if isinstance(err, RlxError) else CRASH
    text = str(err).splitlines()[0] if str(err) else ""
    return kind, f"{type(err).__name__}: {text}"[:400]


def classify(target: str, case: Case, ref: Reference, got: list[np.ndarray]) -> Outcome:
    """Compare each output; the first bad one decides the outcome."""
    types = case.graph.output_types()
    worst: Outcome | None = None
    for k, (g, w, s, t) in enumerate(zip(got, ref.outputs, ref.stats, types, strict=True)):
        v = verdict(g, w, s, t.dtype)
        if v.ok:
            continue
        dev = explain(target, s, np.asarray(g), w)
        if dev is not None:
            out = Outcome(case, KNOWN, v.detail, k, dev.id)
        elif s.near_overflow and not s.exact and (
                np.isnan(np.asarray(g, np.complex128)).any()
                or not np.isfinite(np.asarray(g, np.complex128)).all()
                or not np.isfinite(np.asarray(w, np.complex128)).all()):
            out = Outcome(case, AMBIGUOUS, v.detail, k)
        else:
            return Outcome(case, MISMATCH, v.detail, k)
        worst = worst or out
    return worst or Outcome(case, OK)


def run_one(target: str, case: Case, ref: Reference | None = None) -> Outcome:
    """One case alone (what the shrinker and the saved regression tests call)."""
    if ref is None:
        try:
            ref = evaluate(case.graph, case.inputs)
        except RlxError as err:  # the reference refuses this case
            return Outcome(case, REF_ERROR, _failure(err)[1])
        except Exception as err:  # noqa: BLE001 - an untyped reference failure is a crash
            return Outcome(case, CRASH, "reference: " + _failure(err)[1])
    try:
        got = execute(target, case.graph, case.inputs)
    except Exception as err:  # noqa: BLE001 - the point is to catch what the target raises
        kind, text = _failure(err)
        if kind == REJECTED:  # what it refused, read from the typed error (refusals.py)
            return Outcome(case, kind, text, extra={"refused": refused_pairs(err, case.graph),
                                                    "fused": fused_only(err)})
        return Outcome(case, kind, text)
    return classify(target, case, ref, got)


def run_batch(target: str, cases: list[Case],
              on_compile: Callable[[], None] | None = None) -> list[Outcome]:
    """Every case of ``cases`` on ``target``: packed, bisected on failure."""
    done: list[Outcome] = []
    live: list[tuple[Case, Reference]] = []
    for c in cases:
        try:
            live.append((c, evaluate(c.graph, c.inputs)))
        except RlxError as err:  # the reference refuses this case: drop it, but count it
            done.append(Outcome(c, REF_ERROR, _failure(err)[1]))
        except Exception as err:  # noqa: BLE001 - an untyped reference failure is a crash
            done.append(Outcome(c, CRASH, "reference: " + _failure(err)[1]))

    def go(group: list[tuple[Case, Reference]]) -> None:
        if not group:
            return
        if len(group) == 1:
            if on_compile:
                on_compile()
            done.append(run_one(target, group[0][0], group[0][1]))
            return
        g, arrays, where = pack([c for c, _ in group])
        try:
            if on_compile:
                on_compile()
            got = execute(target, g, arrays)
        except Exception as err:  # noqa: BLE001 - find the cases that fail on their own
            named = {int(i) for i in _CASE_NAME.findall(str(err))} & set(range(len(group)))
            if named and len(named) < len(group):
                for i in sorted(named):
                    go([group[i]])
                go([x for i, x in enumerate(group) if i not in named])
                return
            half = len(group) // 2
            go(group[:half])
            go(group[half:])
            return
        for (c, ref), sl in zip(group, where, strict=True):
            done.append(classify(target, c, ref, got[sl]))

    go(live)
    return done

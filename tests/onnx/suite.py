"""Run ONNX backend node tests through rlx and classify each: pass, rejected (rlx raised a typed
RlxError: unsupported op, illegal on the target, ...) or fail (a wrong answer, or a crash that
is not a typed rlx error). Shared by tests/onnx/test_backend_node.py and scripts/onnx_report.py.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from node_cases import NodeCase

PASS, REJECTED, FAIL = "pass", "rejected", "fail"
F16_RTOL = 2.0 ** -9  # two float16 ULPs (relative, 10 mantissa bits), for compiled targets


@dataclass(frozen=True)
class Outcome:
    name: str
    target: str
    status: str  # PASS, REJECTED or FAIL
    detail: str = ""  # the error code and first line of the message, or what was wrong


class CaseTimeout(Exception):
    pass


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    # a case that takes this long counts as a failure instead of stalling the whole suite
    if seconds <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return

    def fire(signum: int, frame: object) -> None:
        raise CaseTimeout(f"took longer than {seconds:.0f}s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_case(case: NodeCase, target: str, timeout: float = 60.0) -> Outcome:
    """Prepare and run ``case`` on ``target``; compare with ONNX's own tolerance check."""
    import onnx
    from onnx.backend.test.runner import Runner

    from rlx_core.errors import RlxError
    from rlx_core.frontend.onnx_backend import backend_for

    backend = backend_for(target)
    try:
        with _deadline(timeout):
            model = onnx.load_from_string(case.model)
            rep = backend.prepare(model, "CPU")
            for inputs, expected in case.data_sets:
                got = rep.run(list(inputs))
                rtol = case.rtol
                if target != "numpy" and any(getattr(e, "dtype", None) is not None
                                             and e.dtype.name == "float16" for e in expected):
                    # devices round f16 intermediates their own way; allow 2 f16 ULPs, as ONNX's
                    # runner does for bfloat16 (the numpy reference is held to the test's rtol)
                    rtol = max(rtol, F16_RTOL)
                try:
                    Runner.assert_similar_outputs(list(expected), list(got), rtol=rtol,
                                                  atol=case.atol)
                except AssertionError as err:
                    first = str(err).strip().splitlines()
                    return Outcome(case.name, target, FAIL,
                                   "wrong answer: " + " ".join(first[:4])[:300])
    except RlxError as err:
        problems = getattr(err, "problems", ())
        if problems:  # UnsupportedOp: name the first problem (op type and reason)
            more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
            head = f"{problems[0].op_type}: {problems[0].reason}{more}"
        else:
            head = err.message.splitlines()[0] if err.message else ""
        return Outcome(case.name, target, REJECTED, f"{err.code} {head}"[:300])
    except CaseTimeout as err:
        return Outcome(case.name, target, FAIL, f"timeout: {err}")
    except Exception as err:  # noqa: BLE001 - any other exception is a crash: a failure
        return Outcome(case.name, target, FAIL,
                       f"crash: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:300])
    return Outcome(case.name, target, PASS)

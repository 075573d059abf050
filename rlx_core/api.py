"""The public entry points: compile, jit, explain, targets."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

from rlx_core.compile_trace import CompileTrace
from rlx_core.errors import RlxError, TargetUnavailableError
from rlx_core.frontend.tracer import trace, type_of_example
from rlx_core.ir.graph import Graph, Level
from rlx_core.ir.printer import print_graph
from rlx_core.passes.base import CompileOptions, PassContext
from rlx_core.runtime.executable import Executable
from rlx_core.targets.registry import get_target, target_names

DEFAULT_TARGET = "numpy"


def _source_of(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        lines, start = inspect.getsourcelines(fn)
        return {"file": inspect.getsourcefile(fn) or "", "line": start, "text": "".join(lines)}
    except (OSError, TypeError):
        return {}


def lower(fn_or_graph: Callable[..., Any] | Graph, *example_args: Any, target: str = DEFAULT_TARGET,
          policy: Any = None, allow_approximate: bool = False, verify: bool = False,
          record: bool = True, name: str | None = None) -> tuple[Graph, Graph, Graph, PassContext]:
    """Trace (if given a function) and run the pipeline; returns (hir, mir, lir, context)."""
    from rlx_core.passes.pipeline import run_pipeline

    tgt = get_target(target)
    options = CompileOptions(target=target, policy=policy, allow_approximate=allow_approximate,
                             verify=verify)
    hir = fn_or_graph if isinstance(fn_or_graph, Graph) else trace(fn_or_graph, *example_args,
                                                                   name=name)
    rec = CompileTrace(function=hir.name, target=target, policy=str(policy or "prefer-native"),
                       source={} if isinstance(fn_or_graph, Graph) else _source_of(fn_or_graph)) \
        if record else None
    ctx = PassContext(options=options, target=tgt, trace=rec)
    if rec is not None:
        rec.snapshots["hir"] = print_graph(hir)
    mir: Graph | None = None

    # run the pipeline, keeping the MIR snapshot (the graph just before fusion)
    from rlx_core.passes.pipeline import default_pipeline

    passes = default_pipeline()
    split = next(i for i, p in enumerate(passes) if p.name == "fuse")
    mir = run_pipeline(hir, ctx, passes[:split])
    lir = run_pipeline(mir, ctx, passes[split:])
    if rec is not None:
        rec.snapshots["mir"] = print_graph(mir)
        rec.snapshots["lir"] = print_graph(lir)
        if lir.plan is not None:
            rec.plan = {"peak_bytes": lir.plan.peak_bytes, "naive_bytes": lir.plan.naive_bytes,
                        "alignment": lir.plan.alignment,
                        "slots": [s.__dict__ for s in lir.plan.slots]}
    assert mir.level is Level.MIR and lir.level is Level.LIR  # internal invariant, not user input
    return hir, mir, lir, ctx


def compile(fn: Callable[..., Any] | Graph, *example_args: Any, target: str = DEFAULT_TARGET,
            policy: Any = None, allow_approximate: bool = False, verify: bool = False,
            record: bool = True, name: str | None = None) -> Executable:
    """Compile ``fn`` for ``target`` at the shapes/dtypes of ``example_args``.

    Returns an Executable; ``exe.trace`` is its CompileTrace. Raises LegalizationError when an
    op has no legal route on the target, TargetUnavailableError when the target cannot run here.
    """
    tgt = get_target(target)
    ok, why = tgt.available()
    if not ok:
        raise TargetUnavailableError(f"target {target!r} is not available here: {why}",
                                     hint="see rlx.targets() for what runs on this machine")
    hir, mir, lir, ctx = lower(fn, *example_args, target=target, policy=policy,
                               allow_approximate=allow_approximate, verify=verify, record=record,
                               name=name)
    program = tgt.build(lir, ctx.options)
    if ctx.trace is not None:
        ctx.trace.kernels = dict(program.sources)
    rec = ctx.trace or CompileTrace(function=hir.name, target=target)
    return Executable(hir.name, target, hir, mir, lir, program, rec, dict(hir.param_data))


def _guard(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((t.shape, t.dtype.name) for t in (type_of_example(a) for a in args))


@dataclass
class CacheEvent:
    """One call of a jitted function: a hit, or a miss with the first guard that failed."""

    hit: bool
    specialization: int
    failed_guard: str = ""


@dataclass
class JitFunction:
    """A function compiled per specialization (shapes, dtypes, target), cached in order."""

    fn: Callable[..., Any]
    target: str = DEFAULT_TARGET
    options: dict[str, Any] = field(default_factory=dict)
    specializations: list[tuple[tuple[Any, ...], Executable]] = field(default_factory=list)
    events: list[CacheEvent] = field(default_factory=list)
    max_events: int = 1000

    def __post_init__(self) -> None:
        functools.update_wrapper(self, self.fn)  # type: ignore[arg-type]

    def _first_failed_guard(self, key: tuple[Any, ...]) -> str:
        if not self.specializations:
            return "no specializations yet"
        have = self.specializations[-1][0]
        if len(have) != len(key):
            return f"argument count {len(key)} != {len(have)}"
        for i, (g, k) in enumerate(zip(have, key)):
            if g[0] != k[0]:
                return f"arg {i} shape {list(k[0])} != {list(g[0])}"
            if g[1] != k[1]:
                return f"arg {i} dtype {k[1]} != {g[1]}"
        return "unknown"

    def _log(self, event: CacheEvent) -> None:
        if len(self.events) < self.max_events:
            self.events.append(event)

    def lookup(self, *args: Any) -> Executable:
        """The specialization for ``args``, compiling a new one on a miss."""
        key = _guard(args)
        for i, (guard, exe) in enumerate(self.specializations):
            if guard == key:
                self._log(CacheEvent(True, i))
                return exe
        reason = self._first_failed_guard(key)
        exe = compile(self.fn, *args, target=self.target, **self.options)
        self.specializations.append((key, exe))
        self._log(CacheEvent(False, len(self.specializations) - 1, reason))
        return exe

    def __call__(self, *args: Any) -> Any:
        return self.lookup(*args)(*args)

    @property
    def hits(self) -> int:
        return sum(e.hit for e in self.events)

    @property
    def misses(self) -> int:
        return sum(not e.hit for e in self.events)


def jit(fn: Callable[..., Any] | None = None, *, target: str = DEFAULT_TARGET,
        **options: Any) -> Any:
    """Decorator: compile ``fn`` on first call for each new argument signature."""
    if fn is None:
        return lambda f: JitFunction(f, target, options)
    return JitFunction(fn, target, options)


@dataclass(frozen=True)
class TargetInfo:
    """What ``rlx.targets()`` reports for one target."""

    name: str
    available: bool
    reason: str
    verification: str
    description: str


def targets() -> list[TargetInfo]:
    """Every target: whether it runs here (and why not), and how it is verified."""
    out = []
    for name in target_names():
        try:
            t = get_target(name)
            ok, why = t.available()
            out.append(TargetInfo(name, ok, why, t.verification, t.description))
        except RlxError as err:
            out.append(TargetInfo(name, False, err.message, "unknown", ""))
        except ImportError as err:
            out.append(TargetInfo(name, False, f"import failed: {err}", "unknown", ""))
    return out

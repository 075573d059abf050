"""The public entry points: compile, jit, explain, targets."""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlx_core.compile_trace import CompileTrace
from rlx_core.errors import RlxError, RlxWarning, TargetUnavailableError
from rlx_core.frontend.tracer import trace, type_of_example
from rlx_core.ir.graph import Graph, Level
from rlx_core.ir.printer import print_graph
from rlx_core.passes.base import CompileOptions, PassContext
from rlx_core.runtime.call_args import positional_args
from rlx_core.runtime.executable import Executable
from rlx_core.runtime.specialization_cache import CacheEvent, SpecializationCache
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
          record: bool = True, name: str | None = None, memory_limit: Any = None,
          input_ranges: dict[str, tuple[int, int]] | None = None,
          ) -> tuple[Graph, Graph, Graph, PassContext]:
    """Trace (if given a function) and run the pipeline; returns (hir, mir, lir, context)."""
    from rlx_core.passes.pipeline import default_pipeline, run_pipeline

    tgt = get_target(target)
    options = CompileOptions(target=target, policy=policy, allow_approximate=allow_approximate,
                             verify=verify, memory_limit=memory_limit,
                             input_ranges=dict(input_ranges or {}))
    hir = fn_or_graph if isinstance(fn_or_graph, Graph) else trace(fn_or_graph, *example_args,
                                                                   name=name)
    rec = CompileTrace(function=hir.name, target=target, policy=str(policy or "prefer-native"),
                       source=({"import": dict(fn_or_graph.origin)} if fn_or_graph.origin else {})
                       if isinstance(fn_or_graph, Graph) else _source_of(fn_or_graph)) \
        if record else None
    ctx = PassContext(options=options, target=tgt, trace=rec)
    if rec is not None:
        rec.snapshots["hir"] = print_graph(hir)
    # run the pipeline, keeping the MIR snapshot (the graph just before fusion)
    passes = default_pipeline()
    split = next(i for i, p in enumerate(passes) if p.name == "fuse")
    # (the texts printed so far are handed on: run_pipeline prints each graph once)
    mir = run_pipeline(hir, ctx, passes[:split], rec and rec.snapshots["hir"])
    lir = run_pipeline(mir, ctx, passes[split:], rec and rec.steps[-1].after)
    if rec is not None:
        # each recorded step already printed its result: reuse the texts, don't print again
        rec.snapshots["mir"] = rec.steps[split - 1].after
        rec.snapshots["lir"] = rec.steps[-1].after
        if lir.plan is not None:
            rec.plan = {"peak_bytes": lir.plan.peak_bytes, "naive_bytes": lir.plan.naive_bytes,
                        "alignment": lir.plan.alignment,
                        "slots": [s.__dict__ for s in lir.plan.slots]}
    assert mir.level is Level.MIR and lir.level is Level.LIR  # internal invariant, not user input
    return hir, mir, lir, ctx


def compile(fn: Callable[..., Any] | Graph, *example_args: Any, target: str = DEFAULT_TARGET,
            policy: Any = None, allow_approximate: bool = False, verify: bool = False,
            record: bool = True, name: str | None = None,
            memory_limit: Any = None,
            input_ranges: dict[str, tuple[int, int]] | None = None) -> Executable:
    """Compile ``fn`` for ``target`` at the shapes/dtypes of ``example_args``.

    Returns an Executable; ``exe.trace`` is its CompileTrace. Raises LegalizationError when an
    op has no legal route on the target, TargetUnavailableError when the target cannot run here.
    ``memory_limit`` caps what one run may allocate (bytes, ``"8G"``, ``"50%"``, ``"off"``;
    default ``RLX_MEMORY_LIMIT`` or 80% of RAM): a call over it raises MemoryBudgetError.
    """
    tgt = get_target(target)
    ok, why = tgt.available()
    if not ok:
        # a target that knows its precise error (webgpu-browser's RLX-B001 with the install
        # hint) raises that one; the others the generic RLX-X001
        typed = getattr(tgt, "unavailable_error", None)
        err = typed() if callable(typed) else None
        if isinstance(err, TargetUnavailableError):
            raise err
        raise TargetUnavailableError(f"target {target!r} is not available here: {why}",
                                     hint="see rlx.targets() for what runs on this machine")
    hir, mir, lir, ctx = lower(fn, *example_args, target=target, policy=policy,
                               allow_approximate=allow_approximate, verify=verify, record=record,
                               name=name, memory_limit=memory_limit,
                               input_ranges=input_ranges)
    program = tgt.build(lir, ctx.options)
    if ctx.trace is not None:
        ctx.trace.kernels = dict(program.sources)
    rec = ctx.trace or CompileTrace(function=hir.name, target=target)
    return Executable(hir.name, target, hir, mir, lir, program, rec, dict(hir.param_data),
                      memory_limit=memory_limit, input_ranges=dict(input_ranges or {}))


def _guard(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((t.shape, t.dtype.name) for t in (type_of_example(a) for a in args))


# Targets whose jitted functions run through a generated specialization cache module (SCM).
SCM_TARGETS = ("cpu",)


class JitFallbackWarning(RlxWarning):
    """``@rlx.jit`` runs on the numpy reference because the CPU target is installed but
    unusable here (its cache folder cannot be used): a slow answer, said aloud."""

    code = "RLX-R017"


@functools.cache
def default_jit_target() -> str:
    """``@rlx.jit``'s default: the CPU target where it can run here, else the numpy reference.
    A CPU target that only its cache folder stops (RLX-R013) is not silently replaced: the
    fallback warns with RLX-R017 and the R013 message (once per process)."""
    import warnings

    from rlx_core.targets.cpu.cache import CacheDirError

    try:
        ok, _ = get_target("cpu").available()
    except CacheDirError as err:
        warnings.warn(JitFallbackWarning(
            f"@rlx.jit runs on the numpy reference (much slower): the cpu target cannot use "
            f"its cache folder: {str(err).splitlines()[0]}",
            hint=f"{err.hint}; or pass target='numpy' to choose the reference on purpose"),
            stacklevel=3)
        ok = False
    except (RlxError, ImportError):
        ok = False
    return "cpu" if ok else "numpy"


@dataclass
class JitFunction:
    """A function compiled per specialization (shapes, dtypes, layout, target), cached in order.

    On the CPU target the specializations live in one generated extension module
    (``rlx_core.runtime.specialization_cache``) and a cache hit never enters Python: the
    module's entry becomes this object's ``__call__`` (each instance gets its own subclass to
    hold it). Elsewhere the cache is the Python list below.
    """

    fn: Callable[..., Any]
    target: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    max_events: int = 1000

    def __post_init__(self) -> None:
        functools.update_wrapper(self, self.fn)  # type: ignore[arg-type]
        self.target = self.target or default_jit_target()
        self._specializations: list[tuple[tuple[Any, ...], Executable]] = []
        self._events: list[CacheEvent] = []
        self._lock = threading.Lock()  # one compile per miss when several threads miss at once
        self._scm: SpecializationCache | None = None
        if "donate" in self.options:  # checked now; only the CPU module writes in place
            from rlx_core.runtime.donation import donated_positions

            self.options = dict(self.options)
            self.options["donate"] = donated_positions(self.options["donate"])
            if self.target not in SCM_TARGETS:
                del self.options["donate"]
        if self.target in SCM_TARGETS:
            # a per-instance class, so that installing the module's entry as __call__ affects
            # this function only
            cls = type(self)
            self.__class__ = type(cls.__name__, (cls,), {"__module__": cls.__module__,
                                                         "__qualname__": cls.__qualname__})
            self._scm = SpecializationCache(self.fn, self.options, self.max_events,
                                            install=self._install)

    def _install(self, call: Any) -> None:
        # a builtin function is not a descriptor: calling the instance calls it with the
        # arguments only, straight into the compiled module
        type(self).__call__ = call  # type: ignore[method-assign]

    @property
    def specializations(self) -> list[tuple[tuple[Any, ...], Executable]]:
        """(guard key, Executable) per specialization, in cache order."""
        if self._scm is not None:
            return [(s.guard.key, s.executable) for s in self._scm.specializations]
        return self._specializations

    @property
    def events(self) -> list[CacheEvent]:
        """The first ``max_events`` calls: hits, and misses with their first failed guard."""
        return self._scm.events() if self._scm is not None else self._events

    @property
    def cache(self) -> SpecializationCache | None:
        """The CPU specialization cache (guards, per-specialization hits, module), else None."""
        return self._scm

    def _first_failed_guard(self, key: tuple[Any, ...]) -> str:
        if not self._specializations:
            return "no specializations yet"
        have = self._specializations[-1][0]
        if len(have) != len(key):
            return f"argument count {len(key)} != {len(have)}"
        for i, (g, k) in enumerate(zip(have, key, strict=False)):
            if g[0] != k[0]:
                return f"arg {i} shape {list(k[0])} != {list(g[0])}"
            if g[1] != k[1]:
                return f"arg {i} dtype {k[1]} != {g[1]}"
        return "unknown"

    def _log(self, event: CacheEvent) -> None:
        if len(self._events) < self.max_events:
            self._events.append(event)

    def lookup(self, *args: Any) -> Executable:
        """The specialization for ``args``, compiling a new one on a miss."""
        if self._scm is not None:
            return self._scm.lookup(args).executable
        key = _guard(args)
        exe = self._hit(key)
        if exe is not None:
            return exe
        with self._lock:
            exe = self._hit(key)  # another thread compiled it while this one waited
            if exe is not None:
                return exe
            reason = self._first_failed_guard(key)
            exe = compile(self.fn, *args, target=self.target, **self.options)
            self._specializations.append((key, exe))
            self._log(CacheEvent(False, len(self._specializations) - 1, reason))
            return exe

    def _hit(self, key: tuple[Any, ...]) -> Executable | None:
        for i, (guard, exe) in enumerate(self._specializations):
            if guard == key:
                self._log(CacheEvent(True, i))
                return exe
        return None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:  # keywords take their positions (runtime/call_args.py)
            args = positional_args(self.fn, args, kwargs)
        if self._scm is not None:  # no module yet: the first call is a miss
            return self._scm.on_miss(*args)
        return self.lookup(*args)(*args)

    @property
    def hits(self) -> int:
        if self._scm is not None:
            return self._scm.hits
        return sum(e.hit for e in self._events)

    @property
    def misses(self) -> int:
        if self._scm is not None:
            return self._scm.misses
        return sum(not e.hit for e in self._events)


def jit(fn: Callable[..., Any] | None = None, *, target: str | None = None,
        **options: Any) -> Any:
    """Decorator: compile ``fn`` on first call for each new argument signature.

    ``target`` defaults to ``default_jit_target()``: "cpu" where it runs here, else "numpy".
    ``donate=(i, ...)`` hands those arguments over to the call: on the CPU target an output
    computed elementwise from a donated argument alone is written into that array and the
    array itself is returned (a decoder's KV cache updated in place, not copied; see
    ``rlx_core.runtime.donation``); the caller must not rely on its old contents. Other
    targets return new arrays as usual.
    ``fn`` is traced again for each signature (as ``rlx.compile`` traces it again for each
    target): weights it draws from an unseeded random generator differ between them; make
    them outside ``fn`` or seed the generator (see ``rlx.param``).
    """
    if fn is None:
        return lambda f: JitFunction(f, target or "", options)
    return JitFunction(fn, target or "", options)


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

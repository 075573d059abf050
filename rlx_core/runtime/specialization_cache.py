"""Trident-style specialization cache (SCM) for the CPU target: guards, specializations, records.

A jitted function keeps an ordered list of specializations, each guarded by the shape, dtype and
layout of every argument (and the target). All of them live in ONE generated CPython extension
module (``scm_codegen``): calling the jitted function calls that module's METH_FASTCALL entry
directly, which checks the guards in order, prepares the arguments, allocates the outputs and
runs the kernels; a hit never executes Python bytecode. Only a miss calls back into
``SpecializationCache.on_miss``, which records the first failing guard, compiles a new
specialization, rebuilds the module (every kernel object comes from the disk cache except the new
one) and installs its entry.

Non-contiguous (or misaligned, or byte-swapped) inputs: the first specialization for a signature
requires dense arguments, so such an input is a miss whose guard says ``arg 0 not contiguous``.
The specialization added for it accepts any layout and copies the non-dense arguments to
contiguous before the call; it reuses the dense specialization's kernels, so nothing new is
compiled, only the module is relinked. Execution errors (wrong argument count, an argument that is
neither a numpy array nor a buffer) raise ``ArgumentError`` (RLX-R001) and are never misses.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import inspect
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlx_core.errors import ArgumentError, RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph, Shape, TensorType
from rlx_core.runtime import scm_codegen
from rlx_core.runtime.call_args import positional_args

TARGET = "cpu"


@dataclass
class CacheEvent:
    """One call of a jitted function: a hit, or a miss with the first guard that failed."""

    hit: bool
    specialization: int
    failed_guard: str = ""


@dataclass(frozen=True)
class ArgInfo:
    """One argument of a call, as the guards see it."""

    dtype: dt.DType
    shape: Shape
    contiguous: bool
    aligned: bool
    native: bool  # native byte order

    @property
    def dense(self) -> bool:
        """Readable in place by a kernel (what a dense-only guard requires)."""
        return self.contiguous and self.aligned and self.native

    def layout_problem(self) -> str:
        if not self.contiguous:
            return "not contiguous"
        if not self.aligned:
            return "not aligned"
        return "not in native byte order"


@dataclass(frozen=True)
class ArgGuard:
    """What a specialization requires of one argument."""

    dtype: dt.DType
    shape: Shape
    dense: bool  # True: dense only; False: any layout (non-dense arguments are copied)

    @property
    def type(self) -> TensorType:
        return TensorType(self.dtype, self.shape)


@dataclass(frozen=True)
class Guard:
    """The guard of one specialization: every argument's shape, dtype and layout, and the target."""

    target: str
    args: tuple[ArgGuard, ...]

    @property
    def key(self) -> tuple[tuple[Shape, str], ...]:
        """(shape, dtype name) per argument: the key ``JitFunction.specializations`` shows."""
        return tuple((a.shape, a.dtype.name) for a in self.args)

    def check(self, args: Sequence[ArgInfo]) -> tuple[int, str | None]:
        """(guard terms passed, the first failing term or None), in the generated C's order:
        argument count, then per argument its shape, dtype and layout."""
        if len(args) != len(self.args):
            return 0, f"argument count {len(args)} != {len(self.args)}"
        passed = 1
        for i, (g, a) in enumerate(zip(self.args, args, strict=True)):
            if a.shape != g.shape:
                return passed, f"arg {i} shape {list(a.shape)} != {list(g.shape)}"
            if a.dtype != g.dtype:
                return passed + 1, f"arg {i} dtype {a.dtype.name} != {g.dtype.name}"
            if g.dense and not a.dense:
                return passed + 2, f"arg {i} {a.layout_problem()}"
            passed += 3
        return passed, None

    def first_failure(self, args: Sequence[ArgInfo]) -> str | None:
        """The first guard term ``args`` fail, or None if they pass."""
        return self.check(args)[1]

    def describe(self) -> str:
        layout = "contiguous" if all(a.dense for a in self.args) else "any layout (copies)"
        return f"({', '.join(str(a.type) for a in self.args)}) {layout} on {self.target}"


@dataclass(frozen=True)
class KernelProgram:
    """The C program of one specialization (several specializations may share one)."""

    prefix: str  # entry ``<prefix>_run``
    error_fn: str  # ``int <error_fn>(int64_t* info)``
    source: str
    include_dirs: tuple[str, ...]
    library_dirs: tuple[str, ...]
    libraries: tuple[str, ...]
    kernel_names: tuple[str, ...]  # the LIR kernels in it, for runtime error messages
    outputs: tuple[TensorType, ...]
    arena_bytes: int
    params: tuple[Any, ...]  # host arrays in graph.params order, bound at module build time
    # per output: the donated argument it may be written into, or -1 (runtime/donation.py)
    aliases: tuple[int, ...] = ()
    # the prebuilt kernel objects it links (cpu/kernel_library.py), once per module
    kernel_libraries: tuple[str, ...] = ()


@dataclass(frozen=True)
class Specialization:
    """One entry of the cache, in order: its guard, its program and the Executable behind it."""

    index: int
    guard: Guard
    program: KernelProgram
    executable: Any  # rlx_core.runtime.executable.Executable
    reason: str  # the failed guard of the miss that created it


def describe_args(args: Sequence[Any]) -> tuple[ArgInfo, ...]:
    """What the guards see of ``args``; raises ArgumentError for anything but arrays and buffers
    (the same rule the compiled module applies) and DTypeError for dtypes rlx does not know."""
    import numpy as np  # the CPU target runs only where numpy is present

    out = []
    for i, a in enumerate(args):
        if not isinstance(a, np.ndarray):
            try:
                memoryview(a)
            except TypeError:
                raise ArgumentError(
                    f"argument {i} is a {type(a).__name__}, not an array or buffer",
                    hint="pass numpy arrays (or objects with the buffer protocol), e.g. "
                         "np.asarray(x, np.float32)") from None
            a = np.asarray(a)  # a view of the buffer, for its dtype and flags
        out.append(ArgInfo(dtype=dt.get(a.dtype), shape=tuple(int(d) for d in a.shape),
                           contiguous=bool(a.flags.c_contiguous), aligned=bool(a.flags.aligned),
                           native=bool(a.dtype.isnative)))
    return tuple(out)


def fixed_arity(fn: Callable[..., Any]) -> int:
    """How many arguments ``fn`` always takes, or -1 (defaults, ``*args``, no signature)."""
    try:
        params = tuple(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return -1
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind not in positional or p.default is not inspect.Parameter.empty for p in params):
        return -1
    return len(params)


def host_params(lir: Graph) -> tuple[Any, ...]:
    """The graph's parameters as aligned C-contiguous numpy arrays, in ``lir.params`` order."""
    import numpy as np

    out = []
    for p in lir.params:
        data = lir.param_data.get(p.name)
        if data is None:
            raise RlxError(f"parameter {p.name} of {lir.name} has no data",
                           hint="bind weights with rlx.param(array, name) when tracing",
                           code="RLX-R011")
        arr = np.asarray(data, dtype=dt.to_numpy_name(p.type.dtype)).reshape(p.type.shape)
        out.append(np.require(arr, requirements=("C", "A")))
    return tuple(out)


def _open(path: str) -> tuple[Any, Any]:
    """(ctypes handle, extension module) of the built module at ``path``; RLX-R012 when it
    does not load."""
    from rlx_core.targets.cpu.runtime import LibraryLoadError, load_library

    try:
        # dlopen through the runtime first (it sets the OpenMP defaults before libgomp starts);
        # the import below gets the same handle
        lib = load_library(path)
    except LibraryLoadError as err:
        raise RlxError(f"cannot load the specialization cache module {path}: {err.message}",
                       hint="delete the file so that it is built again (RLX_CACHE_DIR), and "
                            "report it if the error comes back", code="RLX-R012") from None
    return lib, _load(path)


def _load(path: str) -> Any:
    """Load the extension module at ``path`` (each SCM shared object has its own file)."""
    name = scm_codegen.MODULE_NAME
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    if spec is None:
        raise RlxError(f"cannot load the specialization cache module {path}", code="RLX-R012")
    try:
        module = importlib.util.module_from_spec(spec)  # dlopen happens here
        loader.exec_module(module)
    except ImportError as err:  # a truncated or foreign file where the built module should be
        raise RlxError(f"cannot load the specialization cache module {path}: {err}",
                       hint="delete the file so that it is built again (RLX_CACHE_DIR), and "
                            "report it if the error comes back", code="RLX-R012") from err
    return module


class SpecializationCache:
    """The ordered specializations of one jitted function on the CPU target, and its module.

    ``install(call)`` is given the compiled entry after every rebuild; the JitFunction makes it
    its ``__call__`` so that a call goes straight into C.
    """

    def __init__(self, fn: Callable[..., Any], options: dict[str, Any], max_events: int,
                 install: Callable[[Any], None]):
        self.fn = fn
        self.options = dict(options)
        self.max_events = max_events
        self._install = install
        self.specializations: list[Specialization] = []
        self.module_path: str = ""
        self.builds = 0  # module builds in this process (each a disk-cache lookup at least)
        self._events: list[CacheEvent] = []
        # hits per specialization counted outside the live module (retired modules, lookup)
        self._flushed_hits: list[int] = []
        self._misses = 0
        self._state: Any = None
        self._module: Any = None
        self._lib: Any = None  # the live module's ctypes handle (its thread setters)
        self._call_uncounted: Any = None
        self._lock = threading.RLock()  # a compile can release the GIL; one miss at a time
        # once a specialization exists, a miss calls this instead of compiling another
        # (compile_step's training step: its Executable converts or refuses, typed)
        self.fallback: Callable[..., Any] | None = None

    # -- records ---------------------------------------------------------------------------
    def _flush(self) -> None:
        """Move the module's hit log into ``_events`` (it stays capped at ``max_events``)."""
        if self._state is None:
            return
        self._events.extend(CacheEvent(True, k) for k in self._state.take_log())
        self._state.set_log_capacity(max(0, self.max_events - len(self._events)))

    def events(self) -> list[CacheEvent]:
        self._flush()
        return list(self._events)

    def hits_per_specialization(self) -> list[int]:
        """Hits of each specialization: the live module's counters plus those counted before."""
        counts = self._flushed_hits + [0] * (len(self.specializations) - len(self._flushed_hits))
        for k, n in enumerate(self._state.hits() if self._state is not None else ()):
            counts[k] += n
        return counts

    @property
    def hits(self) -> int:
        return sum(self.hits_per_specialization())

    @property
    def misses(self) -> int:
        return self._misses

    def _log(self, event: CacheEvent) -> None:
        self._flush()
        if len(self._events) < self.max_events:
            self._events.append(event)
        if self._state is not None:
            self._state.set_log_capacity(max(0, self.max_events - len(self._events)))

    # -- lookup ----------------------------------------------------------------------------
    def match(self, infos: Sequence[ArgInfo]) -> int:
        """Index of the first specialization whose guard ``infos`` pass, or -1."""
        for s in self.specializations:
            if s.guard.first_failure(infos) is None:
                return s.index
        return -1

    def first_failed_guard(self, infos: Sequence[ArgInfo]) -> str:
        """Why ``infos`` miss: the first failing guard term of the closest specialization (the
        one passing the most terms; the most recent among equals), e.g. ``arg 0 not contiguous``
        when only the layout differs from an existing one."""
        if not self.specializations:
            return "no specializations yet"
        best = (-1, "unknown")
        for s in self.specializations:
            passed, failure = s.guard.check(infos)
            if passed >= best[0]:
                best = (passed, failure or "unknown")
        return best[1]

    def lookup(self, args: Sequence[Any]) -> Specialization:
        """The specialization for ``args`` (compiling one on a miss), logged like a call."""
        infos = self._check_call(args)
        with self._lock:
            k = self.match(infos)
            if k >= 0:
                self._flushed_hits[k] += 1
                self._log(CacheEvent(True, k))
                return self.specializations[k]
            return self._add(infos, args)

    def _check_call(self, args: Sequence[Any]) -> tuple[ArgInfo, ...]:
        """Execution errors raise here, before anything is recorded: arguments that do not bind
        to the function's signature, and arguments that are neither arrays nor buffers."""
        try:
            sig = inspect.signature(self.fn)
        except (TypeError, ValueError):  # builtins without a signature: let tracing decide
            sig = None
        if sig is not None:
            try:
                sig.bind(*args)
            except TypeError as err:
                raise ArgumentError(f"{getattr(self.fn, '__name__', 'function')}: {err}",
                                    hint="call it with the arguments of the jitted function"
                                    ) from None
        return describe_args(args)

    def on_miss(self, *args: Any, **kwargs: Any) -> Any:
        """Called by the module when no guard passes (and before the first module exists),
        and for every call with keyword arguments, which are bound to positions here."""
        if kwargs:
            args = positional_args(self.fn, args, kwargs)
        if self.fallback is not None and self.specializations:
            return self.fallback(*args)
        infos = self._check_call(args)
        with self._lock:
            k = self.match(infos)
            if k >= 0:  # another thread added it while this call waited for the lock
                self._flushed_hits[k] += 1
                self._log(CacheEvent(True, k))
            else:
                self._add(infos, args)
            return self._call_uncounted(*args)

    def _on_error(self, spec: int, kernel: int, value: int, size: int) -> None:
        """Called by the module when a kernel reported a runtime error: raise it, typed."""
        from rlx_core.targets.numpy_ref.semantics import IndexOutOfRangeError

        # the same error (and wording) as the CPU target's ctypes runtime
        names = self.specializations[spec].program.kernel_names
        name = names[kernel] if 0 <= kernel < len(names) else str(kernel + 1)
        raise IndexOutOfRangeError(
            f"kernel {name}: index {value} is out of range for an axis of size {size} "
            f"(specialization {spec} of {getattr(self.fn, '__name__', 'function')})",
            hint=f"indices must lie in [{-size}, {size - 1}]")

    # -- adding a specialization -----------------------------------------------------------
    def _add(self, infos: tuple[ArgInfo, ...], args: Sequence[Any]) -> Specialization:
        reason = self.first_failed_guard(infos)
        dense = all(a.dense for a in infos)
        guard = Guard(TARGET, tuple(ArgGuard(a.dtype, a.shape, dense) for a in infos))
        # a layout-only miss reuses the kernels of the specialization with the same types
        same_types = next((s for s in self.specializations
                           if [a.type for a in s.guard.args] == [a.type for a in guard.args]),
                          None)
        if same_types is not None:
            program, exe = same_types.program, same_types.executable
        else:
            program, exe = self._compile(args)
        spec = Specialization(len(self.specializations), guard, program, exe, reason)
        self._rebuild(self.specializations + [spec])
        # counted once it exists: a compile that fails is an error, not a miss
        self._misses += 1
        self._log(CacheEvent(False, spec.index, reason))
        return spec

    def _compile(self, args: Sequence[Any]) -> tuple[KernelProgram, Any]:
        return compile_program(self.fn, args, self.options)

    def _rebuild(self, specs: list[Specialization]) -> None:
        entries = tuple(
            scm_codegen.SpecEntry(
                prefix=s.program.prefix, error_fn=s.program.error_fn,
                inputs=tuple(a.type for a in s.guard.args), outputs=s.program.outputs,
                n_params=len(s.program.params), arena_bytes=s.program.arena_bytes,
                any_layout=not all(a.dense for a in s.guard.args), aliases=s.program.aliases)
            for s in specs)
        kernels = {s.program.prefix: s.program for s in specs}
        path = build_extension(scm_codegen.runtime_source(scm_codegen.MODULE_NAME),
                               scm_codegen.render_table(entries, fixed_arity(self.fn)),
                               tuple(kernels.values()))
        from rlx_core.targets.cpu import threads

        try:
            lib, module = _open(path)
        except RlxError as err:  # verified but unloadable (a foreign file): build it once more
            from rlx_core.targets.verified_files import quarantine

            quarantine(Path(path), err.message)
            path = build_extension(scm_codegen.runtime_source(scm_codegen.MODULE_NAME),
                                   scm_codegen.render_table(entries, fixed_arity(self.fn)),
                                   tuple(kernels.values()))
            lib, module = _open(path)
        for prefix in kernels:
            threads.attach(lib, f"{prefix}_threads")  # the team size; OpenBLAS on one thread
        if self._lib is not None and self._lib is not lib:
            threads.detach(self._lib)  # the module this one retires: its setters go too
        self._module, self._lib = module, lib
        self._flush()
        old_hits = self.hits_per_specialization()
        call, call_uncounted, state = module.create(
            tuple(s.program.params for s in specs), self.on_miss, ArgumentError, self._on_error,
            max(0, self.max_events - len(self._events)))
        self.specializations = specs
        self._flushed_hits = old_hits + [0] * (len(specs) - len(old_hits))
        self._state, self._call_uncounted = state, call_uncounted
        self.module_path = path
        self.builds += 1
        self._install(call)

    def module_info(self) -> dict[str, int]:
        """What the loaded module's table says: ABI, number of specializations, arity."""
        return dict(self._module.table_info()) if self._module is not None else {}

    def info(self) -> dict[str, Any]:
        """A JSON-ready summary for the explorer: specializations, guards, hits, the module."""
        hits = self.hits_per_specialization()
        return {
            "target": TARGET,
            "module": self.module_path,
            "builds": self.builds,
            "hits": self.hits,
            "misses": self.misses,
            "specializations": [
                {"index": s.index, "guard": s.guard.describe(), "kernel": s.program.prefix,
                 "created_by": s.reason, "hits": hits[s.index],
                 "arena_bytes": s.program.arena_bytes}
                for s in self.specializations],
        }


def program_prefix(lir_text: str) -> str:
    """The C entry prefix of a program: named by the IR it runs (printed without source
    file:line), so equal programs share it."""
    return "rlx_k" + hashlib.sha256(lir_text.encode()).hexdigest()[:16]


def compile_program(fn: Callable[..., Any], args: Sequence[Any],
                    options: dict[str, Any]) -> tuple[KernelProgram, Any]:
    """Trace and lower ``fn`` at ``args`` for the CPU target and render its C program.

    Returns the program and an Executable for the explorer and ``JitFunction.lookup``; that
    Executable builds the CPU target's own (ctypes) program only if it is called directly, so a
    miss compiles one program, the one that goes into the module.
    """
    import numpy as np

    from rlx_core.api import lower
    from rlx_core.ir.printer import print_graph
    from rlx_core.runtime.donation import (
        donated_positions,
        inplace_outputs,
        inplace_pairs,
        refuse,
    )
    from rlx_core.runtime.executable import Executable
    from rlx_core.runtime.memory_budget import check_budget, resolve_limit
    from rlx_core.targets.base import InPlaceRefused, Program
    from rlx_core.targets.cpu import kernel_library
    from rlx_core.targets.cpu.renderer import render_program
    from rlx_core.targets.registry import get_target

    options = dict(options)
    donate = donated_positions(options.pop("donate", ()), len(args))
    examples = [np.asarray(a) for a in args]
    hir, mir, lir, ctx = lower(fn, *examples, target=TARGET, **options)
    # the module's hits never enter Python: the budget is checked once, for the specialization
    check_budget(lir, resolve_limit(options.get("memory_limit")), target=TARGET)
    aliases = inplace_outputs(lir, donate, TARGET)
    # the LIR's text without file:line names the program: the same function traced a few
    # lines lower (a notebook cell edited above it) is the same program, built once
    text = print_graph(lir, locations=False)
    while True:
        # the in-place pairs change the kernels' declarations: part of the program's name
        prefix = program_prefix(text + (
            f"\ninplace {aliases}" if max(aliases, default=-1) >= 0 else ""))
        try:
            cprog = render_program(lir, prefix, in_place=inplace_pairs(lir, aliases),
                                   link_prebuilt=kernel_library.enabled())
            break
        except InPlaceRefused as e:  # a GEMM that cannot store over W: a fresh output
            aliases = refuse(aliases, lir, e.output)
    program = KernelProgram(
        prefix=cprog.prefix, error_fn=cprog.error_fn, source=cprog.source,
        include_dirs=tuple(cprog.include_dirs), library_dirs=tuple(cprog.library_dirs),
        libraries=tuple(cprog.libraries), kernel_names=tuple(k.name for k in lir.kernels),
        outputs=tuple(cprog.output_types), arena_bytes=int(cprog.arena_bytes),
        params=host_params(lir), aliases=aliases,
        kernel_libraries=tuple(cprog.kernel_libraries))
    built: list[Program] = []

    def run(inputs: Sequence[Any], params: dict[str, Any]) -> list[Any]:
        if not built:
            built.append(get_target(TARGET).build(lir, ctx.options))
        return built[0].run(inputs, params)

    sources = dict(cprog.kernel_sources) or {prefix: cprog.source}
    trace = ctx.trace
    if trace is not None:
        trace.kernels = dict(sources)
    exe = Executable(hir.name, TARGET, hir, mir, lir, Program(run, sources, {"scm": True}),
                     trace if trace is not None else _empty_trace(hir.name),
                     dict(hir.param_data), memory_limit=options.get("memory_limit"))
    return program, exe


def _empty_trace(name: str) -> Any:
    from rlx_core.compile_trace import CompileTrace

    return CompileTrace(function=name, target=TARGET)


def build_extension(runtime_src: str, table_src: str, kernels: Sequence[KernelProgram]) -> str:
    """Compile (or find in the disk cache) every unit and link the module; returns its path.

    Each unit is its own object file, cached by content hash (the CPU target's
    ``cached_build.compile_object``), so a rebuild after a miss compiles only the new table and
    the new kernel; the shared object is cached by the hash of its objects, so a second process
    with the same cache directory compiles and links nothing.
    """
    import sysconfig

    import numpy as np

    from rlx_core.targets.cpu import cached_build, kernel_library, toolchain

    comp = toolchain.find_compiler()
    py_incs = (sysconfig.get_paths()["include"], np.get_include())
    # the prebuilt kernels (hidden symbols) once for all the module's programs: started first,
    # so on a miss they compile while the units do
    later = [kernel_library.pending(name, comp)
             for name in dict.fromkeys(n for k in kernels for n in k.kernel_libraries)]
    for lib in later:
        lib.start()
    lib_dirs: dict[str, None] = {}
    libs: dict[str, None] = {}
    try:
        objs = [cached_build.compile_object(runtime_src, include_dirs=py_incs, compiler=comp),
                cached_build.compile_object(table_src, compiler=comp)]
        for k in kernels:
            objs.append(cached_build.compile_object(k.source, include_dirs=k.include_dirs,
                                                    compiler=comp))
            lib_dirs.update(dict.fromkeys(k.library_dirs))
            libs.update(dict.fromkeys(k.libraries))
        objs += [lib.result() for lib in later]
    except BaseException:  # a failed or interrupted unit: stop the library's compile too
        for lib in later:
            lib.cancel()
        raise
    built = cached_build.link_shared(tuple(objs), library_dirs=tuple(lib_dirs),
                                     libraries=tuple(libs),
                                     suffix=sysconfig.get_config_var("EXT_SUFFIX") or ".so",
                                     compiler=comp)
    return str(built.path)

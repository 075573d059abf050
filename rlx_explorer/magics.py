"""IPython magics: ``%load_ext rlx_explorer``, then

    %%rlx [--target T[,T...]] [--fn NAME] [--dtype D] [--policy P] [--view V] [--html OUT]
    <cell>
    %%rlx --ranks N [--micro M] [--schedule 1f1b|gpipe]
    <cell>

compiles ONE function for the chosen targets and shows its explorer: the one ``--fn`` names;
else the call in the cell's last expression (``f(x, w)`` compiles ``f`` at those arguments);
else ``model``; else the only function the cell defines. Inputs come from that call, or from
``example_inputs()``; a line above the explorer says which function and which inputs were used.
With ``--ranks N`` it shows the static distributed view instead, without launching ranks:
the tensor-parallel partition of the function for N ranks (Megatron pairs found by
``auto_plan``) and the pipeline schedule of N stages over M micro-batches as a timeline.
``%rlx explain EXPR`` (EXPR a call such as ``f(x, w)``) shows the dispatch view for every
target. A legalization failure shows the failure view; a bad flag or an unknown target shows
the same message as the ``rlx`` command line, never a traceback.
"""

from __future__ import annotations

import argparse
import ast
import html
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlx_core.errors import RlxError
from rlx_explorer.session import VIEWS


class MagicUsageError(RlxError):
    """A ``%%rlx`` cell that cannot be explored as written."""

    code = "RLX-E101"


FLAGS = ("flags: --target T[,T] --fn NAME --dtype D --policy P --view V --html OUT "
         "--devices --no-devices --calibrate --ranks N [--micro M --schedule 1f1b|gpipe "
         "--timeline RUN.json]")


class CellTargetError(MagicUsageError):
    """``%%rlx`` found no single function to compile (or ``--fn`` names none)."""

    code = "RLX-E102"


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="%%rlx", add_help=False, exit_on_error=False)
    ap.add_argument("--target", default="numpy")
    ap.add_argument("--fn", default=None)
    ap.add_argument("--dtype", default=None)
    ap.add_argument("--policy", default=None)
    ap.add_argument("--view", default=None, choices=VIEWS)
    ap.add_argument("--html", default=None)
    ap.add_argument("--devices", dest="devices", action="store_true", default=None)
    ap.add_argument("--no-devices", dest="devices", action="store_false")
    ap.add_argument("--calibrate", action="store_true")
    ap.add_argument("--ranks", type=int, default=None)
    ap.add_argument("--micro", type=int, default=4)
    ap.add_argument("--schedule", default="1f1b", choices=("1f1b", "gpipe"))
    ap.add_argument("--timeline", default=None)  # a run's measured timeline (ranks view)
    return ap


def parse_flags(line: str) -> argparse.Namespace:
    try:
        args, extra = _parser().parse_known_args(shlex.split(line))
    except (argparse.ArgumentError, ValueError) as err:
        raise MagicUsageError(f"%%rlx: {err}", hint=FLAGS) from None
    if extra:
        raise MagicUsageError(f"%%rlx: unknown argument(s) {' '.join(extra)}",
                              hint=FLAGS)
    return args


def cast_inputs(inputs: tuple[Any, ...], dtype: str | None) -> tuple[Any, ...]:
    """Floating example inputs cast to ``dtype`` (integer inputs such as ids are kept)."""
    if not dtype:
        return inputs
    import numpy as np

    from rlx_core.ir import dtypes as dt

    want = dt.to_numpy_name(dt.get(dtype))
    out = []
    for a in inputs:
        arr = np.asarray(a)
        out.append(arr.astype(want) if arr.dtype.kind == "f" else a)
    return tuple(out)


def _is_function(val: Any) -> bool:
    """A plain Python function or an ``@rlx.jit`` one (not a class, builtin or bound method)."""
    import types

    import rlx_core as rlx

    return isinstance(val, types.FunctionType | rlx.JitFunction)


def cell_functions(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, Callable]]:
    """Functions the cell defined or redefined, ``model`` first; ``example_inputs`` excluded."""
    found = [(name, val) for name, val in after.items()
             if not name.startswith("_") and name != "example_inputs" and _is_function(val)
             and before.get(name) is not val]
    found.sort(key=lambda item: item[0] != "model")
    return found


def check_targets(spec: str) -> tuple[str, ...]:
    """The comma list of targets, each one registered (else the CLI's RLX-X002 message)."""
    from rlx_core.targets.registry import get_target, target_names

    names = tuple(t.strip() for t in spec.split(",") if t.strip())
    for name in names:
        if name not in target_names():
            get_target(name)  # raises UnknownTargetError: "unknown target 'gpu'" + the list
    return names


def last_call(cell: str) -> ast.Call | None:
    """The cell's last statement when it is a call expression with positional arguments."""
    try:
        body = ast.parse(cell).body
    except SyntaxError:
        return None
    if body and isinstance(body[-1], ast.Expr) and isinstance(body[-1].value, ast.Call) \
            and not body[-1].value.keywords:
        return body[-1].value
    return None


def _describe(inputs: tuple[Any, ...]) -> str:
    from rlx_core.frontend.tracer import type_of_example

    parts = []
    for a in inputs:
        try:
            parts.append(str(type_of_example(a)))
        except RlxError:
            parts.append(type(a).__name__)
    return ", ".join(parts) or "no inputs"


@dataclass
class Choice:
    """What ``%%rlx`` compiles: the function, its name, the inputs and where they came from."""

    name: str
    fn: Callable[..., Any]
    inputs: tuple[Any, ...]
    origin: str

    def note(self) -> str:
        return f"%%rlx: compiled {self.name} at {self.origin}: {_describe(self.inputs)}"


def choose(args: argparse.Namespace, call: ast.Call | None, before: dict[str, Any],
           ns: dict[str, Any]) -> Choice:
    """Pick the one function to compile and its example inputs (see the module docstring);
    ``call`` is the cell's last line when that is a call of a function in ``ns``."""
    if args.fn is None and call is not None:
        fn = _eval(ast.Expression(call.func), ns)
        argv = tuple(_eval(ast.Expression(ast.Tuple(call.args, ast.Load())), ns))
        return Choice(ast.unparse(call.func), fn, argv,
                      f"the arguments of the cell's last line, {ast.unparse(call)}")
    defined = cell_functions(before, ns)
    if args.fn is not None:
        fn = ns.get(args.fn)
        if not _is_function(fn):
            raise CellTargetError(f"%%rlx --fn {args.fn}: no function {args.fn!r} in the notebook",
                                  hint="defined by this cell: " + (", ".join(
                                      n for n, _ in defined) or "no function"))
        name = args.fn
    elif any(n == "model" for n, _ in defined) or (not defined and _is_function(ns.get("model"))):
        name, fn = "model", ns["model"]
    elif len(defined) == 1:
        name, fn = defined[0]
    elif not defined:
        raise MagicUsageError("%%rlx: the cell defines no function to compile",
                              hint="define model(...) (and example_inputs()) in the cell, or end "
                                   "the cell with a call such as f(x, w)")
    else:
        raise CellTargetError(
            f"%%rlx: the cell defines {len(defined)} functions "
            f"({', '.join(n for n, _ in defined)}) and none is named model",
            hint="say which one: %%rlx --fn NAME, or end the cell with a call such as f(x, w)")
    make_inputs = ns.get("example_inputs")
    if not callable(make_inputs):
        raise MagicUsageError("%%rlx: no example_inputs() in the cell or the notebook",
                              hint="define example_inputs() returning a tuple of arrays, or end "
                                   f"the cell with a call such as {name}(x)")
    where = "this cell" if before.get("example_inputs") is not make_inputs else "an earlier cell"
    inputs = make_inputs()
    return Choice(name, fn, inputs if isinstance(inputs, tuple) else (inputs,),
                  f"example_inputs() from {where}")


def _eval(expr: ast.Expression, ns: dict[str, Any]) -> Any:
    code = compile(ast.fix_missing_locations(expr), "<rlx>", "eval")
    return eval(code, ns)  # noqa: S307 - the user's own cell


def _show(obj: Any) -> None:
    from IPython.display import display

    display(obj)


def _show_error(err: RlxError) -> None:
    from IPython.display import HTML

    _show(HTML(f"<pre style='color:#b91c1c'>{html.escape(str(err))}</pre>"))


def run_cell(line: str, cell: str, ns: dict[str, Any], shell: Any = None) -> list[Any]:
    """Execute the cell in ``ns`` and explore the one function it names (see ``choose``);
    returns the explorers shown."""
    from rlx_explorer.explorer import explore

    args = parse_flags(line)
    targets = check_targets(args.target)
    before = dict(ns)
    source = shell.transform_cell(cell) if shell is not None else cell
    call = last_call(source) if args.fn is None else None
    if call is not None:  # run all but that call: it is what gets compiled, not executed
        lines, call_line = source.splitlines(), call.lineno
        if not _run("\n".join(lines[:call.lineno - 1]), ns, shell):
            return []
        if not _is_function(_try_eval(call.func, ns)):
            call = None  # a print(...) or plot(...) at the end: run it as the cell would
            if not _run("\n".join(lines[call_line - 1:]), ns, shell):
                return []
    elif not _run(source, ns, shell):
        return []
    chosen = choose(args, call, before, ns)
    inputs = cast_inputs(chosen.inputs, args.dtype)
    if args.ranks is not None:
        from IPython.display import HTML

        _show_note(chosen.note())
        _show(HTML(ranks_view(chosen.fn, inputs, args.ranks, args.micro, args.schedule,
                              chosen.name, timeline=args.timeline)))
        return []
    status = _status()
    try:
        ex = explore(chosen.fn, *inputs, targets=targets, policy=args.policy,
                     view=args.view or "graph", title=chosen.name, progress=status,
                     devices=args.devices, calibrate=args.calibrate)
        if args.view is None and ex.bundle["failures"]:
            ex.bundle["view"] = "failures"  # a failure is the first thing to see
    finally:
        if status is not None:
            status.close()
    if args.html:
        ex.save_html(args.html)
    _show_note(chosen.note())
    _show(ex.widget())
    return [ex]


def ranks_view(fn: Callable[..., Any], inputs: tuple[Any, ...], ranks: int, micro: int,
               kind: str, name: str, timeline: str | None = None) -> str:
    """``%%rlx --ranks N``: the static distributed view of ``fn`` as HTML (no MPI); with
    ``--timeline RUN.json`` (written by a real run, rlx_core/distributed/timeline.py) its
    measured pipeline timeline next to the simulated one."""
    import rlx_core as rlx
    from rlx_core.distributed.tensor_parallel import auto_plan, partition
    from rlx_explorer.views.distributed import distributed_html, partition_view, simulate_schedule

    if not (isinstance(ranks, int) and ranks >= 1 and micro >= 1):
        raise MagicUsageError(f"%%rlx --ranks {ranks} --micro {micro}: both must be >= 1",
                              hint=FLAGS)
    g = rlx.trace(fn, *inputs)
    plan = auto_plan(g)
    view = (partition_view([partition(g, plan, r, ranks) for r in range(ranks)])
            if plan.column else None)
    events = simulate_schedule(kind, ranks, micro)
    note = (f"{ranks} stages, {micro} micro-batches, {kind}, simulated (forward 1, backward 2 "
            f"units); ideal (p-1)/(m+p-1) = {(ranks - 1) / (micro + ranks - 1):.3f}")
    title = f"{name} on {ranks} ranks" + ("" if view else " (no Megatron layer pair to split)")
    measured = None
    if timeline is not None:
        from rlx_core.distributed.timeline import read_timeline

        try:
            measured = read_timeline(timeline)
        except (OSError, ValueError) as err:
            raise MagicUsageError(f"%%rlx --timeline {timeline}: {err}",
                                  hint="pass the file a run wrote with RLX_DIST_TIMELINE=FILE "
                                       "(or PipelineStep(timeline=FILE))") from None
    return distributed_html(view, events, title=title, pipeline_note=note, measured=measured)


def _status() -> Any:
    """The in-place progress line, in a kernel (None elsewhere: tests, plain Python)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    if get_ipython() is None:
        return None
    from rlx_explorer.progress import NotebookStatus

    return NotebookStatus()


def _run(code: str, ns: dict[str, Any], shell: Any) -> bool:
    """Execute ``code`` as the cell would; False when it raised (IPython showed the error)."""
    if shell is not None:
        return bool(shell.run_cell(code, store_history=False).success)
    exec(compile(code, "<rlx-cell>", "exec"), ns)  # noqa: S102 - the user's own cell
    return True


def _try_eval(expr: ast.expr, ns: dict[str, Any]) -> Any:
    try:
        return _eval(ast.Expression(expr), ns)
    except Exception:  # noqa: BLE001 - not a name of the notebook: then it is no function of it
        return None


@dataclass(frozen=True)
class Note:
    """The "compiled f at ..." line, readable in text-only frontends too."""

    data: str

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.data,
                "text/html": f"<div style='font:12px monospace;color:#475569'>"
                             f"{html.escape(self.data)}</div>"}


def _show_note(text: str) -> None:
    _show(Note(text))


def run_explain(expr: str, ns: dict[str, Any]) -> Any:
    """``%rlx explain f(x, w)``: the dispatch view of ``f`` at those arguments, every target."""
    from rlx_explorer.explorer import explore

    try:
        call = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError as err:
        raise MagicUsageError(f"%rlx explain: cannot parse {expr!r}: {err.msg}",
                              hint="write a call, e.g. %rlx explain model(x, w)") from None
    if not isinstance(call, ast.Call) or call.keywords:
        raise MagicUsageError("%rlx explain takes one call with positional arguments",
                              hint="e.g. %rlx explain model(x, w)")
    fn = eval(compile(ast.Expression(call.func), "<rlx>", "eval"), ns)  # noqa: S307
    args_expr = ast.fix_missing_locations(ast.Expression(ast.Tuple(call.args, ast.Load())))
    argv = tuple(eval(compile(args_expr, "<rlx>", "eval"), ns))  # noqa: S307 (handles *args)
    # compile on the reference only: the matrix probes every target with a capability table
    ex = explore(fn, *argv, targets=("numpy",), view="dispatch", run=False,
                 title=ast.unparse(call.func))
    _show(ex.widget())
    return ex


def register(ipython: Any) -> None:
    def rlx(line: str, cell: str | None = None) -> None:
        try:
            if cell is None:
                head, _, rest = line.strip().partition(" ")
                if head != "explain":
                    raise MagicUsageError(f"%rlx: unknown subcommand {head!r}",
                                          hint="%rlx explain EXPR, or use %%rlx as a cell magic")
                run_explain(rest, ipython.user_ns)
            else:
                run_cell(line, cell, ipython.user_ns, ipython)
        except RlxError as err:  # compile errors are shown, not raised as tracebacks
            _show_error(err)

    ipython.register_magic_function(rlx, magic_kind="line_cell", magic_name="rlx")

"""IPython magics: ``%load_ext rlx_explorer``, then

    %%rlx [--target T[,T...]] [--dtype D] [--policy P] [--view V] [--html OUT]
    <cell defining model(...) and example_inputs(), or other functions>

compiles every function the cell defines (at ``example_inputs()``) for the chosen targets and
shows the explorer; ``%rlx explain EXPR`` (EXPR a call such as ``f(x, w)``) shows the dispatch
view for every target. A legalization failure shows the failure view, never a traceback.
"""

from __future__ import annotations

import argparse
import ast
import html
import shlex
from collections.abc import Callable
from typing import Any

from rlx_core.errors import RlxError
from rlx_explorer.session import VIEWS


class MagicUsageError(RlxError):
    """A ``%%rlx`` cell that cannot be explored as written."""

    code = "RLX-E101"


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="%%rlx", add_help=False, exit_on_error=False)
    ap.add_argument("--target", default="numpy")
    ap.add_argument("--dtype", default=None)
    ap.add_argument("--policy", default=None)
    ap.add_argument("--view", default=None, choices=VIEWS)
    ap.add_argument("--html", default=None)
    return ap


def parse_flags(line: str) -> argparse.Namespace:
    try:
        args, extra = _parser().parse_known_args(shlex.split(line))
    except (argparse.ArgumentError, ValueError) as err:
        raise MagicUsageError(f"%%rlx: {err}", hint="flags: --target T[,T] --dtype D "
                              "--policy P --view V --html OUT") from None
    if extra:
        raise MagicUsageError(f"%%rlx: unknown argument(s) {' '.join(extra)}",
                              hint="flags: --target T[,T] --dtype D --policy P --view V")
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


def cell_functions(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, Callable]]:
    """Functions the cell defined or redefined, ``model`` first; ``example_inputs`` excluded."""
    import rlx_core as rlx

    found = []
    for name, val in after.items():
        if name.startswith("_") or name == "example_inputs":
            continue
        if (callable(val) and (hasattr(val, "__code__") or isinstance(val, rlx.JitFunction))
                and before.get(name) is not val):
            found.append((name, val))
    found.sort(key=lambda item: item[0] != "model")
    return found


def _show(obj: Any) -> None:
    from IPython.display import display

    display(obj)


def _show_error(err: RlxError) -> None:
    from IPython.display import HTML

    _show(HTML(f"<pre style='color:#b91c1c'>{html.escape(str(err))}</pre>"))


def run_cell(line: str, cell: str, ns: dict[str, Any], shell: Any = None) -> list[Any]:
    """Execute the cell in ``ns`` and explore what it defined; returns the explorers shown."""
    from rlx_explorer.explorer import explore

    args = parse_flags(line)
    before = dict(ns)
    if shell is not None:
        result = shell.run_cell(cell, store_history=False)
        if not result.success:
            return []
    else:
        exec(compile(cell, "<rlx-cell>", "exec"), ns)  # noqa: S102 - the user's own cell
    fns = cell_functions(before, ns)
    make_inputs = ns.get("example_inputs")
    if not fns:
        raise MagicUsageError("%%rlx: the cell defines no function to compile",
                              hint="define model(...) (and example_inputs()) in the cell")
    if not callable(make_inputs):
        raise MagicUsageError("%%rlx: no example_inputs() in the cell or the notebook",
                              hint="define example_inputs() returning a tuple of arrays")
    inputs = make_inputs()
    inputs = cast_inputs(inputs if isinstance(inputs, tuple) else (inputs,), args.dtype)
    shown = []
    for name, fn in fns:
        ex = explore(fn, *inputs, targets=args.target, policy=args.policy,
                     view=args.view or "graph", title=name)
        if args.view is None and ex.bundle["failures"]:
            ex.bundle["view"] = "failures"  # a failure is the first thing to see
        if args.html:
            ex.save_html(args.html if len(fns) == 1 else f"{name}-{args.html}")
        _show(ex.widget())
        shown.append(ex)
    return shown


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

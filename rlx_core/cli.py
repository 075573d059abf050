"""The ``rlx`` command line: compile / explain / run model files, list targets, the tour."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from rlx_core.errors import RlxError

REPO_ROOT = Path(__file__).resolve().parent.parent
TOUR_MODEL = REPO_ROOT / "examples" / "models" / "bert_layer.py"


class ModelFileError(RlxError):
    """A model file that does not follow the convention (``model`` + ``example_inputs``)."""

    code = "RLX-C001"


class ModelImportError(ModelFileError):
    """Importing a model file failed: a syntax error in it, or an exception its top level
    raised (a missing module, a bad path); the message names the file and line."""

    code = "RLX-C002"


class OutputPathError(RlxError):
    """A file the CLI was asked to write (``--html OUT``) cannot be written there."""

    code = "RLX-C003"


def _exec_model(module: ModuleType, loader: Any, p: Path) -> None:
    """Run the model file's top level; its own failures become ModelImportError (no
    traceback through rlx), pointing at the file and line."""
    import traceback

    try:
        loader.exec_module(module)
    except SyntaxError as err:
        text = (err.text or "").rstrip("\n")
        caret = f"\n    {text}\n    {' ' * max(0, (err.offset or 1) - 1)}^" if text else ""
        raise ModelImportError(f"{p}:{err.lineno}: syntax error: {err.msg}{caret}",
                               hint="fix the Python syntax at that line") from None
    except Exception as err:  # the file's own code failed at import time
        frames = [f for f in traceback.extract_tb(err.__traceback__)
                  if Path(f.filename).resolve() == p.resolve()]
        where = f"{p}:{frames[-1].lineno}" if frames else str(p)
        raise ModelImportError(f"{where}: importing the model file raised "
                               f"{type(err).__name__}: {err}",
                               hint="fix the model file's top-level code (run it with "
                                    "`python FILE` to see the full traceback)") from None


def _check_output(path: str | Path) -> Path:
    """The path of a file the CLI will write, checked before any work is done."""
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        raise OutputPathError(f"cannot write {p}: the folder {folder} does not exist",
                              hint=f"create it first (mkdir -p {folder}) or choose another path")
    if p.is_dir():
        raise OutputPathError(f"cannot write {p}: it is a folder",
                              hint="give a file name, e.g. explorer.html")
    return p


def _save_html(explorer: Any, path: str | Path) -> Path:
    try:
        return explorer.save_html(path)
    except OSError as err:
        raise OutputPathError(f"cannot write {path}: {err.strerror or err}",
                              hint="choose a writable path") from None


def load_model_file(path: str | Path) -> tuple[Any, tuple[Any, ...], ModuleType]:
    """Import a model file; return (model function, example inputs, module)."""
    p = Path(path)
    if not p.is_file():
        raise ModelFileError(f"no such model file: {p}", hint="pass a path to a .py file")
    spec = importlib.util.spec_from_file_location(f"rlx_model_{p.stem}", p)
    if spec is None or spec.loader is None:
        raise ModelFileError(f"cannot import {p}")
    module = importlib.util.module_from_spec(spec)
    _exec_model(module, spec.loader, p)
    fn = getattr(module, "model", None)
    make_inputs = getattr(module, "example_inputs", None)
    from rlx_core.ir.graph import Graph

    # a model may also be a graph built at import (a quantized one: examples/models/mlp_int8.py)
    if not (callable(fn) or isinstance(fn, Graph)) or not callable(make_inputs):
        raise ModelFileError(
            f"{p} must define model(*inputs) and example_inputs()",
            hint="see the README section 'Model files' (examples/models/mlp.py is one)")
    inputs = make_inputs()
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    return fn, inputs, module


def _write_project(exe: Any, out: str) -> int:
    """Copy the target's build folder (sources, firmware image / Verilog project, reports)."""
    import shutil

    folder = exe.program.info.get("project_dir")
    if not folder:
        raise OutputPathError(f"target {exe.target} builds no project folder to write",
                              hint="--out is for targets that build an image (cortex-m, fpga)")
    dest = Path(out)
    if dest.exists() and not dest.is_dir():
        raise OutputPathError(f"cannot write {dest}: it is a file", hint="give a folder")
    shutil.copytree(folder, dest, dirs_exist_ok=True)
    report = {k: v for k, v in exe.program.info.items()
              if k not in ("source", "project_dir") and isinstance(v, dict | list | str | int)}
    (dest / "rlx_build.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    for name in sorted(p.name for p in dest.iterdir()):
        print(dest / name)
    return 0


def _cmd_compile(args: argparse.Namespace) -> int:
    import rlx_core as rlx
    from rlx_core.ir.printer import print_graph

    fn, inputs, _ = load_model_file(args.file)
    if args.out:
        return _write_project(rlx.compile(fn, *inputs, target=args.target, policy=args.policy),
                              args.out)
    if args.emit == "source":
        from rlx_core.targets.registry import get_target

        tgt = get_target(args.target)
        ok, why = tgt.available()
        if not ok and hasattr(tgt, "render_sources"):
            # the source needs no toolchain: print it, and say why nothing was compiled
            _, _, lir, _ = rlx.lower(fn, *inputs, target=args.target, policy=args.policy,
                                     record=False)
            print(f"// target {args.target} is not available here ({why}): source only")
            for name, src in tgt.render_sources(lir).items():
                print(f"// ---- kernel {name} ----\n{src}")
            return 0
        exe = rlx.compile(fn, *inputs, target=args.target, policy=args.policy)
        if not exe.sources:
            print(f"# target {args.target} interprets LIR directly; it generates no source")
            print(print_graph(exe.lir), end="")
        for name, src in exe.sources.items():
            print(f"// ---- kernel {name} ----\n{src}")
        return 0
    hir, mir, lir, _ = rlx.lower(fn, *inputs, target=args.target, policy=args.policy,
                                 record=False)
    print(print_graph({"hir": hir, "mir": mir, "lir": lir}[args.emit]), end="")
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    import rlx_core as rlx

    fn, inputs, _ = load_model_file(args.file)
    targets: Any = "all" if args.target == "all" else args.target.split(",")
    report = rlx.explain(fn, *inputs, targets=targets, policy=args.policy)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(report.to_text())
    names = report.targets if targets == "all" else targets
    return 0 if all(report.compile_ready(t) for t in names) else 1


def _cmd_run(args: argparse.Namespace) -> int:
    if args.ranks is not None:  # a distributed script: mpiexec -n N python -m rlx_core.distributed
        from rlx_core.distributed.launch import launch

        return launch(args.ranks, args.file, args.script_args)
    if args.script_args:
        print(f"error: unexpected arguments {' '.join(args.script_args)} (script arguments "
              "need --ranks)", file=sys.stderr)
        return 2
    import numpy as np

    import rlx_core as rlx
    from rlx_core.api import default_jit_target

    fn, inputs, _ = load_model_file(args.file)
    target = args.target or default_jit_target()  # cpu where it builds, else the reference
    exe = rlx.compile(fn, *inputs, target=target, policy=args.policy)
    ref = rlx.compile(fn, *inputs, target="numpy")
    out, want = exe(*inputs), ref(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    wants = want if isinstance(want, tuple) else (want,)
    worst = max(float(np.max(np.abs(np.asarray(o, np.float64) - np.asarray(w, np.float64))))
                if np.size(o) else 0.0 for o, w in zip(outs, wants, strict=False))
    same = " (the reference itself: pass --target cpu to compare)" if target == "numpy" else ""
    print(f"{args.file}: ran on {target}; max |difference| vs numpy reference = {worst:.3g}{same}")
    return 0


def _cmd_targets(args: argparse.Namespace) -> int:
    import rlx_core as rlx

    print(targets_table(rlx.targets()), end="")
    return 0


def targets_table(rows: Sequence[Any]) -> str:
    """``rlx targets``: columns as wide as their widest cell, so every row lines up."""
    head = ("target", "here", "verified by")
    cells = [(t.name, "yes" if t.available else "no", t.verification) for t in rows]
    widths = [max(len(c[i]) for c in [head, *cells]) for i in range(3)]
    fmt = lambda c: " ".join(f"{v:<{w}}" for v, w in zip(c, widths, strict=True))
    lines = [f"{fmt(head)} description"]
    for t, c in zip(rows, cells, strict=True):
        lines.append(f"{fmt(c)} {t.description}" + (f"  ({t.reason})" if t.reason else ""))
    return "\n".join(lines) + "\n"


def _cmd_tour(args: argparse.Namespace) -> int:
    """Compile the tour model and show each IR level, the dispatch report and a run."""
    import rlx_core as rlx
    from rlx_core.ir.printer import print_graph

    path = Path(args.file) if args.file else TOUR_MODEL
    if args.html:
        _check_output(args.html)
    fn, inputs, _ = load_model_file(path)
    exe = rlx.compile(fn, *inputs, target="numpy")
    rule = "=" * 78
    for level, g in (("HIR", exe.hir), ("MIR", exe.mir), ("LIR", exe.lir)):
        text = print_graph(g)
        lines = text.splitlines()
        shown = lines if args.full or len(lines) <= 40 else lines[:30] + [
            f"  ... {len(lines) - 36} more lines (rlx compile {path} --emit {level.lower()}) ..."
        ] + lines[-6:]
        print(f"{rule}\n{level}: {len(g.nodes)} nodes" +
              (f", {len(g.kernels)} kernels" if g.kernels else "") + f"\n{rule}")
        print("\n".join(shown))
    if exe.lir.plan is not None:
        p = exe.lir.plan
        print(f"{rule}\narena: peak {p.peak_bytes} bytes for {len(p.slots)} buffers "
              f"(without reuse: {p.naive_bytes} bytes)")
    print(f"{rule}\ndispatch report\n{rule}")
    print(rlx.explain(fn, *inputs, targets="all").to_text())
    out = exe(*inputs)
    first = out[0] if isinstance(out, tuple) else out
    print(f"{rule}\nran on numpy: output {getattr(first, 'shape', '')} "
          f"{getattr(first, 'dtype', '')}; passes recorded: {len(exe.trace.steps)}")
    if args.html:
        _tour_html(path, args.html)
    return 0


def _cmd_peaks(args: argparse.Namespace) -> int:
    """Run the FMA and bandwidth probes once and remember them (targets/cpu/peaks.py)."""
    from rlx_core.targets.cpu.peaks import measure_peak_run

    run = measure_peak_run(args.threads)
    p = run.kept
    print(f"{p.cpu}, {p.threads} thread(s): f32 FMA {p.gflops:.1f} GFLOP/s, read "
          f"{p.gbps:.1f} GB/s, ridge {p.ridge:.1f} FLOP/byte (remembered for the explorer; "
          f"{p.describe()}); {run.summary()}")
    if not p.quiet:
        print("the machine was busy: these ceilings are below what the CPU can do; run "
              "`rlx peaks` again when it is quiet and the quiet run replaces them")
    return 0


def _cmd_explore(args: argparse.Namespace) -> int:
    """The explorer for a model file: served with Panel on 127.0.0.1, or saved as offline HTML."""
    targets = tuple(t.strip() for t in args.target.split(",") if t.strip())
    if args.html:
        from rlx_explorer import explore

        _check_output(args.html)
        fn, inputs, _ = load_model_file(args.file)
        from rlx_explorer.progress import terminal

        ex = explore(fn, *inputs, targets=targets, title=Path(args.file).name,
                     progress=terminal(), calibrate=args.calibrate)
        if ex.bundle["failures"]:
            ex.bundle["view"] = "failures"  # as %%rlx: a failure is the first thing to see
        out = _save_html(ex, args.html)
        print(f"wrote {out.resolve()}")
        return 0
    from rlx_explorer.panel_app import serve_file

    load_model_file(args.file)  # fail early, with the model-file error, before serving
    port = pick_port(args.port)
    print(f"serving the explorer for {args.file} on http://127.0.0.1:{port}/ (Ctrl-C stops)")
    serve_file(args.file, port=port, targets=targets, show=False)
    return 0


DEFAULT_PORT = 5006


class PortBusyError(RlxError):
    """``rlx explore --port N`` names a port another program listens on."""

    code = "RLX-E103"


def _port_free(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pick_port(requested: int | None) -> int:
    """The port to serve on: the one asked for (PortBusyError, naming a free one, when it is
    taken); without ``--port``, 5006 or the next free one after it."""
    if requested is not None:
        if _port_free(requested):
            return requested
        raise PortBusyError(f"port {requested} on 127.0.0.1 is in use by another program",
                            hint=f"pass another port, e.g. --port {free_port()}, or leave --port "
                                 "out to pick a free one")
    for port in range(DEFAULT_PORT, DEFAULT_PORT + 20):
        if _port_free(port):
            if port != DEFAULT_PORT:
                print(f"(port {DEFAULT_PORT} is in use; using {port})")
            return port
    return free_port()


def _cmd_lite_build(args: argparse.Namespace) -> int:
    """The JupyterLite site (binder/build_lite.py of a source checkout: it packs this tree)."""
    import runpy

    script = Path(__file__).resolve().parents[1] / "binder" / "build_lite.py"
    if not script.exists():
        raise RlxError("`rlx lite build` needs a source checkout (binder/build_lite.py); this "
                       "rlx is an installed package",
                       hint="git clone the repository, then run `rlx lite build` inside it")
    main_fn = runpy.run_path(str(script))["main"]
    return int(main_fn([*(["--out", args.out] if args.out else []),
                        *(["--force"] if args.force else [])]))


def _tour_html(path: Path, out: str) -> None:
    """The explorer page for the tour model (skipped, with a note, without the explorer extra)."""
    try:
        from rlx_explorer import explore
    except ImportError as err:
        print(f"(explorer not installed: {err}; pip install -e '.[explorer]' for {out})")
        return
    from rlx_explorer.progress import terminal

    fn, inputs, _ = load_model_file(path)
    written = _save_html(explore(fn, *inputs, targets=("numpy", "webgpu"), title=path.name,
                                 progress=terminal()), out)
    print(f"explorer: open {written.resolve()} in a browser (offline, self-contained)")


def _targets_help(what: str) -> str:
    """Help text naming every registered target (read from the registry, never hard-coded)."""
    from rlx_core.targets.registry import target_names

    return f"{what}; targets: {', '.join(target_names())} (`rlx targets` says which run here)"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="rlx", description="RLX Explorer: compile, explain and "
                                 "run tensor programs; see every IR level and dispatch decision.")
    sub = ap.add_subparsers(dest="command", required=True)

    c = sub.add_parser("compile", help="print an IR level or the generated kernels of a model file")
    c.add_argument("file")
    c.add_argument("--target", default="numpy", help=_targets_help("default numpy"))
    c.add_argument("--emit", choices=("hir", "mir", "lir", "source"), default="lir")
    c.add_argument("--policy", default=None)
    c.add_argument("--out", default=None,
                   help="write the target's project folder here (cortex-m: firmware.elf and its "
                        "sources; fpga: the Verilog project and reports)")
    c.set_defaults(run=_cmd_compile)

    e = sub.add_parser("explain", help="dispatch report; exit 1 when not compile-ready")
    e.add_argument("file")
    e.add_argument("--target", default="all",
                   help=_targets_help("a target, a comma list, or 'all' (default)"))
    e.add_argument("--json", action="store_true")
    e.add_argument("--policy", default=None)
    e.set_defaults(run=_cmd_explain)

    r = sub.add_parser("run", help="compile for a target, run, compare with the numpy reference; "
                       "with --ranks N, run a script on N MPI ranks")
    r.add_argument("file")
    r.add_argument("script_args", nargs="*",
                   help="arguments for the script (with --ranks; after -- if they start with -)")
    r.add_argument("--ranks", type=int, default=None,
                   help="run FILE on N ranks under the MPI wheel's mpiexec "
                        "(= mpiexec -n N python -m rlx_core.distributed FILE)")
    r.add_argument("--target", default=None,
                   help=_targets_help("default: cpu where it builds here, else numpy"))
    r.add_argument("--policy", default=None)
    r.set_defaults(run=_cmd_run)

    t = sub.add_parser("targets", help="list targets, whether they run here, how they are verified")
    t.set_defaults(run=_cmd_targets)

    pk = sub.add_parser("peaks", help="measure this CPU's FMA GFLOP/s and read GB/s (the "
                                      "explorer's roofline; remembered per machine)")
    pk.add_argument("--threads", type=int, default=None, help="default: every usable CPU")
    pk.set_defaults(run=_cmd_peaks)

    tour = sub.add_parser("tour", help="the guided tour on the shipped example model")
    tour.add_argument("file", nargs="?", default=None)
    tour.add_argument("--full", action="store_true", help="print whole IR listings")
    tour.add_argument("--html", default="rlx-tour.html",
                      help="also write the explorer for the tour model here ('' to skip)")
    tour.set_defaults(run=_cmd_tour)

    x = sub.add_parser("explore", help="the explorer for a model file (Panel app, or --html OUT)")
    x.add_argument("file")
    x.add_argument("--html", default=None, help="write a self-contained offline HTML file")
    x.add_argument("--target", default="numpy,cpu,webgpu",
                   help=_targets_help("comma list (default numpy,cpu,webgpu)"))
    x.add_argument("--calibrate", action="store_true",
                   help="measure the CPU peaks for the roofline first if never measured here")
    x.add_argument("--port", type=int, default=None,
                   help=f"default {DEFAULT_PORT}, or the next free port when it is in use")
    x.set_defaults(run=_cmd_explore)

    lite = sub.add_parser("lite", help="the in-browser JupyterLite site (Pyodide + WebGPU)")
    lite_sub = lite.add_subparsers(dest="lite_command", required=True)
    lb = lite_sub.add_parser("build", help="build the static site (default build/lite-site)")
    lb.add_argument("--out", default=None, help="site folder (default build/lite-site)")
    lb.add_argument("--force", action="store_true", help="rebuild even if nothing changed")
    lb.set_defaults(run=_cmd_lite_build)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except RlxError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

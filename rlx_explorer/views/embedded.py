"""Embedded views: what a cortex-m firmware or an fpga datapath costs on its device.

- cortex-m: flash and RAM against the board's budget, buffer by buffer (the ELF's functions
  and ``const`` weight arrays, the arena, the I/O buffers, the stack), the arena plan's slots,
  and instructions per inference when a run measured them (QEMU ``-icount``: instructions,
  not cycles);
- fpga: the datapath's layers (K, N, MAC lanes, cycles), cycles per inference (measured by
  Verilator when a run gave them, else the layer formula), a synthesis report when one was
  made (LUTs, FFs, BRAMs, DSPs, fmax, images/s = fmax / cycles), and a block diagram of the
  datapath (Graphviz DOT, as SVG where ``dot`` is installed).

``embedded_view(exe)`` is the JSON-able view model (``{}`` for other targets: the bundle's
``embedded`` key); ``embedded_html(view)`` a self-contained HTML page of it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from rlx_explorer.views.dot import quote, render_svg

KIND_COLOURS = {"code": "#64748b", "weights": "#2563eb", "data": "#0891b2", "arena": "#16a34a",
                "io": "#ca8a04", "stack": "#dc2626", "other": "#cbd5e1"}


def _stats(values: Sequence[int]) -> dict[str, Any]:
    vals = sorted(int(v) for v in values)
    if not vals:
        return {"count": 0}
    return {"count": len(vals), "min": vals[0], "median": vals[len(vals) // 2], "max": vals[-1]}


def cortex_m_view(info: dict[str, Any], instructions: Sequence[int] = ()) -> dict[str, Any]:
    """The memory / instruction view of a cortex-m Program's ``info`` (and a run's counts)."""
    from rlx_core.targets.cortex_m.boards import board
    from rlx_core.targets.cortex_m.elfmap import symbols

    mem = info.get("memory", {})
    syms = [s.to_json() for s in symbols(info["elf"], board(info["board"]))] if info.get(
        "elf") else []
    syms.append({"name": "(stack)", "address": 0, "size": int(mem.get("stack_bytes", 0)),
                 "region": "ram", "kind": "stack"})
    regions = {}
    for region, used, budget in (("flash", mem.get("flash_bytes", 0), mem.get("flash_budget", 0)),
                                 ("ram", mem.get("ram_bytes", 0), mem.get("ram_budget", 0))):
        listed = [s for s in syms if s["region"] == region]
        by_kind: dict[str, int] = {}
        for s in listed:
            by_kind[s["kind"]] = by_kind.get(s["kind"], 0) + s["size"]
        rest = int(used) - sum(by_kind.values())  # alignment, vector padding, unnamed data
        if rest > 0:
            by_kind["other"] = rest
        regions[region] = {"used": int(used), "budget": int(budget), "by_kind": by_kind,
                           "buffers": listed}
    return {"target": "cortex-m", "board": info.get("board", ""), "cpu": info.get("cpu", ""),
            "dsp": bool(info.get("dsp")), "regions": regions,
            "arena": {"bytes": int(mem.get("arena_bytes", 0)),
                      "naive_bytes": int(mem.get("arena_naive_bytes", 0)),
                      "slots": [{k: s[k] for k in ("value", "offset", "size", "first", "last")
                                 if k in s} for s in info.get("arena", [])]},
            "instructions": _stats(instructions),
            "instructions_note": "QEMU -icount: instructions per inference, not cycles "
                                 "(no pipeline or wait states are modelled)",
            "steps": list(info.get("steps", []))}


def _node(name: str, label: Sequence[str], attrs: str = "") -> str:
    """A DOT node whose label is ``label``'s lines."""
    return f"{name} [label={quote(chr(10).join(label))}{', ' + attrs if attrs else ''}];"


def datapath_dot(info: dict[str, Any]) -> str:
    """The fpga datapath as a Graphviz DOT block diagram: stream in, one MAC array per layer
    with its weight ROM and requantize, the buffers between them, argmax, stream out."""
    lines = ["digraph datapath {", "  rankdir=LR; node [shape=box, style=rounded, "
             "fontname=Helvetica, fontsize=10]; edge [fontname=Helvetica, fontsize=9];",
             "  " + _node("in", ["s_data[7:0]", "valid / ready"], "shape=cds")]
    layers = info.get("layers", [])
    k0 = layers[0]["k"] if layers else 0
    lines.append("  " + _node("buf0", ["input buffer", f"{k0} x 8 bit"], "shape=box3d"))
    lines.append('  in -> buf0 [label="1 byte / beat"];')
    prev = "buf0"
    for i, layer in enumerate(layers):
        k, n, p, cyc = layer["k"], layer["n"], layer["lanes"], layer["cycles"]
        lines += [
            f"  subgraph cluster_{i} {{ label={quote(f'layer {i}: {cyc} cycles')}; style=dashed;",
            "    " + _node(f"rom{i}", ["weight ROM", f"{n} x {k} int{layer.get('weight_bits', 8)}",
                                          f"({p} a word)"],
                           "shape=cylinder"),
            "    " + _node(f"mac{i}", ["MAC array", f"{p} lanes x 8x8 multiply",
                                      "i32 accumulators"],
                           'style="rounded,filled", fillcolor="#dbeafe"'),
            f"    rom{i} -> mac{i};"]
        out = f"mac{i}"
        if layer.get("requantize"):
            lines += ["    " + _node(f"rq{i}", ["requantize", "multiplier, shift",
                                              "clamp (relu)"],
                                     'style="rounded,filled", fillcolor="#dcfce7"'),
                      f"    mac{i} -> rq{i};"]
            out = f"rq{i}"
        lines.append("  }")
        lines.append(f'  {prev} -> mac{i} [label="x[k]"];')
        if i + 1 < len(layers):
            lines.append("  " + _node(f"buf{i + 1}", ["buffer", f"{n} x 8 bit"], "shape=box3d"))
            lines.append(f"  {out} -> buf{i + 1};")
            prev = f"buf{i + 1}"
        else:
            prev = out
    if info.get("argmax"):
        lines += ["  " + _node("argmax", ["argmax", "(first largest)"]), f"  {prev} -> argmax;"]
        prev = "argmax"
    lines += ["  " + _node("out", ["m_data[31:0]", "valid / ready / last"], "shape=cds"),
              f"  {prev} -> out;", "}"]
    return "\n".join(lines)


def fpga_view(info: dict[str, Any], cycles: Sequence[int] = (),
              report: Any = None) -> dict[str, Any]:
    """The resource / cycle view of an fpga Program's ``info``, a run's cycles and a
    ``synth.SynthReport`` (or its JSON)."""
    measured = _stats(cycles)
    per_image = measured["median"] if cycles else int(info.get("cycles_estimate", 0))
    rep = report.to_json() if hasattr(report, "to_json") else dict(report or {})
    if rep and per_image:
        rep["images_per_s"] = round(rep.get("fmax_mhz", 0.0) * 1e6 / per_image, 1)
    dot = datapath_dot(info)
    return {"target": "fpga", "layers": list(info.get("layers", [])),
            "parallelism": list(info.get("parallelism", [])), "argmax": bool(info.get("argmax")),
            "weight_bytes": int(info.get("weight_bytes", 0)),
            "cycles": {"per_inference": per_image,
                       "source": "verilator" if cycles else "formula", **measured},
            "resources": rep, "dot": dot, "svg": render_svg(dot) or ""}


def embedded_view(exe: Any, args: Sequence[Any] | None = None,
                  report: Any = None) -> dict[str, Any]:
    """The view of an Executable built for cortex-m or fpga (``{}`` for other targets). With
    ``args`` the program runs once (QEMU / Verilator) for a measured count."""
    target = getattr(exe, "target", "")
    if target not in ("cortex-m", "fpga"):
        return {}
    prog = exe.program
    counts: list[int] = []
    if args is not None:
        runner = getattr(prog.run_fn, "__self__", None)
        counts = list(runner.run_calls([list(args)]).instructions) if runner else []
    if target == "cortex-m":
        return cortex_m_view(prog.info, counts)
    return fpga_view(prog.info, counts, report)


def _bar(by_kind: dict[str, int], budget: int, width: int = 560) -> str:
    """One horizontal bar: the used bytes by kind, on the budget's scale (at least used)."""
    total = max(budget, sum(by_kind.values()), 1)
    x, parts = 0.0, []
    for kind, size in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        w = width * size / total
        parts.append(f"<rect x='{x:.1f}' y='0' width='{max(w, 0.5):.1f}' height='18' "
                     f"fill='{KIND_COLOURS.get(kind, '#94a3b8')}'><title>{html.escape(kind)}: "
                     f"{size} B</title></rect>")
        x += w
    return (f"<svg width='{width}' height='18' role='img' style='background:#f1f5f9'>"
            + "".join(parts) + "</svg>")


def embedded_html(view: dict[str, Any], top: int = 12) -> str:
    """A self-contained HTML fragment of ``embedded_view``'s model (escaped throughout)."""
    esc = html.escape
    if not view:
        return "<div class='rlx-embedded'>not an embedded target</div>"
    out = [f"<div class='rlx-embedded' style='font:12px sans-serif'><h3>{esc(view['target'])}"
           "</h3>"]
    if view["target"] == "cortex-m":
        out.append(f"<p>{esc(view['board'])} ({esc(view['cpu'])}, "
                   f"{'DSP' if view['dsp'] else 'no DSP'})</p>")
        for name, r in view["regions"].items():
            legend = ", ".join(f"<span style='color:{KIND_COLOURS.get(k, '#94a3b8')}'>"
                               f"{esc(k)} {v:,} B</span>" for k, v in r["by_kind"].items())
            out.append(f"<p><b>{name}</b> {r['used']:,} of {r['budget']:,} B<br>"
                       f"{_bar(r['by_kind'], r['budget'])}<br>{legend}</p>")
            rows = "".join(f"<tr><td>{esc(b['name'])}</td><td>{esc(b['kind'])}</td>"
                           f"<td style='text-align:right'>{b['size']:,}</td></tr>"
                           for b in r["buffers"][:top])
            out.append(f"<table><tr><th>buffer</th><th>kind</th><th>bytes</th></tr>{rows}"
                       "</table>")
        a = view["arena"]
        out.append(f"<p><b>arena</b> {a['bytes']:,} B (one buffer per value: "
                   f"{a['naive_bytes']:,} B), {len(a['slots'])} slots</p>")
        ins = view["instructions"]
        if ins.get("count"):
            out.append(f"<p><b>instructions / inference</b> {ins['median']:,} (median of "
                       f"{ins['count']}; {esc(view['instructions_note'])})</p>")
    else:
        c = view["cycles"]
        out.append(f"<p><b>cycles / inference</b> {c['per_inference']:,} ({esc(c['source'])})"
                   f"; lanes {view['parallelism']}; weights {view['weight_bytes']:,} B</p>")
        rep = view["resources"]
        if rep:
            keys = ("device", "luts", "ffs", "brams", "dsps", "fmax_mhz", "images_per_s")
            out.append("<table>" + "".join(f"<tr><th>{k}</th><td>{esc(str(rep.get(k, '')))}"
                                           "</td></tr>" for k in keys) + "</table>")
        else:
            out.append("<p>no synthesis report (rlx_core.targets.fpga.synth.synthesize)</p>")
        svg = view.get("svg", "")
        if svg and "<script" not in svg.lower():
            out.append(f"<div style='overflow:auto'>{svg[svg.find('<svg'):]}</div>")
        else:
            out.append(f"<pre>{esc(view['dot'])}</pre>")
    out.append("</div>")
    return "".join(out)

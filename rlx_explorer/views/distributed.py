"""Distributed view: the per-rank programs of a tensor- or data-parallel step (one colour per
rank, each inserted collective with its bytes and position) and a pipeline schedule as a
timeline with the bubble visible, as self-contained HTML (no ranks are launched).

The timeline is either measured (``rlx_core.distributed.pipeline.PipelineStep.timeline``
events of a real run) or simulated from the schedule with unit-time forwards and backwards of
``backward_cost`` units, each action starting when its input has arrived and its stage is free.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

RANK_COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04",
                "#db2777")


def partition_view(progs: Sequence[Any]) -> dict[str, Any]:
    """The view model of ``RankProgram``s (one per rank): per rank its nodes (name, op, type,
    scope) and its collectives in program order with their bytes."""
    ranks = []
    for p in progs:
        coll = {name for name, _, _ in p.collectives}
        nodes = [{"name": n.out.name, "op": n.op, "type": str(n.out.type), "scope": n.loc.scope,
                  "collective": n.out.name in coll} for n in p.graph.nodes]
        position = {n["name"]: i for i, n in enumerate(nodes)}
        ranks.append({"rank": p.rank, "graph": p.graph.name, "nodes": nodes,
                      "collectives": [{"value": v, "op": op, "bytes": b, "position": position[v]}
                                      for v, op, b in p.collectives],
                      "sharded_inputs": {k: a for k, a in p.input_axes.items() if a is not None},
                      "sharded_params": sorted(set(p.graph.param_data) & {
                          v.name for v in p.graph.params})})
    kind = getattr(progs[0], "kind", "tensor parallel") if progs else "tensor parallel"
    return {"ranks": ranks, "size": len(progs), "kind": kind}


def simulate_schedule(kind: str, stages: int, micro: int,
                      backward_cost: float = 2.0) -> list[dict[str, Any]]:
    """Start/end of every action of every stage under ``kind`` (gpipe / 1f1b), with unit-time
    forwards: the static timeline (a stage waits for its input, and for itself)."""
    from rlx_core.distributed.pipeline import schedule

    acts = [schedule(kind, s, stages, micro) for s in range(stages)]
    done: dict[tuple[str, int, int], float] = {}
    free, nxt, events = [0.0] * stages, [0] * stages, []
    while len(events) < 2 * stages * micro:
        moved = False
        for s in range(stages):
            if nxt[s] == len(acts[s]):
                continue
            k, i = acts[s][nxt[s]]
            dep = (("F", s - 1, i) if s > 0 else None) if k == "F" else (
                ("B", s + 1, i) if s < stages - 1 else ("F", s, i))
            if dep is not None and dep not in done:
                continue
            start = max(free[s], done.get(dep, 0.0) if dep else 0.0)
            end = start + (1.0 if k == "F" else backward_cost)
            done[(k, s, i)], free[s] = end, end
            events.append({"rank": s, "kind": k, "micro": i, "start": start, "end": end})
            nxt[s] += 1
            moved = True
        if not moved:  # cannot happen for these schedules; guards a future one
            raise RuntimeError(f"schedule {kind} deadlocks at {nxt}")
    return events


def bubble_of(events: Sequence[dict[str, Any]]) -> float:
    """Idle fraction of the ranks over the whole span: 1 - busy / (ranks x span)."""
    ranks = {e["rank"] for e in events}
    t0, t1 = min(e["start"] for e in events), max(e["end"] for e in events)
    busy = sum(e["end"] - e["start"] for e in events)
    return 1.0 - busy / (len(ranks) * (t1 - t0)) if t1 > t0 else 0.0


def timeline_svg(events: Sequence[dict[str, Any]], width: int = 720, row: int = 26) -> str:
    """One row per rank, forwards light and backwards dark in the rank's colour, each labelled
    with its micro-batch; the gaps are the bubble."""
    ranks = sorted({e["rank"] for e in events})
    t0, t1 = min(e["start"] for e in events), max(e["end"] for e in events)
    scale = (width - 60) / max(t1 - t0, 1e-12)
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' "
           f"height='{row * len(ranks) + 10}' font-family='monospace' font-size='11'>"]
    for y, r in enumerate(ranks):
        colour = RANK_COLOURS[r % len(RANK_COLOURS)]
        out.append(f"<text x='2' y='{y * row + 17}'>rank {r}</text>")
        for e in (e for e in events if e["rank"] == r):
            x, w = 56 + (e["start"] - t0) * scale, max((e["end"] - e["start"]) * scale, 1.0)
            opacity = "0.45" if e["kind"] == "F" else "0.9"
            out.append(f"<rect x='{x:.1f}' y='{y * row + 4}' width='{w:.1f}' height='{row - 6}' "
                       f"fill='{colour}' fill-opacity='{opacity}'><title>{e['kind']}{e['micro']}"
                       f" {e['start'] - t0:.4g}..{e['end'] - t0:.4g}</title></rect>")
            out.append(f"<text x='{x + 3:.1f}' y='{y * row + 18}' fill='white'>"
                       f"{e['kind']}{e['micro']}</text>")
    out.append("</svg>")
    return "".join(out)


def distributed_html(view: dict[str, Any] | None = None,
                     events: Sequence[dict[str, Any]] | None = None,
                     title: str = "", pipeline_note: str = "",
                     measured: dict[str, Any] | None = None) -> str:
    """The whole view as one HTML fragment; ``measured`` is a real run's timeline record
    (rlx_core/distributed/timeline.py), drawn under the static one on its own time axis."""
    esc = html.escape
    parts = [f"<div class='rlx-distributed' style='font:12px sans-serif'>"
             f"<h3 style='margin:4px 0'>{esc(title)}</h3>"]
    if view is not None:
        parts.append(f"<p>{esc(view.get('kind', 'tensor parallel'))} over {view['size']} rank(s); collectives are bold, in "
                     "program order, with the bytes each rank sends into them</p>"
                     "<div style='display:flex;gap:12px;align-items:flex-start'>")
        for r in view["ranks"]:
            colour = RANK_COLOURS[r["rank"] % len(RANK_COLOURS)]
            coll = "".join(f"<li><b>#{c['position']} {esc(c['op'])}</b> %{esc(c['value'])} "
                           f"({c['bytes']:,} B)</li>" for c in r["collectives"])
            rows = "".join(
                f"<tr style='{'font-weight:bold;background:#fef3c7' if n['collective'] else ''}'>"
                f"<td>%{esc(n['name'])}</td><td>{esc(n['op'])}</td><td>{esc(n['type'])}</td>"
                f"<td>{esc(n['scope'])}</td></tr>" for n in r["nodes"])
            parts.append(
                f"<div style='border:2px solid {colour};border-radius:4px;padding:4px;"
                f"min-width:260px'><div style='color:{colour};font-weight:bold'>rank "
                f"{r['rank']} @{esc(r['graph'])}</div><ul style='margin:2px 0'>{coll}</ul>"
                f"<details><summary>{len(r['nodes'])} nodes</summary><table>{rows}</table>"
                "</details></div>")
        parts.append("</div>")
    if events:
        parts.append(f"<p><b>static</b> pipeline: {esc(pipeline_note)}; bubble "
                     f"{bubble_of(events):.3f}</p>")
        parts.append(timeline_svg(events))
    if measured is not None:
        parts.append(measured_html(measured))
    parts.append("</div>")
    return "".join(parts)


def measured_html(record: dict[str, Any]) -> str:
    """A real run's timeline: the spans per rank (seconds), each rank's measured idle fraction
    of its step next to the ideal (p-1)/(m+p-1)."""
    per_rank = ", ".join(f"rank {r['rank']} {r['bubble']:.3f} of {r['step_s'] * 1e3:.1f} ms"
                         for r in record["ranks"])
    note = (f"<p><b>measured</b> run: {record['stages']} stages, {record['micro']} "
            f"micro-batches, {html.escape(record['schedule'])}, step {record['step']}; bubble "
            f"measured {record['bubble_measured']:.3f} ({per_rank}), ideal (p-1)/(m+p-1) = "
            f"{record['bubble_ideal']:.3f}</p>")
    return note + timeline_svg(record["events"])


__all__ = ["partition_view", "simulate_schedule", "bubble_of", "timeline_svg",
           "distributed_html", "measured_html"]

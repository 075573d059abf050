"""Converters for ONNX control flow: If, Loop and Scan, imported into a static rlx graph.

- If: a condition known at import time inlines the taken branch alone. A run-time condition
  computes both branches and selects, which is exact only when both branches give the same
  types and neither draws random numbers; otherwise the node is refused.
- Loop: unrolled; the trip count and the condition must be known at import time at every
  iteration (the number of iterations fixes the graph and the scan outputs' shapes).
- Scan: unrolled over the scan axis, whose length comes from the (static) input shapes."""

from __future__ import annotations

from typing import Any

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.frontend.onnx_import.ops.subgraph import (
    MAX_UNROLLED_NODES,
    body_size,
    check_unroll,
    has_side_effects,
    inline,
    stack,
)
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value


def _static_bool(n: NodeCtx, v: Value) -> bool | None:
    data = n.cx.static(v)
    if data is None:
        return None
    if data.size != 1:
        raise Reject(f"the condition must hold one value, got shape {list(data.shape)}")
    return bool(data.reshape(-1).tolist()[0])


def _check_outputs(n: NodeCtx, outs: list[Value], what: str) -> None:
    if len(outs) != n.n_outputs:
        raise Reject(f"{what} gives {len(outs)} outputs, the node has {n.n_outputs}")


# ---- If ------------------------------------------------------------------------------------------
def if_(n: NodeCtx) -> list[Value]:
    cond = n.x(0)
    then_g, else_g = n.attr("then_branch"), n.attr("else_branch")
    if then_g is None or else_g is None:
        raise Reject("then_branch and else_branch are required")
    taken = _static_bool(n, cond)
    if taken is not None:
        outs = inline(n, then_g if taken else else_g,
                      [], "then_branch" if taken else "else_branch")
        _check_outputs(n, outs, "the taken branch")
        return outs
    # a run-time condition: both branches run and the result is selected
    if cond.type.size != 1:
        raise Reject(f"the condition must hold one value, got {cond.type}")
    if has_side_effects(then_g) or has_side_effects(else_g):
        raise Reject("the condition is only known at run time and a branch draws random "
                     "numbers, so the branches cannot both be computed")
    a = inline(n, then_g, [], "then_branch")
    b = inline(n, else_g, [], "else_branch")
    _check_outputs(n, a, "then_branch")
    _check_outputs(n, b, "else_branch")
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x.type != y.type:
            raise Reject(f"the condition is only known at run time and output {i} differs "
                         f"between the branches ({x.type} vs {y.type}); rlx graphs are static")
    pred = n.reshape(n.cast(cond, dt.bool_), ())
    return [x if x is y else n.emit("select", [n.broadcast(pred, x.type.shape), x, y])
            for x, y in zip(a, b, strict=True)]


# ---- Loop ----------------------------------------------------------------------------------------
def loop(n: NodeCtx) -> list[Value]:
    body = n.attr("body")
    if body is None:
        raise Reject("body is required")
    m, cond = n.opt(0), n.opt(1)
    carried = list(n.inputs[2:])
    if any(v is None for v in carried):
        raise Reject("a loop-carried input is missing")
    n_carried = len(carried)
    if len(body.input) != 2 + n_carried or len(body.output) < 1 + n_carried:
        raise Reject(f"the body has {len(body.input)} inputs and {len(body.output)} outputs "
                     f"for {n_carried} loop-carried values")
    n_scan = len(body.output) - 1 - n_carried
    trip = None
    if m is not None:
        data = n.cx.static(m)
        if data is None:
            raise Reject("the trip count M is only known at run time; rlx graphs are static, "
                         "so Loop is unrolled (give M as a constant or in static_inputs=)")
        trip = int(data.reshape(-1).tolist()[0])
    go = True
    if cond is not None:
        go = _static_bool(n, cond)
        if go is None:
            raise Reject("the loop condition is only known at run time; rlx graphs are "
                         "static, so Loop is unrolled")
    cap = max(1, MAX_UNROLLED_NODES // max(1, body_size(body)))
    scans: list[list[Value]] = [[] for _ in range(n_scan)]
    i = 0
    while go and (trip is None or i < trip):
        if i >= cap:
            raise Reject(f"the loop runs past {cap} iterations; unrolling it would exceed "
                         f"{MAX_UNROLLED_NODES} nodes")
        it = n.const(i, dt.i64, ())
        cin = n.const(True, dt.bool_, ())
        outs = inline(n, body, [it, cin, *carried], f"body (iteration {i})")
        go = _static_bool(n, outs[0])
        if go is None:
            raise Reject(f"the condition computed by iteration {i} is only known at run "
                         f"time; rlx graphs are static, so Loop is unrolled")
        carried = outs[1:1 + n_carried]
        for k, v in enumerate(outs[1 + n_carried:]):
            scans[k].append(v)
        i += 1
    if n_scan and i == 0:
        raise Reject("the loop runs zero iterations, so its scan outputs' shapes are unknown")
    return [*carried, *(stack(n, s, 0) for s in scans)]


# ---- Scan ----------------------------------------------------------------------------------------
def _ints(n: NodeCtx, name: str, count: int, default: int) -> list[int]:
    got = n.attr(name)
    if got is None:
        return [default] * count
    got = [int(v) for v in got]
    if len(got) != count:
        raise Reject(f"{name} has {len(got)} entries for {count} values")
    return got


def _step(n: NodeCtx, x: Value, axis: int, index: int) -> Value:
    """Element ``index`` of ``x`` along ``axis``, with that axis dropped."""
    part = n.slice_axis(x, axis, index, index + 1)
    return n.reshape(part, [s for i, s in enumerate(x.type.shape) if i != axis])


def _run_scan(n: NodeCtx, body: Any, states: list[Value], xs: list[Value], in_axes: list[int],
              in_dirs: list[int], length: int) -> tuple[list[Value], list[list[Value]]]:
    """Unroll ``body`` over ``length`` steps; the per-step scan outputs, in step order."""
    n_scan_out = len(body.output) - len(states)
    if n_scan_out < 0 or len(body.input) != len(states) + len(xs):
        raise Reject(f"the body has {len(body.input)} inputs and {len(body.output)} outputs "
                     f"for {len(states)} states and {len(xs)} scan inputs")
    outs_per_step: list[list[Value]] = [[] for _ in range(n_scan_out)]
    for t in range(length):
        step_in = [_step(n, x, ax, length - 1 - t if d else t)
                   for x, ax, d in zip(xs, in_axes, in_dirs, strict=True)]
        outs = inline(n, body, [*states, *step_in], f"body (step {t})")
        states = outs[:len(states)]
        for k, v in enumerate(outs[len(states):]):
            outs_per_step[k].append(v)
    return states, outs_per_step


def _check_dirs(dirs: list[int], name: str) -> None:
    if any(d not in (0, 1) for d in dirs):
        raise Reject(f"{name} must be 0 (forward) or 1 (reverse), got {dirs}")


def scan(n: NodeCtx) -> list[Value]:
    body = n.attr("body")
    k = n.attr("num_scan_inputs")
    if body is None or k is None:
        raise Reject("body and num_scan_inputs are required")
    k = int(k)
    if n.version == 8:
        return _scan8(n, body, k)
    if n.has("directions"):
        raise Reject("directions is a Scan-8 attribute")
    ins = list(n.inputs)
    states, xs = _split_scan_inputs(ins, k)
    n_state = len(states)
    in_axes = [n.axis(a, x.type.rank, "scan_input_axes entry")
               for a, x in zip(_ints(n, "scan_input_axes", k, 0), xs, strict=True)]
    in_dirs = _ints(n, "scan_input_directions", k, 0)
    _check_dirs(in_dirs, "scan_input_directions")
    lengths = {x.type.shape[a] for x, a in zip(xs, in_axes, strict=True)}
    if len(lengths) != 1:
        raise Reject(f"the scan inputs have different lengths {sorted(lengths)}")
    length = lengths.pop()
    if length == 0:
        raise Reject("the scan axis is empty, so the scan outputs' shapes are unknown")
    check_unroll(n, body, length)
    n_out = len(body.output) - n_state
    out_axes_raw = _ints(n, "scan_output_axes", n_out, 0)
    out_dirs = _ints(n, "scan_output_directions", n_out, 0)
    _check_dirs(out_dirs, "scan_output_directions")
    finals, per_step = _run_scan(n, body, states, xs, in_axes, in_dirs, length)
    results = list(finals)
    for steps, ax, d in zip(per_step, out_axes_raw, out_dirs, strict=True):
        rank = steps[0].type.rank + 1
        results.append(stack(n, steps[::-1] if d else steps,
                             n.axis(ax, rank, "scan_output_axes entry")))
    _check_outputs(n, results, "the scan")
    return results


def _split_scan_inputs(ins: list[Any], k: int) -> tuple[list[Value], list[Value]]:
    """(loop states, scan inputs): the last ``k`` of ``ins`` are scanned."""
    if any(v is None for v in ins):
        raise Reject("an input is missing")
    n_state = len(ins) - k
    if n_state < 0 or k < 1:
        raise Reject(f"num_scan_inputs={k} does not fit {len(ins)} inputs")
    return ins[:n_state], ins[n_state:]


def _scan8(n: NodeCtx, body: Any, k: int) -> list[Value]:
    """Scan-8: axis 0 of every input and output is a batch axis, axis 1 of the scan inputs
    and outputs the sequence axis; ``sequence_lens`` may only say every sequence is full."""
    for name in ("scan_input_axes", "scan_input_directions", "scan_output_axes",
                 "scan_output_directions"):
        if n.has(name):
            raise Reject(f"{name} is not a Scan-8 attribute")
    seq_lens = n.opt(0)
    ins = list(n.inputs[1:])
    states, xs = _split_scan_inputs(ins, k)
    n_state = len(states)
    if any(v.type.rank < 1 for v in states) or any(x.type.rank < 2 for x in xs):
        raise Reject("Scan-8 states need a batch axis and scan inputs batch and sequence axes")
    batches = {v.type.shape[0] for v in ins}
    lengths = {x.type.shape[1] for x in xs}
    if len(batches) != 1 or len(lengths) != 1:
        raise Reject("the inputs' batch sizes or sequence lengths differ")
    batch, length = batches.pop(), lengths.pop()
    if seq_lens is not None:
        lens = n.static_ints(seq_lens, "sequence_lens")
        if any(v != length for v in lens):
            raise Reject(f"sequence_lens {lens} holds partial sequences (length {length}); "
                         f"only full sequences are imported")
    if length == 0 or batch == 0:
        raise Reject("an empty batch or sequence leaves the outputs' shapes unknown")
    dirs = _ints(n, "directions", k, 0)
    _check_dirs(dirs, "directions")
    check_unroll(n, body, length * batch)
    finals_b: list[list[Value]] = []
    scans_b: list[list[Value]] = []
    for b in range(batch):
        st = [_step(n, v, 0, b) for v in states]
        xb = [_step(n, x, 0, b) for x in xs]
        finals, per_step = _run_scan(n, body, st, xb, [0] * k, dirs, length)
        finals_b.append(finals)
        scans_b.append([stack(n, steps, 0) for steps in per_step])
    results = [stack(n, [f[i] for f in finals_b], 0) for i in range(n_state)]
    results += [stack(n, [s[i] for s in scans_b], 0) for i in range(len(scans_b[0]))]
    _check_outputs(n, results, "the scan")
    return results

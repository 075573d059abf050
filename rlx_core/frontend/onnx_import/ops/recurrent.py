"""Converters for ONNX recurrent ops: RNN, GRU, LSTM (7, 14, 22), unrolled over the static
sequence length, and ReverseSequence (10, 28) with static sequence lengths.

Per direction (layout 0: X is (seq, batch, input); layout 1 swaps the first two axes of X,
initial_h/c and the outputs), with gate pre-activations ``X W^T + H R^T + Wb + Rb`` (clipped
to [-clip, clip] when ``clip`` is given):

    RNN:  H = f(i)
    GRU:  z = f(.), r = f(.); h = g(X Wh^T + (r * H) Rh^T + Rbh + Wbh)    [default]
                              h = g(X Wh^T + r * (H Rh^T + Rbh) + Wbh)      [linear_before_reset]
          H = (1 - z) * h + z * H
    LSTM: i = f(. + Pi * C), f = f(. + Pf * C), c = g(.); C = f * C + i * c;
          o = f(. + Po * C); H = o * h(C)

``sequence_lens`` is accepted when every sequence spans the whole input (the padded-batch
semantics are not modelled); activations with parameters and ``input_forget`` are refused."""

from __future__ import annotations

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.frontend.onnx_import.ops.subgraph import MAX_UNROLLED_NODES, concat_many, stack
from rlx_core.ir.graph import Value

# gates per cell and default activations (f, g, h)
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"),
                 "LSTM": ("Sigmoid", "Tanh", "Tanh")}
_ACTS = ("sigmoid", "tanh", "relu")


def _act(n: NodeCtx, name: str, x: Value, clip: float | None) -> Value:
    if clip is not None:
        x = n.emit("min", [n.emit("max", [x, n.full_like(-clip, x)]), n.full_like(clip, x)])
    if name == "sigmoid":
        return n.emit("logistic", [x])
    if name == "tanh":
        return n.emit("tanh", [x])
    return n.emit("max", [x, n.full_like(0.0, x)])  # relu


def _activations(n: NodeCtx, op: str, dirs: int) -> list[tuple[str, ...]]:
    """The activation names of each direction, lower-cased."""
    per = len(_DEFAULT_ACTS[op])
    given = n.attr("activations")
    names = list(_DEFAULT_ACTS[op]) * dirs if given is None else [
        a.decode() if isinstance(a, bytes) else str(a) for a in given]
    if len(names) != per * dirs:
        raise Reject(f"activations lists {len(names)} functions; {op} with {dirs} "
                     f"direction(s) needs {per * dirs}")
    if n.has("activation_alpha") or n.has("activation_beta"):
        raise Reject("activation_alpha / activation_beta (parameterised activations) are "
                     "not supported")
    low = [a.lower() for a in names]
    bad = [a for a, lo in zip(names, low, strict=True) if lo not in _ACTS]
    if bad:
        raise Reject(f"activation(s) {', '.join(bad)} not supported (Sigmoid, Tanh, Relu)")
    return [tuple(low[d * per:(d + 1) * per]) for d in range(dirs)]


def _dir_slice(n: NodeCtx, v: Value, d: int) -> Value:
    """Direction ``d`` of a (num_directions, ...) value, that axis dropped."""
    part = n.slice_axis(v, 0, d, d + 1)
    return n.reshape(part, v.type.shape[1:])


def _vec(n: NodeCtx, v: Value, start: int, size: int, shape: tuple[int, int]) -> Value:
    """Elements [start, start+size) of a 1-D value, broadcast over the batch: (batch, size)."""
    return n.emit("broadcast_in_dim", [n.slice_axis(v, 0, start, start + size)],
                  {"shape": shape, "dims": (1,)})


def recurrent(op: str):
    gates = _GATES[op]

    def convert(n: NodeCtx) -> list[Value | None]:
        x, w, r = n.x(0), n.x(1), n.x(2)
        b, seq_lens, h0 = n.opt(3), n.opt(4), n.opt(5)
        c0 = n.opt(6) if op == "LSTM" else None
        p = n.opt(7) if op == "LSTM" else None
        d = n.float_type(x, "X")
        for name, v in (("W", w), ("R", r), ("B", b), ("initial_h", h0), ("initial_c", c0),
                        ("P", p)):
            if v is not None and v.type.dtype != d:
                raise Reject(f"{name} {v.type} is not {d} like X")
        direction = n.text("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise Reject(f"direction {direction!r} is not forward, reverse or bidirectional")
        dirs = 2 if direction == "bidirectional" else 1
        layout = int(n.attr("layout", 0))
        if layout not in (0, 1):
            raise Reject(f"layout {layout} is not 0 or 1")
        if op == "LSTM" and int(n.attr("input_forget", 0)):
            raise Reject("input_forget=1 (coupled input and forget gates) is not supported")
        clip = n.attr("clip")
        clip = None if clip is None else float(clip)
        acts = _activations(n, op, dirs)
        if x.type.rank != 3:
            raise Reject(f"X must be rank 3, got {x.type}")
        if layout:
            x = n.transpose(x, (1, 0, 2))
            h0 = None if h0 is None else n.transpose(h0, (1, 0, 2))
            c0 = None if c0 is None else n.transpose(c0, (1, 0, 2))
        seq, batch, inp = x.type.shape
        hid = r.type.shape[-1] if r.type.rank == 3 else 0
        if n.has("hidden_size") and int(n.attr("hidden_size")) != hid:
            raise Reject(f"hidden_size {n.attr('hidden_size')} does not match R {r.type}")
        want = {"W": (w, (dirs, gates * hid, inp)), "R": (r, (dirs, gates * hid, hid)),
                "B": (b, (dirs, 2 * gates * hid)), "initial_h": (h0, (dirs, batch, hid)),
                "initial_c": (c0, (dirs, batch, hid)), "P": (p, (dirs, 3 * hid))}
        for name, (v, shape) in want.items():
            if v is not None and v.type.shape != shape:
                raise Reject(f"{name} {v.type} must be {list(shape)} for direction="
                             f"{direction!r}, layout={layout}")
        if seq_lens is not None:
            lens = n.static_ints(seq_lens, "sequence_lens")
            if any(s != seq for s in lens):
                raise Reject(f"sequence_lens {lens} holds partial sequences (length {seq}); "
                             f"padded batches are not supported")
        if seq == 0:
            raise Reject("an empty sequence")
        if seq * dirs * 12 * gates > MAX_UNROLLED_NODES:
            raise Reject(f"unrolling {seq} steps would exceed {MAX_UNROLLED_NODES} nodes")
        lbr = int(n.attr("linear_before_reset", 0)) if op == "GRU" else 0
        ys, hs, cs = [], [], []
        for di in range(dirs):
            reverse = direction == "reverse" or di == 1
            y, h, c = _direction(n, op, x, _dir_slice(n, w, di), _dir_slice(n, r, di),
                                 None if b is None else _dir_slice(n, b, di),
                                 None if h0 is None else _dir_slice(n, h0, di),
                                 None if c0 is None else _dir_slice(n, c0, di),
                                 None if p is None else _dir_slice(n, p, di),
                                 acts[di], clip, reverse, lbr)
            ys.append(y)
            hs.append(h)
            cs.append(c)
        y_all = stack(n, ys, 1)  # (seq, dirs, batch, hid)
        h_all = stack(n, hs, 0)  # (dirs, batch, hid)
        c_all = stack(n, cs, 0) if op == "LSTM" else None
        if layout:
            y_all = n.transpose(y_all, (2, 0, 1, 3))
            h_all = n.transpose(h_all, (1, 0, 2))
            c_all = None if c_all is None else n.transpose(c_all, (1, 0, 2))
        return [y_all, h_all] + ([c_all] if op == "LSTM" else [])

    return convert


def _direction(n: NodeCtx, op: str, x: Value, w: Value, r: Value, b: Value | None,
               h: Value | None, c: Value | None, p: Value | None, acts: tuple[str, ...],
               clip: float | None, reverse: bool, lbr: int) -> tuple[Value, Value, Value | None]:
    """One direction over the whole sequence: Y (seq, batch, hid) in time order, the last H
    and (LSTM) the last C."""
    seq, batch, _ = x.type.shape
    hid = r.type.shape[-1]
    gates = _GATES[op]
    d = x.type.dtype
    bh = (batch, hid)
    # X W^T for every step at once: (seq, batch, gates*hid)
    xw = n.emit("dot_general", [x, w], {"contract": ((2,), (1,))})
    h = h if h is not None else n.const(0.0, d, bh)
    if op == "LSTM":
        c = c if c is not None else n.const(0.0, d, bh)

    def wb(g: int) -> Value | None:
        return None if b is None else _vec(n, b, g * hid, hid, bh)

    def rb(g: int) -> Value | None:
        return None if b is None else _vec(n, b, (gates + g) * hid, hid, bh)

    def plus(*vals: Value | None) -> Value:
        out = None
        for v in vals:
            if v is not None:
                out = v if out is None else n.emit("add", [out, v])
        return out

    def rdot(v: Value, g0: int, count: int) -> Value:
        """v R[g0*hid:(g0+count)*hid]^T: (batch, count*hid)."""
        rs = n.slice_axis(r, 0, g0 * hid, (g0 + count) * hid)
        return n.emit("dot_general", [v, rs], {"contract": ((1,), (1,))})

    def gate(v: Value, g: int) -> Value:
        return n.slice_axis(v, 1, g * hid, (g + 1) * hid)

    steps = range(seq - 1, -1, -1) if reverse else range(seq)
    ys: list[Value] = []
    for t in steps:
        xt = n.reshape(n.slice_axis(xw, 0, t, t + 1), (batch, gates * hid))
        if op == "RNN":
            h = _act(n, acts[0], plus(xt, rdot(h, 0, 1), wb(0), rb(0)), clip)
        elif op == "GRU":
            hr = rdot(h, 0, 2)
            z = _act(n, acts[0], plus(gate(xt, 0), gate(hr, 0), wb(0), rb(0)), clip)
            rr = _act(n, acts[0], plus(gate(xt, 1), gate(hr, 1), wb(1), rb(1)), clip)
            if lbr:
                inner = n.emit("mul", [rr, plus(rdot(h, 2, 1), rb(2))])
                hh = _act(n, acts[1], plus(gate(xt, 2), inner, wb(2)), clip)
            else:
                hh = _act(n, acts[1], plus(gate(xt, 2), rdot(n.emit("mul", [rr, h]), 2, 1),
                                           rb(2), wb(2)), clip)
            one_minus_z = n.emit("sub", [n.full_like(1.0, z), z])
            h = n.emit("add", [n.emit("mul", [one_minus_z, hh]), n.emit("mul", [z, h])])
        else:  # LSTM, gate order i, o, f, c; peepholes i, o, f
            hr = rdot(h, 0, 4)
            pre = [plus(gate(xt, g), gate(hr, g), wb(g), rb(g)) for g in range(4)]
            if p is not None:
                pi, po, pf = (_vec(n, p, k * hid, hid, bh) for k in range(3))
                pre[0] = n.emit("add", [pre[0], n.emit("mul", [pi, c])])
                pre[2] = n.emit("add", [pre[2], n.emit("mul", [pf, c])])
            i = _act(n, acts[0], pre[0], clip)
            f = _act(n, acts[0], pre[2], clip)
            cc = _act(n, acts[1], pre[3], clip)
            c = n.emit("add", [n.emit("mul", [f, c]), n.emit("mul", [i, cc])])
            po_c = pre[1] if p is None else n.emit("add", [pre[1], n.emit("mul", [po, c])])
            o = _act(n, acts[0], po_c, clip)
            h = n.emit("mul", [o, _act(n, acts[2], c, None)])
        ys.append(h)
    if reverse:
        ys.reverse()
    return stack(n, ys, 0), h, c


def reverse_sequence(n: NodeCtx) -> Value:
    x = n.x(0)
    lens = n.static_ints(n.x(1), "sequence_lens")
    if x.type.rank < 2:
        raise Reject(f"input must have rank >= 2, got {x.type}")
    bax = int(n.attr("batch_axis", 1))
    tax = int(n.attr("time_axis", 0))
    if sorted((bax, tax)) != [0, 1]:
        raise Reject(f"batch_axis {bax} and time_axis {tax} must be 0 and 1")
    batch, steps = x.type.shape[bax], x.type.shape[tax]
    if len(lens) != batch:
        raise Reject(f"sequence_lens has {len(lens)} entries for a batch of {batch}")
    if any(not 0 <= s <= steps for s in lens):
        raise Reject(f"sequence_lens {lens} must lie in [0, {steps}]")
    parts = []
    for i, s in enumerate(lens):
        row = n.slice_axis(x, bax, i, i + 1)
        order = list(range(s - 1, -1, -1)) + list(range(s, steps))
        parts.append(n.take(row, tax, order) if s > 1 else row)
    return concat_many(n, parts, bax) if len(parts) > 1 else parts[0]

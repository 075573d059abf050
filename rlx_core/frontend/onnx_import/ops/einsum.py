"""Converter for ONNX Einsum (opset 12, 28), numpy's einsum semantics:

    parse: explicit '->' or implicit (labels seen once, sorted; ellipsis axes first);
           '...' stands for the same right-aligned axes in every operand (size 1 broadcasts)
    per operand: repeated labels take the diagonal (a strided slice of the flattened pair);
                 labels no other operand or the output uses are summed away
    operands contract left to right with dot_general (shared labels still needed later are
    batch axes, the rest contract); the last one is summed and transposed into the output.

bf16 is computed in f32 and rounded once, as the reference does.
"""

from __future__ import annotations

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value

Labels = list[str]


def _parse(eq: str, ranks: list[int]) -> tuple[list[Labels], Labels]:
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise Reject(f"equation {eq!r} has {len(terms)} operands; {len(ranks)} are given")
    ell_rank = 0
    parsed: list[Labels] = []
    for term, rank in zip(terms, ranks, strict=False):
        if term.count("...") > 1 or "." in term.replace("...", ""):
            raise Reject(f"bad ellipsis in {term!r}")
        letters = term.replace("...", "")
        if not all(ch.isalpha() for ch in letters):
            raise Reject(f"einsum labels must be letters, got {term!r}")
        if "..." in term:
            k = rank - len(letters)
            if k < 0:
                raise Reject(f"{term!r} has more labels than its operand's rank {rank}")
            ell_rank = max(ell_rank, k)
            head, _, tail = term.partition("...")
            parsed.append(list(head) + [f"#{k - i}" for i in range(k)] + list(tail))
        else:
            if len(letters) != rank:
                raise Reject(f"{term!r} names {len(letters)} axes; the operand has rank {rank}")
            parsed.append(list(letters))
    ell = [f"#{ell_rank - i}" for i in range(ell_rank)]
    if arrow:
        if rhs.count("...") > 1 or "." in rhs.replace("...", ""):
            raise Reject(f"bad ellipsis in the output {rhs!r}")
        letters = rhs.replace("...", "")
        if not all(ch.isalpha() for ch in letters) or len(set(letters)) != len(letters):
            raise Reject(f"bad output labels {rhs!r}")
        head, dots, tail = rhs.partition("...")
        if not dots and ell_rank:
            raise Reject("the output must keep the ellipsis axes ('...')")
        out = list(head) + (ell if dots else []) + list(tail)
        seen = {lab for t in parsed for lab in t}
        if any(lab not in seen for lab in out):
            raise Reject(f"output label in {rhs!r} appears in no operand")
    else:
        counts: dict[str, int] = {}
        for t in parsed:
            for lab in t:
                if not lab.startswith("#"):
                    counts[lab] = counts.get(lab, 0) + 1
        out = ell + sorted(lab for lab, c in counts.items() if c == 1)
    return parsed, out


def _diagonal(n: NodeCtx, v: Value, labels: Labels) -> tuple[Value, Labels]:
    """Collapse repeated labels onto their first axis (the diagonal)."""
    while len(set(labels)) != len(labels):
        lab = next(lab for i, lab in enumerate(labels) if lab in labels[:i])
        a = labels.index(lab)
        b = labels.index(lab, a + 1)
        size = v.type.shape[a]
        if v.type.shape[b] != size:
            raise Reject(f"label {lab!r} has sizes {size} and {v.type.shape[b]}")
        rest = [i for i in range(v.type.rank) if i not in (a, b)]
        v = n.transpose(v, rest + [a, b])
        shape = [v.type.shape[i] for i in range(len(rest))]
        v = n.reshape(v, shape + [size * size])
        v = n.take(v, len(rest), [i * (size + 1) for i in range(size)])
        labels = [labels[i] for i in rest] + [lab]
    return v, labels


def _sum(n: NodeCtx, v: Value, labels: Labels, keep: set[str]) -> tuple[Value, Labels]:
    axes = [i for i, lab in enumerate(labels) if lab not in keep]
    if not axes:
        return v, labels
    return (n.reduce("reduce_sum", v, axes, False),
            [lab for lab in labels if lab in keep])


def einsum(n: NodeCtx) -> Value:
    eq = n.attr("equation")
    if eq is None:
        raise Reject("equation is required")
    eq = eq.decode() if isinstance(eq, bytes) else str(eq)
    ops = [n.x(i) for i in range(len(n.inputs))]
    if not ops:
        raise Reject("Einsum needs at least one input")
    d = ops[0].type.dtype
    if any(o.type.dtype != d for o in ops) or d == dt.bool_:
        raise Reject("Einsum operands must share one numeric dtype")
    terms, out = _parse(eq.strip(), [o.type.rank for o in ops])
    work = dt.f32 if d == dt.bf16 else d  # the reference accumulates bf16 in f32

    sizes: dict[str, int] = {}
    for o, t in zip(ops, terms, strict=False):
        for lab, s in zip(t, o.type.shape, strict=False):
            have = sizes.get(lab, 1)
            if s != 1 and have not in (1, s):
                raise Reject(f"label {lab!r} has sizes {have} and {s}")
            sizes[lab] = max(have, s) if s != 0 and have != 0 else 0

    vals: list[tuple[Value, Labels]] = []
    for i, (o, t) in enumerate(zip(ops, terms, strict=False)):
        v, labels = _diagonal(n, n.cast(o, work), list(t))
        later = set(out) | {lab for tt in terms[:i] + terms[i + 1:] for lab in tt}
        v, labels = _sum(n, v, labels, later)
        full = tuple(sizes[lab] for lab in labels)
        if v.type.shape != full:  # a size-1 (ellipsis) axis broadcasts against the others
            v = n.emit("broadcast_in_dim", [v], {"shape": full, "dims": tuple(range(len(full)))})
        vals.append((v, labels))

    acc, acc_l = vals[0]
    for j, (v, labels) in enumerate(vals[1:], start=1):
        later = set(out) | {lab for _, ll in vals[j + 1:] for lab in ll}
        shared = [lab for lab in acc_l if lab in labels]
        batch = [lab for lab in shared if lab in later]
        contract = [lab for lab in shared if lab not in later]
        acc = n.emit("dot_general", [acc, v], {
            "contract": (tuple(acc_l.index(lab) for lab in contract),
                         tuple(labels.index(lab) for lab in contract)),
            "batch": (tuple(acc_l.index(lab) for lab in batch),
                      tuple(labels.index(lab) for lab in batch))})
        acc_l = batch + [lab for lab in acc_l if lab not in shared] + \
            [lab for lab in labels if lab not in shared]
    acc, acc_l = _sum(n, acc, acc_l, set(out))
    acc = n.transpose(acc, [acc_l.index(lab) for lab in out])
    return n.cast(acc, d)

"""Donated arguments of ``@rlx.jit(donate=...)``: which outputs may be written in place.

A decoding step takes its KV caches and returns them with one row changed. Returned as new
arrays, every step reads each cache and writes a fresh copy of it (the small GPT-2 decoder:
eight 128 KB selects, ~50 us of its ~0.63 ms step on one thread). With ``donate`` the caller
hands those arguments over: the CPU specialization cache writes such an output into the
donated argument's own buffer and returns that array, as JAX's ``donate_argnums`` does; the
caller must not rely on the old contents afterwards.

The compiler allows it only where it is safe (``inplace_outputs``): the output has the donated
input's type, one elementwise kernel produces it, that kernel is the only reader of the input,
and it reads the input at the output element's own index only. So each element is read before
it is overwritten and nothing reads the input after. A training step's weight update
``W - c * dot`` (``compile_step(..., in_place=True)``) is a GEMM kernel that other kernels
read W before (the forward pass): it is allowed when it is the last kernel in the program's
order to read W and the target offers the kernel's form (``matmul_in_place``: the cpu's is
cpu/update_store.py's, W read at the output element's own index), and its GEMM stores the
update from its tiles in one KC slice; the renderer checks that last part and raises
targets/base.py's ``InPlaceRefused`` otherwise, and the program is rendered again with a fresh
output (``refuse``). This rule knows no target's pattern: a target without the hook gets no
matmul output written in place. The earlier readers are done before the update writes: the
team's footprints count the output as the donated buffer (cpu/renderer.py ``_footprints``), so
the kernel waits for every earlier kernel that reads it. A bias's update ``b - c * sum``
is a reduce kernel: allowed the same way when the target offers it (``reduce_in_place``: the
cpu's when the sum is a row run's combine, cpu/row_sums.py, which reads ``b`` and stores each
element once after the block partials; any other form is refused by the renderer). The
kernel is rendered without ``restrict`` on that pair (the same pointer may arrive twice);
when that kernel
ends in ``select(mask, new, input)`` it stores only where the mask is on whenever the two
pointers are equal (a KV cache: one row written, not the whole cache). At call time
the runtime donates only a writeable, contiguous numpy array that shares no memory with any
other argument or with a weight of the function (scm_codegen's dispatch); any other argument
gets a fresh output, as without ``donate``, and the kernel computes the same values either way.
Other targets ignore ``donate`` (their outputs are always new arrays).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.ir.graph import Graph
from rlx_core.passes.plan_arena import reads_at_own_index


class DonationError(RlxError):
    """``donate`` names something that is not an argument position of the jitted function."""

    code = "RLX-R024"


def donated_positions(donate: Any, n_args: int | None = None) -> tuple[int, ...]:
    """``donate`` (an int or a sequence of ints) as sorted argument positions; raises
    DonationError for anything else, a duplicate, or (with ``n_args``) a position past the
    call's arguments."""
    items = (donate,) if isinstance(donate, int) else donate
    try:
        got = [int(i) for i in items]
    except (TypeError, ValueError):
        raise DonationError(f"donate={donate!r} is not an argument position or a sequence of "
                            "them", hint="pass argument positions, e.g. donate=(2, 3)") from None
    if any(isinstance(i, bool) or not isinstance(i, int) for i in items) or \
            len(set(got)) != len(got) or any(i < 0 for i in got):
        raise DonationError(f"donate={donate!r}: positions must be distinct ints >= 0",
                            hint="pass argument positions, e.g. donate=(2, 3)")
    if n_args is not None and any(i >= n_args for i in got):
        raise DonationError(f"donate={donate!r} names a position past the {n_args} "
                            f"argument(s) of the call",
                            hint="count positions from 0 over the arguments as passed")
    return tuple(sorted(got))


def inplace_outputs(lir: Graph, donate: Sequence[int], target: str | None = None
                    ) -> tuple[int, ...]:
    """Per output of ``lir``: the donated input position it may be written into, or -1.

    A matmul or reduce kernel's output only where ``target`` (by name; default the
    specialization cache's, the one target that honours ``donate``) offers it: its
    ``matmul_in_place(k)`` / ``reduce_in_place(k)`` names the input the kernel may store over
    (targets/base.py)."""
    aliases = [-1] * len(lir.outputs)
    if not donate or not lir.kernels:
        return tuple(aliases)
    readers: dict[str, list[Any]] = {}
    for k in lir.kernels:  # in the program's order
        for v in k.inputs:
            readers.setdefault(v, []).append(k)
    producer = {o: k for k in lir.kernels for o in k.outputs}
    over, summed = _hook(target, "matmul_in_place"), _hook(target, "reduce_in_place")
    for i in donate:
        if i >= len(lir.inputs):
            continue
        src = lir.inputs[i]
        if src.name in lir.outputs or not readers.get(src.name):
            continue
        k = readers[src.name][-1]  # the last reader: the only one that may write it
        if len(k.outputs) != 1 or readers[src.name].count(k) != 1:
            continue
        out = k.outputs[0]
        if lir.outputs.count(out) != 1 or lir.type_of(out) != src.type or \
                aliases[lir.outputs.index(out)] >= 0 or producer.get(out) is not k:
            continue
        if k.kind == "elementwise":
            # the only reader, and every node reading the input is elementwise at the output's
            # shape: identity index
            ok = len(readers[src.name]) == 1 and reads_at_own_index(k, src.name,
                                                                     tuple(src.type.shape))
        elif k.kind == "matmul":
            ok = over(k) == src.name
        else:
            ok = k.kind == "reduce" and summed(k) == src.name
        if ok:
            aliases[lir.outputs.index(out)] = i
    return tuple(aliases)


def _hook(target: str | None, name: str) -> Callable[[Any], str | None]:
    """``target``'s ``matmul_in_place`` or ``reduce_in_place`` hook (``name``), or one that
    offers nothing."""
    from rlx_core.runtime.specialization_cache import TARGET
    from rlx_core.targets.registry import get_target

    return getattr(get_target(target or TARGET), name, lambda k: None)


def refuse(aliases: Sequence[int], lir: Graph, output: str) -> tuple[int, ...]:
    """``aliases`` with ``output`` given a fresh buffer (the renderer's
    targets.base.InPlaceRefused)."""
    return tuple(-1 if o == output else a for o, a in zip(lir.outputs, aliases, strict=True))


def inplace_pairs(lir: Graph, aliases: Sequence[int]) -> dict[str, str]:
    """Output value -> the donated input value it may be written over, for the renderer: the
    pair's kernel pointers are not ``restrict``, and a select keeping that input where its
    mask is off stores only where it is on when the two are one buffer."""
    return {lir.outputs[j]: lir.inputs[i].name for j, i in enumerate(aliases) if i >= 0}

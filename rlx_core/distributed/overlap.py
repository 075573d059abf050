"""Issue a program's collectives as early as their operands allow (HIR/MIR -> same level).

A traced training step lists the whole backward pass, then the gradient buckets'
all-reduces, then the update. ``issue_early`` reorders the nodes (a topological order, no
node changed) so that each collective comes right after the last node it needs::

    backward of layer L .. bucket 0's concat, all_reduce   # started here (non-blocking)
    backward of layer L-1 .. bucket 1's concat, all_reduce # bucket 0 in flight meanwhile
    ...
    update                                                 # waits for each bucket here

Nodes are taken by Kahn's algorithm with the key (the first collective the node feeds, its
position): everything the first collective needs, then that collective, then what the second
needs, ... and last the nodes that feed no collective, each group in its traced order. The
collectives keep their relative order (every unplaced ancestor of collective i has a key of
at most i), so ranks still issue them in the same order. The runtime part is the numpy
target's: it starts an ``all_reduce`` where the program has it and waits for it at the first
kernel that reads its result (``DEFERRED_OPS``).
"""

from __future__ import annotations

import heapq

from rlx_core.ir.graph import Graph
from rlx_core.ir.ops import COLLECTIVE_OPS


def issue_early(g: Graph) -> Graph:
    """``g`` with its nodes reordered so that every collective is as early as it can be."""
    nodes = g.nodes
    index = {n.name: i for i, n in enumerate(nodes)}
    never = len(nodes)
    key = [never] * len(nodes)
    for i in range(len(nodes) - 1, -1, -1):  # consumers sit after their producers
        if nodes[i].op in COLLECTIVE_OPS:
            key[i] = min(key[i], i)
        for name in nodes[i].inputs:
            j = index.get(name)
            if j is not None and key[i] < key[j]:
                key[j] = key[i]
    waiting = [0] * len(nodes)  # inputs not placed yet
    users: list[list[int]] = [[] for _ in nodes]
    for i, n in enumerate(nodes):
        for j in dict.fromkeys(index[name] for name in n.inputs if name in index):
            waiting[i] += 1
            users[j].append(i)
    ready = [(key[i], i) for i in range(len(nodes)) if waiting[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (key[u], u))
    if order == list(range(len(nodes))):
        return g
    return g.with_nodes([nodes[i] for i in order])

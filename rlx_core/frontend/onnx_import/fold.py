"""Import-time folding of an inference BatchNormalization into the Conv before it.

``BN(conv(x, W, B))`` with per-channel ``s / sqrt(var + eps)`` = ``a`` is ``conv(x, W * a,
(B - mean) * a + bias)``: one conv instead of a conv and four elementwise passes over its
output. It applies where the model holds every parameter as an initializer, the conv's output
feeds only the BatchNormalization (and is no graph output), and the BatchNormalization is in
inference form (one output, no training_mode, spatial=1). ONNX Runtime folds the same way, so
the result is also closer to its numbers; the folded weights are computed in float64 and
rounded once to the model's type.
"""

from __future__ import annotations

from typing import Any


def fold_batchnorm(proto: Any) -> tuple[Any, int]:
    """(model with every foldable Conv -> BatchNormalization pair folded, how many); the
    model is returned unchanged (the same object) when nothing folds."""
    import numpy as np
    from onnx import helper, numpy_helper

    g = proto.graph
    inits = {t.name: t for t in g.initializer}
    users: dict[str, int] = {}
    for node in g.node:
        for i in node.input:
            users[i] = users.get(i, 0) + 1
    outputs = {o.name for o in g.output}
    producer = {o: node for node in g.node for o in node.output}
    drop: set[int] = set()
    conv_repl: dict[int, Any] = {}
    new_inits: dict[str, Any] = {}
    for node in g.node:
        if node.op_type != "BatchNormalization" or node.domain not in ("", "ai.onnx"):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if len([o for o in node.output if o]) != 1 or attrs.get("training_mode", 0) \
                or attrs.get("spatial", 1) != 1 or len(node.input) < 5:
            continue
        conv = producer.get(node.input[0])
        if conv is None or conv.op_type != "Conv" or conv.domain not in ("", "ai.onnx") \
                or users.get(conv.output[0], 0) != 1 or conv.output[0] in outputs:
            continue
        names = list(conv.input[1:3]) + list(node.input[1:5])
        if any(n and n not in inits for n in names) or not conv.input[1] \
                or id(conv) in conv_repl:
            continue
        w = numpy_helper.to_array(inits[conv.input[1]])
        if w.dtype not in (np.float32, np.float64) or w.ndim < 3:
            continue
        scale, bias, mean, var = (numpy_helper.to_array(inits[n]).astype(np.float64)
                                  for n in node.input[1:5])
        if any(v.shape != (w.shape[0],) for v in (scale, bias, mean, var)):
            continue
        b = numpy_helper.to_array(inits[conv.input[2]]).astype(np.float64) \
            if len(conv.input) > 2 and conv.input[2] else np.zeros(w.shape[0])
        a = scale / np.sqrt(var + float(attrs.get("epsilon", 1e-5)))
        w2 = (w.astype(np.float64) * a.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
        b2 = ((b - mean) * a + bias).astype(w.dtype)
        wn, bn = f"{conv.output[0]}__bnfold_w", f"{conv.output[0]}__bnfold_b"
        new_inits[wn] = numpy_helper.from_array(w2, wn)
        new_inits[bn] = numpy_helper.from_array(b2, bn)
        folded = helper.make_node("Conv", [conv.input[0], wn, bn], [node.output[0]],
                                  name=conv.name or node.name)
        folded.attribute.extend(conv.attribute)
        conv_repl[id(conv)] = folded
        drop.add(id(node))
    if not conv_repl:
        return proto, 0
    out = type(proto)()
    out.CopyFrom(proto)
    del out.graph.node[:]
    for node in g.node:
        if id(node) in drop:
            continue
        out.graph.node.append(conv_repl.get(id(node), node))
    out.graph.initializer.extend(new_inits.values())
    if not any(a.type in (helper.AttributeProto.GRAPH, helper.AttributeProto.GRAPHS)
               for node in out.graph.node for a in node.attribute):
        # the replaced weights and statistics, unless something else reads them (a subgraph
        # could read any outer name: then everything stays)
        used = {i for node in out.graph.node for i in node.input} | outputs
        keep = [t for t in out.graph.initializer if t.name in used]
        gone = {t.name for t in out.graph.initializer} - {t.name for t in keep}
        del out.graph.initializer[:]
        out.graph.initializer.extend(keep)
        listed = [vi for vi in out.graph.input if vi.name not in gone]
        del out.graph.input[:]
        out.graph.input.extend(listed)
    return out, len(conv_repl)

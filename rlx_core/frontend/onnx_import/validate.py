"""Checks of an ONNX model made before any node is converted: every name is UTF-8 text, every
value is defined once, every attribute has the type its op's schema declares, and external
data is read from the model's own folder. Each failure is a typed error naming what is wrong."""

from __future__ import annotations

import os
from typing import Any

from rlx_core.frontend.onnx_import.errors import ExternalDataError, MalformedOnnxError, Reject


def _show(v: Any) -> str:
    return repr(v if len(v) <= 40 else v[:40] + (b"..." if isinstance(v, bytes) else "..."))


def _text(v: Any, what: str) -> None:
    # protobuf hands back bytes for a proto2 string field that is not valid UTF-8
    if not isinstance(v, str):
        raise MalformedOnnxError(f"{what} is not valid UTF-8 text ({_show(v)})",
                                 hint="the file is corrupted, or was written by a tool that does "
                                      "not follow the ONNX format; re-export it")


def check_text(graph: Any, where: str = "graph") -> None:
    """Every name of ``graph`` (and of its subgraphs) is a str: names, op types, domains,
    value names, attribute names."""
    _text(graph.name, f"the {where}'s name")
    for kind, items in (("input", graph.input), ("output", graph.output),
                        ("value_info", graph.value_info), ("initializer", graph.initializer)):
        for i, v in enumerate(items):
            _text(v.name, f"{where} {kind} #{i}'s name")
    for i, node in enumerate(graph.node):
        label = f"{where} node #{i}"
        for field in ("name", "op_type", "domain"):
            _text(getattr(node, field), f"{label}'s {field}")
        for j, name in enumerate(node.input):
            _text(name, f"{label}'s input {j}")
        for j, name in enumerate(node.output):
            _text(name, f"{label}'s output {j}")
        for a in node.attribute:
            _text(a.name, f"an attribute name of {label}")
            if a.HasField("g"):
                check_text(a.g, f"{label}.{a.name}")
            for k, sub in enumerate(a.graphs):
                check_text(sub, f"{label}.{a.name}[{k}]")


def check_single_assignment(graph: Any) -> None:
    """Each value is produced once: by an input, an initializer or one node output."""
    defined: dict[str, str] = {}
    for v in graph.input:
        defined.setdefault(v.name, "a graph input")
    for t in graph.initializer:
        defined.setdefault(t.name, "an initializer")
    for i, node in enumerate(graph.node):
        label = f"node #{i} {node.name or ''} ({node.op_type})".replace("  ", " ")
        for out in node.output:
            if not out:
                continue
            first = defined.get(out)
            if first is not None and first not in ("a graph input", "an initializer"):
                raise MalformedOnnxError(
                    f"value {out!r} is produced twice: by {first} and by {label}",
                    hint="ONNX graphs assign each value once; the model is malformed "
                         "(re-export it, or rename one of the outputs)")
            if first is not None:
                raise MalformedOnnxError(
                    f"{label} writes {out!r}, which is already {first}",
                    hint="ONNX graphs assign each value once; rename the node's output")
            defined[out] = label


def check_attribute_types(node: Any, schema: Any) -> None:
    """Reject (for this node) any attribute whose type differs from the schema's
    (``Softmax(axis=[1, 2])``, ``Transpose(perm=<graph>)``) before a converter reads it."""
    from onnx import AttributeProto

    declared = schema.attributes
    for a in node.attribute:
        if a.ref_attr_name:
            continue  # a function's attribute reference: refused by name elsewhere
        spec = declared.get(a.name)
        if spec is None:
            raise Reject(f"attribute {a.name!r} is not defined for {node.op_type}-"
                         f"{schema.since_version}")
        want = int(spec.type)
        if int(a.type) != want:
            got = (AttributeProto.AttributeType.Name(a.type)
                   if a.type in AttributeProto.AttributeType.values() else f"type {a.type}")
            raise Reject(f"attribute {a.name!r} is {got}, but {node.op_type} declares it "
                         f"{AttributeProto.AttributeType.Name(want)}")
        texts = [a.s] if want == AttributeProto.STRING else (
            list(a.strings) if want == AttributeProto.STRINGS else [])
        for s in texts:  # converters decode these (a mode, an equation): UTF-8 or refused
            try:
                s.decode("utf-8")
            except UnicodeDecodeError:
                raise Reject(f"attribute {a.name!r} is not valid UTF-8 text ({s[:40]!r})"
                             ) from None


def load_external_data(proto: Any, base_dir: str | None, where: str) -> None:
    """Read the external data of ``proto``'s tensors from ``base_dir`` (the model file's folder)
    into the tensors; a file that is missing, outside that folder, or too short is refused."""
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    external = [t for t in _get_all_tensors(proto) if uses_external_data(t)]
    if not external:
        return
    names = ", ".join(repr(t.name) for t in external[:5])
    if base_dir is None:
        raise ExternalDataError(
            f"{where} keeps tensors in external files ({names}), and without the model file's "
            "path there is no folder to read them from",
            hint="pass the .onnx file's path (the data files lie next to it), or load it with "
                 "onnx.load(path) first")
    import onnx
    from onnx.external_data_helper import load_external_data_for_model

    try:
        load_external_data_for_model(proto, base_dir)
    except (onnx.checker.ValidationError, OSError, ValueError, TypeError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ExternalDataError(
            f"{where}: the external data of {names} cannot be read from {base_dir!r}: {first}",
            hint="keep the data files next to the .onnx file, under the names the model "
                 "records (re-save with onnx.save_model(..., save_as_external_data=True))"
        ) from None


def validate_model(proto: Any, path: str | None, where: str) -> None:
    """The model-level checks, in order: text, single assignment, external data (read from
    the folder of ``path``, the model file, when there is one)."""
    check_text(proto.graph)
    check_single_assignment(proto.graph)
    load_external_data(proto, os.path.dirname(os.path.abspath(path)) if path else None, where)

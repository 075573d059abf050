"""ONNX ModelProto -> rlx HIR graph: read the model, check opsets, convert node by node through
the converter table, and report every node that cannot be converted exactly in one error."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.frontend.onnx_import import dtypes as odt
from rlx_core.frontend.onnx_import.context import ImportContext, NodeCtx, type_from_value_info
from rlx_core.frontend.onnx_import.errors import (
    NodeImportError,
    OnnxImportError,
    Problem,
    Reject,
    UnknownOpsetError,
    UnsupportedOp,
)
from rlx_core.frontend.onnx_import.validate import check_attribute_types, validate_model
from rlx_core.ir.builder import clean_name
from rlx_core.ir.graph import Graph, Level, Loc, TensorType, Value, ValueKind
from rlx_core.ir.verifier import verify

# The default-domain opsets the importer reads (13 to 21 are the target; older and newer ones
# are read too). Each converter lists the exact op versions (since_version) it implements, so
# an op whose semantics differ in the model's opset is rejected by name, never guessed.
MIN_OPSET = 7
DEFAULT_DOMAINS = ("", "ai.onnx")
# The preview domain's ops are read at the versions PREVIEW_CONVERTERS lists (it is at 1 now).
PREVIEW_DOMAIN = "ai.onnx.preview"
PREVIEW_VERSIONS = (1,)
# ONNX Runtime's contrib domain: only its quantized ops are read (ops/ort_quant.py); onnx has
# no schemas for it, so a node's version is the domain version the model imports
ORT_DOMAIN = "com.microsoft"


@dataclass
class ImportResult:
    """The imported graph plus how ONNX names map onto it."""

    graph: Graph
    input_names: tuple[str, ...]  # ONNX names of the graph's runtime inputs, in order
    output_names: tuple[str, ...]
    folded_inputs: tuple[str, ...] = ()  # ONNX inputs baked in as values (static_inputs=)
    opset: int = 0
    notes: list[str] = field(default_factory=list)


def _load(model: Any) -> Any:
    import onnx
    from google.protobuf.message import DecodeError

    if isinstance(model, onnx.ModelProto):
        validate_model(model, None, "the given ModelProto")
        return model
    path = None
    if isinstance(model, bytes | bytearray | memoryview):
        data = bytes(model)
        where = "the given bytes"
    elif isinstance(model, str | os.PathLike):
        where = path = os.fspath(model)
        try:
            with open(where, "rb") as f:
                data = f.read()
        except OSError as err:
            raise OnnxImportError(f"cannot read ONNX file {where!r}: {err.strerror}",
                                  hint="check the path") from None
    else:
        raise OnnxImportError(f"cannot import a {type(model).__name__} as an ONNX model",
                              hint="pass an onnx.ModelProto, a file path or the file's bytes")
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as err:
        raise OnnxImportError(f"{where} is not a valid ONNX model ({len(data)} bytes): "
                              f"{err}", hint="the file may be truncated or not ONNX at all; "
                                             "re-export it") from None
    if not proto.HasField("graph") or (not proto.graph.node and not proto.graph.output):
        raise OnnxImportError(f"{where} holds no ONNX graph ({len(data)} bytes)",
                              hint="the file may be truncated or not ONNX at all; re-export it")
    validate_model(proto, path, where)  # UTF-8 names, single assignment, external data
    return proto


def _opset(proto: Any) -> int:
    import onnx

    latest = onnx.defs.onnx_opset_version()
    version = 0
    for imp in proto.opset_import:
        if imp.domain in DEFAULT_DOMAINS:
            version = int(imp.version)
        elif imp.domain == PREVIEW_DOMAIN and int(imp.version) in PREVIEW_VERSIONS:
            continue  # each preview-domain node is checked against PREVIEW_CONVERTERS
        elif imp.domain == ORT_DOMAIN:
            continue  # each com.microsoft node is checked against ORT_QUANT_CONVERTERS
        elif imp.domain not in ("ai.onnx.ml", "ai.onnx.preview.training"):
            raise UnknownOpsetError(f"the model imports unknown domain {imp.domain!r} "
                                    f"(version {imp.version})",
                                    hint="only the default ONNX domain is supported")
    if not version and proto.opset_import:
        return 0  # only other domains: each default-domain node is reported as undefined
    if not MIN_OPSET <= version <= latest:
        raise UnknownOpsetError(
            f"the model uses ONNX opset {version}; rlx imports opsets {MIN_OPSET} to {latest}",
            hint="convert it with onnx.version_converter.convert_version(model, 17)")
    return version


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    out = {}
    for a in node.attribute:
        if a.ref_attr_name:
            raise Reject(f"attribute {a.name!r} refers to a function attribute")
        out[a.name] = helper.get_attribute_value(a)
    return out


def import_model(model: Any, *, input_shapes: Mapping[str, Sequence[int]] | None = None,
                 static_inputs: Mapping[str, Any] | None = None,
                 name: str | None = None) -> ImportResult:
    """Convert an ONNX model (ModelProto, path or bytes) into an HIR graph.

    ``input_shapes`` gives concrete shapes for inputs with symbolic dims; ``static_inputs`` gives
    values for inputs that some op needs at import time (a Reshape's shape, a Slice's starts):
    those inputs become parameters of the graph, the rest stay inputs. Raises UnsupportedOp
    listing every node that cannot be converted exactly.

    Each node is converted at its own op version (old versions are implemented from opset 7
    on). Where that fails for an old model, the model upgraded by onnx.version_converter to
    UPGRADE_OPSET is tried; ``graph.origin["path"]`` (and the compile trace's source) says
    which of the two imported it. A model neither imports is rejected with the nodes of the
    direct import.
    """
    from rlx_core.frontend.onnx_import.fold import fold_batchnorm

    proto = _load(model)
    opset = _opset(proto)
    proto, folded = fold_batchnorm(proto)
    try:
        res = _import_proto(proto, input_shapes, static_inputs, name)
        path = "direct"
    except UnsupportedOp as direct:
        if opset >= UPGRADE_OPSET:
            raise
        upgraded = upgrade(proto)
        if isinstance(upgraded, str):
            why = f"onnx.version_converter could not upgrade it either ({upgraded})"
        else:
            try:
                res = _import_proto(upgraded, input_shapes, static_inputs, name)
            except OnnxImportError as err:
                why = (f"nor does its upgrade to opset {UPGRADE_OPSET} by onnx.version_converter "
                       f"({err.message.splitlines()[0]})")
            else:
                why = ""
        if why:
            # the direct import's own class: a NodeImportError (RLX-O022) stays one
            raise type(direct)(direct.problems, hint=f"{why}; {direct.hint}") from None
        path = f"upgraded from opset {opset} to {UPGRADE_OPSET} by onnx.version_converter"
    res.graph.origin = {"format": "onnx", "opset": opset, "path": path,
                        "batchnorm_folded_into_conv": folded}
    res.notes.append(f"imported {path}")
    return res


# Where a model's own op versions do not all import, the version converter's upgrade to this
# opset is tried (13 to 21 is the importer's main range; the converter reaches 17 reliably).
UPGRADE_OPSET = 17


def upgrade(proto: Any) -> Any:
    """``proto`` upgraded to UPGRADE_OPSET by onnx.version_converter, or why it cannot be
    (a string): the model is already that new, or the converter has no adapter for a node."""
    from onnx import version_converter

    try:
        return version_converter.convert_version(proto, UPGRADE_OPSET)
    except Exception as err:  # its C++ errors too (ConvertError, InferenceError): any is a "no"
        return str(err).splitlines()[0] if str(err) else type(err).__name__


def _import_proto(proto: Any, input_shapes: Mapping[str, Sequence[int]] | None,
                  static_inputs: Mapping[str, Any] | None, name: str | None) -> ImportResult:
    import onnx
    from onnx import numpy_helper

    from rlx_core.frontend.onnx_import.ops.table import CONVERTERS, DOMAIN_CONVERTERS

    opset = _opset(proto)
    g = proto.graph
    input_shapes = dict(input_shapes or {})
    static_inputs = dict(static_inputs or {})
    cx = ImportContext(clean_name(name or g.name or "onnx_model"))
    cx.opset = opset  # graph attributes (subgraphs) resolve their nodes' versions with it
    problems: list[Problem] = []

    inits = {t.name for t in g.initializer}
    for t in g.initializer:
        d = odt.to_rlx(t.data_type)
        if d is None:
            problems.append(Problem(t.name, "initializer", f"element type "
                                    f"{odt.onnx_type_name(t.data_type)} has no rlx dtype"))
            continue
        try:
            data = numpy_helper.to_array(t)
        except (ValueError, TypeError, RuntimeError) as err:
            raise OnnxImportError(f"initializer {t.name!r} cannot be read: {err}",
                                  hint="the file may be truncated; re-export it") from None
        cx.add_param(t.name, data, TensorType(d, tuple(int(s) for s in data.shape)))
    runtime_inputs: list[str] = []
    bad_inputs: set[str] = set()
    for vi in g.input:
        if vi.name in inits:
            continue  # an initializer listed as an input too (IR < 4 style): a constant here
        try:
            ty = type_from_value_info(vi, input_shapes.get(vi.name))
        except Reject as r:
            problems.append(Problem(vi.name, "input", r.reason))
            bad_inputs.add(vi.name)
            continue
        cx.add_input(vi.name, ty, static_inputs.get(vi.name))
        runtime_inputs.append(vi.name)

    # every op type and version is checked up front, so the report lists all of them even
    # where a converted node's output feeds nodes that could not be converted
    resolved: list[tuple[Any, int]] = []
    for node in g.node:
        version = 0
        where = node.name or (node.output[0] if node.output else "")
        if node.op_type in DOMAIN_CONVERTERS.get(node.domain, {}):
            version = _preview_version(node.op_type, proto, node.domain)
            if version not in DOMAIN_CONVERTERS[node.domain][node.op_type].versions:
                problems.append(Problem(where, node.op_type, f"{node.domain} version "
                                                             f"{version} is not implemented"))
                version = 0
        elif node.domain not in DEFAULT_DOMAINS:
            problems.append(Problem(where, node.op_type, f"domain {node.domain!r} is not "
                                                         f"supported"))
        elif node.op_type not in CONVERTERS:
            problems.append(Problem(where, node.op_type, "no converter for this op"))
        else:
            try:
                version = onnx.defs.get_schema(node.op_type, opset, "").since_version
            except onnx.defs.SchemaError:
                problems.append(Problem(where, node.op_type, f"not defined in opset {opset}"))
            else:
                conv = CONVERTERS[node.op_type]
                if conv.at(version) is None:
                    problems.append(Problem(where, node.op_type,
                                            f"version {version} (opset {opset}) is not "
                                            f"implemented; supported: "
                                            f"{', '.join(map(str, conv.all_versions))}"))
                    version = 0
        resolved.append((node, version))

    broken: set[str] = set(bad_inputs)  # ONNX values whose producer was rejected
    crashed: list[str] = []  # nodes whose conversion raised something unforeseen
    for index, (node, version) in enumerate(resolved):
        where = node.name or (node.output[0] if node.output else f"node{index}")
        if not version or any(i in broken for i in node.input):
            broken.update(o for o in node.output if o)
            continue
        try:
            outs = _convert(cx, node, version, opset, where)
        except Reject as r:
            problems.append(Problem(where, node.op_type, r.reason))
            broken.update(o for o in node.output if o)
            continue
        except RlxError as err:  # a shape rule refused what the converter built
            problems.append(Problem(where, node.op_type, err.message.split("\n")[0]))
            broken.update(o for o in node.output if o)
            continue
        except Exception as err:  # the last resort: nothing a node holds escapes untyped
            problems.append(Problem(where, node.op_type, f"conversion failed unexpectedly: "
                                                         f"{type(err).__name__}: {err}"[:300]))
            crashed.append(where)
            broken.update(o for o in node.output if o)
            continue
        for oname, val in zip(node.output, outs, strict=False):
            if oname and val is not None:
                cx.env[oname] = val

    outputs: list[str] = []
    for vi in g.output:
        if vi.name in broken:
            continue
        v = cx.env.get(vi.name)
        if v is None:
            problems.append(Problem(vi.name, "output", "graph output is never computed"))
            continue
        outputs.append(v.name)
    if crashed:
        raise NodeImportError(tuple(problems), hint=(
            f"{len(crashed)} node(s) ({', '.join(crashed[:5])}) could not be converted: the "
            "model may be malformed; if onnx.checker.check_model accepts it, please report "
            "it as an rlx bug"))
    if problems:
        raise UnsupportedOp(tuple(problems))

    folded = set(cx.folded_inputs)
    inputs = tuple(v for v in cx.inputs if v.name not in folded)
    params = list(cx.params)
    param_data = dict(cx.param_data)
    for v in cx.inputs:
        if v.name in folded:  # an input baked in: it becomes a parameter with the given value
            pv = Value(v.name, v.type, ValueKind.PARAM)
            params.append(pv)
            param_data[v.name] = cx.input_values[v.name]
    graph = Graph(cx.graph_name, Level.HIR, inputs, tuple(params), tuple(cx.builder.nodes),
                  tuple(outputs), param_data=param_data)
    graph = verify(graph)
    onnx_of = cx.onnx_input_name
    return ImportResult(
        graph=graph,
        input_names=tuple(onnx_of[v.name] for v in inputs),
        output_names=tuple(vi.name for vi in g.output),
        folded_inputs=tuple(onnx_of[n] for n in cx.folded_inputs),
        opset=opset,
    )


def _preview_version(op_type: str, proto: Any, domain: str = PREVIEW_DOMAIN) -> int:
    import onnx

    imported = max((int(i.version) for i in proto.opset_import if i.domain == domain),
                   default=0)
    if domain == ORT_DOMAIN:
        return imported
    try:
        return onnx.defs.get_schema(op_type, imported, domain).since_version
    except onnx.defs.SchemaError:
        return 0


def _convert(cx: ImportContext, node: Any, version: int, opset: int, where: str) -> list[Any]:
    import onnx

    from rlx_core.frontend.onnx_import.ops.table import CONVERTERS, DOMAIN_CONVERTERS

    conv = DOMAIN_CONVERTERS.get(node.domain, CONVERTERS)[node.op_type].at(version)
    assert conv is not None  # import_model resolved the version against the table
    if node.domain != ORT_DOMAIN:  # onnx has no schemas for the contrib ops
        check_attribute_types(node, onnx.defs.get_schema(node.op_type, version, node.domain))
    attrs = _attrs(node)
    unknown = sorted(set(attrs) - set(conv.attrs))
    if unknown:
        raise Reject(f"attribute(s) {', '.join(unknown)} not supported")
    ins: list[Any] = []
    for i in node.input:
        if not i:
            ins.append(None)
        elif i in cx.env:
            ins.append(cx.env[i])
        else:
            raise Reject(f"input {i!r} is not defined before this node")
    loc = Loc(file="onnx", line=0, scope=clean_name(where))
    nctx = NodeCtx(cx, node, ins, attrs, version, loc)
    outs = conv.fn(nctx)
    if isinstance(outs, Value):
        outs = [outs]
    outs = list(outs)
    for i, oname in enumerate(node.output):
        if oname and (i >= len(outs) or outs[i] is None):
            raise Reject(f"output {i} ({oname!r}) is not produced by the rlx converter")
    return outs


def from_onnx(model: Any, *, input_shapes: Mapping[str, Sequence[int]] | None = None,
              static_inputs: Mapping[str, Any] | None = None, name: str | None = None) -> Graph:
    """Import an ONNX model (ModelProto, path, or bytes) as an rlx HIR graph; compile it with
    ``rlx.compile(graph, *inputs, target=...)``. See ``import_model`` for the arguments."""
    return import_model(model, input_shapes=input_shapes, static_inputs=static_inputs,
                        name=name).graph

"""Weights: safetensors files into graph parameters, with typed errors that list every problem.

    weights = read_safetensors("model.safetensors")          # name -> numpy array
    check_weights(weights, {"fc.weight": ((10, 784), "f32")}) # raises listing ALL mismatches
    graph = bind_weights(graph, weights)                      # a graph's params get the data

The header is validated here before the ``safetensors`` package reads the data, so a truncated
or corrupted file is reported as what it is (length, JSON, offsets) rather than as a crash.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph

# safetensors dtype names -> rlx dtypes
ST_DTYPES: dict[str, dt.DType] = {
    "BOOL": dt.bool_, "U8": dt.u8, "I8": dt.i8, "I16": dt.i16, "I32": dt.i32, "I64": dt.i64,
    "U32": dt.u32, "F16": dt.f16, "BF16": dt.bf16, "F32": dt.f32, "F64": dt.f64,
}
_MAX_HEADER = 100 * 1024 * 1024  # the format's own limit on the JSON header


class WeightsFileError(RlxError):
    """A weights file is missing, truncated, or has a corrupted header."""

    code = "RLX-F001"


class WeightsMismatchError(RlxError):
    """Weights do not fit the model: missing names, wrong shapes or dtypes (all listed)."""

    code = "RLX-F002"

    def __init__(self, message: str, missing: tuple[str, ...] = (),
                 mismatched: tuple[tuple[str, str, str], ...] = (),
                 unexpected: tuple[str, ...] = (), **kw: Any):
        self.missing = missing
        self.mismatched = mismatched  # (name, expected, found)
        self.unexpected = unexpected
        super().__init__(message, **kw)


@dataclass(frozen=True)
class TensorInfo:
    """One entry of a safetensors header."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int


def read_header(path: str | os.PathLike[str]) -> tuple[TensorInfo, ...]:
    """Parse and validate a safetensors header (stdlib only): sizes, JSON, dtypes, offsets."""
    p = Path(path)
    try:
        size = p.stat().st_size
        with open(p, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise WeightsFileError(f"{p}: {size} bytes is too short for a safetensors file",
                                       hint="the file is truncated; download or copy it again")
            (n,) = struct.unpack("<Q", head)
            if n > _MAX_HEADER or 8 + n > size:
                raise WeightsFileError(
                    f"{p}: header length {n} does not fit in the file ({size} bytes)",
                    hint="the header is corrupted or the file truncated; is it a safetensors "
                         "file?")
            raw = f.read(n)
    except OSError as err:
        raise WeightsFileError(f"cannot read weights file {p}: {err.strerror or err}",
                               hint="check the path") from err
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:  # JSONDecodeError, a 5000-digit number
        raise WeightsFileError(f"{p}: the safetensors header is not valid JSON ({err})",
                               hint="the header is corrupted; download or copy the file again"
                               ) from err
    except RecursionError:  # json nests by recursion: a hostile header can exhaust the stack
        raise WeightsFileError(f"{p}: the safetensors header nests JSON too deeply to read",
                               hint="the header is corrupted or hostile; a real header is a "
                                    "flat object of tensor entries") from None
    if not isinstance(header, dict):
        raise WeightsFileError(f"{p}: the safetensors header is not a JSON object",
                               hint="the header is corrupted; download or copy the file again")
    data_size = size - 8 - n
    infos, problems = [], []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape = entry["dtype"], tuple(_whole(d) for d in entry["shape"])
            start, end = (_whole(v) for v in entry["data_offsets"])
        except (KeyError, TypeError, ValueError, OverflowError):
            problems.append(f"{_clip(name)}: malformed entry {_short(entry)}")
            continue
        if not isinstance(dtype, str) or dtype not in ST_DTYPES:
            problems.append(f"{_clip(name)}: unsupported dtype "
                            f"{_clip(dtype) if isinstance(dtype, str) else _short(dtype)}")
            continue
        count = 1
        for d in shape:
            count *= d
            if count > 8 * data_size:  # already too big: stop before the product explodes
                break
        want = count * ST_DTYPES[dtype].bits // 8
        if not 0 <= start <= end <= data_size or end - start != want:
            problems.append(f"{_clip(name)}: offsets [{start}, {end}) do not hold "
                            f"{dtype}{_short(list(shape))} within {data_size} data bytes")
            continue
        infos.append(TensorInfo(name, dtype, shape, start, end))
    if problems:
        more = [f"... and {len(problems) - 20} more"] if len(problems) > 20 else []
        raise WeightsFileError(f"{p}: {len(problems)} corrupted header entr"
                               f"{'y' if len(problems) == 1 else 'ies'}:\n  " +
                               "\n  ".join(problems[:20] + more),
                               hint="the file is corrupted or truncated")
    return tuple(infos)


def _whole(v: Any) -> int:
    """A JSON number that must be a whole number >= 0 (a shape dim, an offset)."""
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(v)
    return v


def _clip(text: str) -> str:
    return text if len(text) <= 80 else text[:80] + "..."


def _short(v: Any) -> str:
    """A bounded repr: entries of a corrupted header can be huge or deeply nested."""
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxstring, r.maxother = 3, 60, 60
    return r.repr(v)


def read_safetensors(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Every tensor of a safetensors file as a numpy array (bf16 widened to f32)."""
    infos = read_header(path)
    try:
        from safetensors import safe_open
    except ImportError as err:
        raise WeightsFileError("reading safetensors needs the 'safetensors' package",
                               hint="pip install 'rlx-explorer[models]'") from err
    out: dict[str, Any] = {}
    try:
        with safe_open(str(path), framework="numpy") as f:
            for info in infos:
                out[info.name] = f.get_tensor(info.name)
    except Exception as err:  # the package's own SafetensorError and friends
        raise WeightsFileError(f"{path}: safetensors could not read the file: {err}",
                               hint="the file is corrupted") from err
    return out


def _desc(shape: tuple[int, ...], dtype: dt.DType | None) -> str:
    return f"{dtype.name if dtype else '?'}[{','.join(str(d) for d in shape)}]"


def check_weights(weights: Mapping[str, Any],
                  expected: Mapping[str, tuple[tuple[int, ...], Any]],
                  allow_unexpected: bool = True, where: str = "weights") -> None:
    """Raise WeightsMismatchError listing every missing, mis-shaped or mis-typed tensor.

    ``expected`` maps name -> (shape, dtype or None for any float).
    """
    missing = tuple(k for k in expected if k not in weights)
    mismatched = []
    for name, (shape, dtype) in expected.items():
        if name not in weights:
            continue
        arr = weights[name]
        got = _array_type(arr)
        if isinstance(got, str):  # not an array of a dtype rlx has: say what it is
            mismatched.append((name, _desc(tuple(shape), dt.get(dtype) if dtype else None), got))
            continue
        got_shape, got_dt = got
        want_dt = dt.get(dtype) if dtype is not None else None
        bad_dt = (want_dt is not None and got_dt != want_dt) or (
            want_dt is None and not got_dt.is_float)
        if got_shape != tuple(shape) or bad_dt:
            mismatched.append((name, _desc(tuple(shape), want_dt), _desc(got_shape, got_dt)))
    unexpected = () if allow_unexpected else tuple(k for k in weights if k not in expected)
    if not (missing or mismatched or unexpected):
        return
    lines = [f"{len(missing)} missing, {len(mismatched)} mis-shaped, "
             f"{len(unexpected)} unexpected tensor(s) in {where}:"]
    lines += [f"  missing     {m}" for m in missing]
    lines += [f"  mismatched  {n}: expected {e}, found {f}" for n, e, f in mismatched]
    lines += [f"  unexpected  {u}" for u in unexpected]
    hint = "check that the file belongs to this model (and its config: sizes, layer count)"
    if missing and len(missing) == len(expected):
        hint = "no expected name was found: the names may carry a prefix (e.g. 'bert.'); " \
               "pass prefix= to strip it"
    raise WeightsMismatchError("\n".join(lines), missing, tuple(mismatched), unexpected,
                               hint=hint)


def _array_type(value: Any) -> tuple[tuple[int, ...], dt.DType] | str:
    """(shape, dtype) of an array-like weight, or a description of why it is not one."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is None or dtype is None:
        try:
            import numpy as np
        except ImportError:
            return f"a {type(value).__name__}, not an array"
        if isinstance(value, str | bytes | dict) or value is None:
            return f"a {type(value).__name__} ({_short(value)}), not an array"
        try:
            value = np.asarray(value)
        except (ValueError, TypeError):
            return f"a {type(value).__name__} that is not an array"
        shape, dtype = value.shape, value.dtype
    try:
        return tuple(int(d) for d in shape), dt.get(dtype)
    except (RlxError, TypeError, ValueError):
        return f"an array of dtype {_short(dtype)}, which rlx has no dtype for"


def strip_prefix(weights: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """``weights`` with ``prefix`` removed from the names that carry it."""
    return {k.removeprefix(prefix): v for k, v in weights.items()}


def bind_weights(g: Graph, weights: Mapping[str, Any], names: Mapping[str, str] | None = None,
                 strict: bool = True) -> Graph:
    """A copy of ``g`` whose parameters take their data from ``weights``.

    ``names`` maps a graph parameter name to a weights name where they differ. With ``strict``
    every parameter must be found; shapes and dtypes must match the graph's types exactly.
    """
    names = dict(names or {})
    expected = {}
    for p in g.params:
        key = names.get(p.name, p.name)
        if strict or key in weights:
            expected[key] = (p.type.shape, p.type.dtype)
    check_weights(weights, expected, where=f"weights for graph {g.name}")
    data = dict(g.param_data)
    for p in g.params:
        key = names.get(p.name, p.name)
        if key in weights:
            data[p.name] = weights[key]
    out = replace(g)
    out.param_data = data
    return out


def load_weights(path: str | os.PathLike[str],
                 expected: Mapping[str, tuple[tuple[int, ...], Any]] | None = None,
                 prefix: str = "") -> dict[str, Any]:
    """Read a safetensors file, strip ``prefix`` and check it against ``expected`` (if given)."""
    weights = read_safetensors(path)
    if prefix:
        weights = strip_prefix(weights, prefix)
    if expected is not None:
        check_weights(weights, expected, where=str(path))
    return weights

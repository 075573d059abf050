"""A saved case: ``<name>.rlx`` (the IR text, which round-trips), ``<name>.npz`` (the inputs in
graph order, ``arr_<i>``, and the parameters' data, ``param_<i>``) and ``<name>.json`` (the
target it failed on, what differed, and its status: ``open`` until fixed, ``fixed`` once it
must pass, ``known:<deviation id>`` while owned)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from rlx_core.errors import RlxError
from rlx_core.ir.parser import parse
from rlx_core.ir.printer import print_graph
from rlx_core.testing.generator import Case


class FuzzCaseError(RlxError):
    """A saved fuzz case cannot be read back (missing file, bad IR text, inputs that disagree)."""

    code = "RLX-Z001"


def case_name(target: str, case: Case) -> str:
    digest = hashlib.sha256(print_graph(case.graph).encode()).hexdigest()[:10]
    return f"{target}-{digest}"


def save(case: Case, folder: Path, target: str, meta: dict[str, Any]) -> Path:
    """Write the three files; returns the ``.rlx`` path."""
    folder.mkdir(parents=True, exist_ok=True)
    name = case_name(target, case)
    base = folder / name
    base.with_suffix(".rlx").write_text(print_graph(case.graph))
    g = case.graph
    np.savez(base.with_suffix(".npz"), *case.inputs,
             **{f"param_{i}": g.param_data[p.name] for i, p in enumerate(g.params)})
    info = {"target": target, "seed": list(case.seed), "status": "open", **meta}
    base.with_suffix(".json").write_text(json.dumps(info, indent=1, sort_keys=True) + "\n")
    return base.with_suffix(".rlx")


def load(path: Path) -> tuple[Case, dict[str, Any]]:
    """The case and its metadata from ``<name>.rlx`` (with its ``.npz`` and ``.json``)."""
    path = Path(path)
    try:
        text = path.read_text()
        meta = json.loads(path.with_suffix(".json").read_text())
        with np.load(path.with_suffix(".npz")) as z:
            arrays = [z[f"arr_{i}"] for i in range(sum(f.startswith("arr_") for f in z.files))]
            bound = [z[f"param_{i}"] for i in range(sum(f.startswith("param_") for f in z.files))]
    except (OSError, ValueError, KeyError) as err:
        raise FuzzCaseError(f"fuzz case {path} cannot be read: {err}",
                            hint="a case is three files: NAME.rlx, NAME.npz and NAME.json") from err
    g = parse(text)
    for got, want, what in ((arrays, g.inputs, "input"), (bound, g.params, "parameter")):
        if len(got) != len(want) or any(
                a.shape != v.type.shape for a, v in zip(got, want, strict=False)):
            raise FuzzCaseError(f"fuzz case {path}: {len(got)} {what} arrays for "
                                f"{len(want)} graph {what}s, or their shapes differ",
                                hint="save cases with rlx_core.testing.cases.save")
    g.param_data.update({p.name: a for p, a in zip(g.params, bound, strict=True)})
    return Case(g, arrays, tuple(meta.get("seed", ()))), meta

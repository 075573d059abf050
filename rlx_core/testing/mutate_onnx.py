"""Mutation fuzzing of the ONNX importer: small valid seed models are mutated and imported;
anything that is not an ``RlxError`` is an untyped exception, grouped by the site that raised it.

Half the mutants are byte-level (bit flips, interesting bytes, deletions, duplications, splices
of two seeds: mostly malformed protobuf, which tests the reader); half edit the parsed model
(an attribute's type or value, a dimension, an initializer's type or dims, a node duplicated,
dropped or rewired, the opset), which reaches the converters with well-formed protobuf.

    python -m rlx_core.testing.mutate_onnx --seconds 120 --report docs/fuzz/onnx-mutation.json

Each mutant runs under a memory budget of 1 GiB (``RLX_MEMORY_LIMIT``) and a per-mutant time
limit; a mutant over the limit counts as a hang. Needs ``onnx`` (and numpy, which it brings).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

INTERESTING = (0x00, 0x01, 0x02, 0x7F, 0x80, 0xFE, 0xFF, 0x08, 0x10, 0x1A, 0x22, 0x3A)
PER_MUTANT_SECONDS = 5.0
FUZZ_MEMORY_LIMIT = "1G"


def seed_models() -> list[bytes]:
    """Small valid models, one per family of converters and attribute kinds (ints, floats,
    strings, tensors, graphs), serialized."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    f = TensorProto.FLOAT

    def vi(name: str, shape: list[int] | None, t: int = f) -> Any:
        return helper.make_tensor_value_info(name, t, shape)

    def const(name: str, arr: Any) -> Any:
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(arr))

    def model(nodes: list[Any], ins: list[Any], outs: list[Any], inits: list[Any] = (),
              opset: int = 17) -> bytes:
        g = helper.make_graph(nodes, "g", ins, outs, initializer=list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        return m.SerializeToString()

    x, y = vi("x", [2, 3, 4]), vi("y", None)
    w = numpy_helper.from_array(np.arange(20, dtype=np.float32).reshape(4, 5) / 10, "w")
    i64 = lambda v: np.array(v, np.int64)  # noqa: E731
    seeds = [
        model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [x], [y]),
        model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [x], [y]),
        model([helper.make_node("ReduceMean", ["x", "a"], ["y"], keepdims=0)], [x], [y],
              [numpy_helper.from_array(i64([1]), "a")]),
        model([helper.make_node("Transpose", ["x"], ["y"], perm=[2, 0, 1])], [x], [y]),
        model([const("s", i64([6, 4])), helper.make_node("Reshape", ["x", "s"], ["y"])], [x], [y]),
        model([helper.make_node("MatMul", ["x", "w"], ["y"])], [x], [y], [w]),
        model([helper.make_node("Gemm", ["a", "w"], ["y"], alpha=0.5, beta=2.0, transA=0)],
              [vi("a", [3, 4])], [y], [w]),
        model([helper.make_node("Conv", ["c", "k"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                strides=[1, 1])], [vi("c", [1, 2, 5, 5])], [y],
              [numpy_helper.from_array(np.ones((3, 2, 3, 3), np.float32), "k")]),
        model([helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
              [vi("c", [1, 2, 4, 4])], [y]),
        model([helper.make_node("Concat", ["x", "x"], ["y"], axis=-1)], [x], [y]),
        model([const("st", i64([0])), const("en", i64([2])), const("ax", i64([2])),
               helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"])], [x], [y]),
        model([const("i", i64([[0, 1], [1, 0]])), helper.make_node("Gather", ["x", "i"], ["y"],
                                                                     axis=1)], [x], [y]),
        model([const("r0", np.array(0, np.float32)), const("r1", np.array(5, np.float32)),
               const("r2", np.array(1, np.float32)),
               helper.make_node("Range", ["r0", "r1", "r2"], ["y"])], [], [y]),
        model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT32)], [x], [y]),
        model([const("sh", i64([2, 3])), helper.make_node("ConstantOfShape", ["sh"], ["y"],
              value=numpy_helper.from_array(np.array([1.5], np.float32)))], [], [y]),
        model([helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.2)], [x], [y]),
        model([helper.make_node("Split", ["x"], ["y", "z"], axis=2, num_outputs=2)], [x],
              [y, vi("z", None)], opset=18),
        model([const("ax", i64([0])), helper.make_node("Unsqueeze", ["x", "ax"], ["y"])], [x], [y]),
        model([const("sh", i64([4, 2, 3, 4])), helper.make_node("Expand", ["x", "sh"], ["y"])],
              [x], [y]),
        model([helper.make_node("Greater", ["x", "x"], ["m"]),
               helper.make_node("Where", ["m", "x", "x"], ["y"])], [x], [y]),
        model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1,
                                epsilon=1e-5)], [x], [y],
              [numpy_helper.from_array(np.ones(4, np.float32), "g"),
               numpy_helper.from_array(np.zeros(4, np.float32), "b")]),
        model([helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")], [x], [y],
              [numpy_helper.from_array(i64([0, 0, 1, 0, 0, 1]), "p")]),
        model([helper.make_node("ArgMax", ["x"], ["y"], axis=1, keepdims=1)], [x],
              [vi("y", None, TensorProto.INT64)]),
        model([helper.make_node("Einsum", ["x", "x"], ["y"], equation="abc,abd->acd")], [x], [y]),
        model([helper.make_node("If", ["b"], ["y"],
                                then_branch=helper.make_graph(
                                    [helper.make_node("Neg", ["x"], ["t"])], "then", [],
                                    [vi("t", [2, 3, 4])]),
                                else_branch=helper.make_graph(
                                    [helper.make_node("Abs", ["x"], ["e"])], "else", [],
                                    [vi("e", [2, 3, 4])]))],
              [x], [y], [numpy_helper.from_array(np.array(True), "b")]),
    ]
    return seeds


def mutate(data: bytes, rng: random.Random, seeds: list[bytes]) -> bytes:
    """One to four random byte-level edits of ``data``."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not buf:
            buf = bytearray(rng.choice(seeds))
        kind = rng.randrange(7)
        i = rng.randrange(len(buf))
        if kind == 0:
            buf[i] ^= 1 << rng.randrange(8)
        elif kind == 1:
            buf[i] = rng.choice(INTERESTING)
        elif kind == 2:
            buf[i] = rng.randrange(256)
        elif kind == 3:
            del buf[i:i + rng.randint(1, 8)]
        elif kind == 4:
            j = rng.randrange(len(buf))
            buf[i:i] = buf[j:j + rng.randint(1, 16)]
        elif kind == 5:  # a large varint where a length or a value was
            buf[i:i + 1] = bytes([0xFF] * rng.randint(1, 9) + [0x01])
        else:  # splice: this seed's head, another's tail
            other = rng.choice(seeds)
            buf = buf[:i] + bytearray(other[rng.randrange(len(other)):])
    return bytes(buf)


EXTREMES = (-(2**63), -(2**31), -1000, -2, -1, 0, 1, 2, 3, 7, 1000, 2**31, 2**62, 10**10)


def mutate_fields(data: bytes, rng: random.Random) -> bytes:
    """One to three edits of the parsed model ``data`` (a valid seed)."""
    import onnx
    from onnx import AttributeProto, helper

    m = onnx.ModelProto()
    m.ParseFromString(data)
    g = m.graph
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(8)
        node = rng.choice(g.node) if g.node else None
        if kind == 0 and node is not None and node.attribute:  # an attribute of another type
            a = rng.choice(node.attribute)
            name = a.name
            value = rng.choice([rng.choice(EXTREMES), [rng.choice(EXTREMES)] * rng.randint(0, 3),
                                rng.uniform(-1e30, 1e30), "abc", [0.5, 1.5], b"\xff\xfe",
                                helper.make_graph([], "sub", [], []),
                                helper.make_tensor("t", rng.choice([1, 6, 7, 9, 11]), [1], [1])])
            try:
                new = helper.make_attribute(name, value)
            except (ValueError, TypeError):
                continue
            a.CopyFrom(new)
        elif kind == 1 and node is not None and node.attribute:  # an extreme int value
            a = rng.choice(node.attribute)
            if a.type == AttributeProto.INT:
                a.i = rng.choice(EXTREMES)
            elif a.type == AttributeProto.INTS:
                a.ints[:] = [rng.choice(EXTREMES) for _ in range(rng.randint(0, 5))]
            elif a.type == AttributeProto.FLOAT:
                a.f = rng.choice([float("nan"), float("inf"), -0.0, 1e38, -1e-45])
        elif kind == 2 and (g.input or g.output):  # a dimension: negative, zero, huge, symbolic
            vi = rng.choice(list(g.input) + list(g.output))
            dims = vi.type.tensor_type.shape.dim
            if dims:
                d = rng.choice(dims)
                if rng.random() < 0.2:
                    d.dim_param = "N"
                else:
                    d.dim_value = rng.choice(EXTREMES)
        elif kind == 3 and g.initializer:  # an initializer's dims or type
            t = rng.choice(g.initializer)
            if rng.random() < 0.5 and t.dims:
                t.dims[rng.randrange(len(t.dims))] = rng.choice(EXTREMES)
            else:
                t.data_type = rng.randrange(0, 25)
        elif kind == 4 and node is not None:  # a node twice, or gone
            if rng.random() < 0.5:
                g.node.append(node)
            else:
                g.node.remove(node)
        elif kind == 5 and node is not None:  # an input rewired or dropped
            names = [v.name for v in g.input] + [o for n in g.node for o in n.output] + [""]
            if node.input and rng.random() < 0.7:
                node.input[rng.randrange(len(node.input))] = rng.choice(names)
            else:
                node.input.append(rng.choice(names))
        elif kind == 6 and m.opset_import:  # another opset
            m.opset_import[0].version = rng.choice([1, 5, 6, 7, 9, 11, 13, 18, 21, 22, 99])
        elif kind == 7 and node is not None:  # an output too many or too few
            if rng.random() < 0.5:
                node.output.append(f"extra{rng.randrange(3)}")
            elif node.output:
                del node.output[-1]
    return m.SerializeToString()


def machine_description() -> str:
    """CPU model and core count, for the reports."""
    import platform

    from rlx_core.targets.cpu.identity import cpu_model

    model = cpu_model()
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}"


class _Hang(BaseException):
    """A mutant ran past PER_MUTANT_SECONDS (raised from the SIGALRM handler; a BaseException,
    so that the importer's last resort, which catches Exception, lets it through)."""


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    if not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Hang(f"over {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def site_of(err: BaseException) -> str:
    """Where an exception was raised: exception type + the innermost rlx_core frame."""
    frames = traceback.extract_tb(err.__traceback__)
    ours = [f for f in frames if "rlx_core" in f.filename and "testing" not in f.filename]
    f = (ours or frames or [None])[-1]
    where = f"{f.filename.split('rlx_core/')[-1]}:{f.lineno}" if f is not None else "?"
    return f"{type(err).__name__} at {where}"


@dataclass
class Report:
    """What a run found: counts per outcome and each untyped site with one example."""

    mutants: int = 0
    seeds: int = 0
    imported: int = 0
    typed: int = 0
    hangs: int = 0
    seconds: float = 0.0
    untyped: dict[str, dict[str, Any]] = field(default_factory=dict)
    last_resort: dict[str, dict[str, Any]] = field(default_factory=dict)  # RLX-O022 causes
    hang_sites: dict[str, dict[str, Any]] = field(default_factory=dict)
    codes: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        lines = [f"{self.mutants} mutants of {self.seeds} seeds in {self.seconds:.1f} s: "
                 f"{self.imported} imported, {self.typed} typed errors, {self.hangs} hangs, "
                 f"{sum(v['count'] for v in self.untyped.values())} untyped exceptions at "
                 f"{len(self.untyped)} sites"]
        for site, v in sorted(self.untyped.items(), key=lambda kv: -kv[1]["count"]):
            lines.append(f"  {v['count']:>6}  {site}: {v['message']}")
        for site, v in self.hang_sites.items():
            lines.append(f"  {v['count']:>6}  hang in {site}")
        if self.last_resort:
            lines.append("caught by the importer's last resort (RLX-O022):")
            for site, v in sorted(self.last_resort.items(), key=lambda kv: -kv[1]["count"]):
                lines.append(f"  {v['count']:>6}  {site.split(':')[0]}: {v['message']}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"mutants": self.mutants, "seeds": self.seeds, "imported": self.imported,
                "typed": self.typed, "hangs": self.hangs, "seconds": round(self.seconds, 1),
                "typed_codes": dict(sorted(self.codes.items())), "untyped": self.untyped,
                "last_resort": self.last_resort, "hangs_at": self.hang_sites}


def check_one(data: bytes, target: Callable[[bytes], Any], report: Report) -> None:
    """Run ``target`` on one input and file the outcome in ``report``."""
    from rlx_core.errors import RlxError

    report.mutants += 1
    try:
        with _time_limit(PER_MUTANT_SECONDS):
            target(data)
        report.imported += 1
    except RlxError as err:
        report.typed += 1
        report.codes[err.code] = report.codes.get(err.code, 0) + 1
        if err.code == "RLX-O022":  # typed by the last resort: still a converter to fix
            for p in getattr(err, "problems", ()):
                if "failed unexpectedly" in p.reason:
                    key = f"{p.op_type}: {p.reason.split(': ', 2)[1]}"
                    entry = report.last_resort.setdefault(key, {
                        "count": 0, "message": p.reason[:200], "example_hex": data[:4096].hex()})
                    entry["count"] += 1
    except _Hang as err:
        report.hangs += 1
        entry = report.hang_sites.setdefault(site_of(err), {"count": 0,
                                                           "example_hex": data[:4096].hex()})
        entry["count"] += 1
    except Exception as err:  # the finding: an untyped exception
        site = site_of(err)
        entry = report.untyped.setdefault(site, {"count": 0, "message": str(err)[:200],
                                                 "example_hex": data[:4096].hex()})
        entry["count"] += 1


def import_bytes(data: bytes) -> Any:
    from rlx_core.frontend.onnx_import import import_model

    return import_model(data)


def run(mutants: int | None = None, seconds: float | None = None, seed: int = 0) -> Report:
    """Mutate the seeds ``mutants`` times (or for ``seconds``) and import each mutant."""
    rng = random.Random(seed)
    seeds = seed_models()
    report = Report(seeds=len(seeds))
    start = time.monotonic()
    old_limit = os.environ.get("RLX_MEMORY_LIMIT")
    os.environ["RLX_MEMORY_LIMIT"] = FUZZ_MEMORY_LIMIT
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for s in seeds:  # every seed imports as it is (or fails typed)
                check_one(s, import_bytes, report)
            while True:
                if mutants is not None and report.mutants >= mutants:
                    break
                if seconds is not None and time.monotonic() - start >= seconds:
                    break
                seed_bytes = rng.choice(seeds)
                mutant = (mutate_fields(seed_bytes, rng) if rng.random() < 0.5
                          else mutate(seed_bytes, rng, seeds))
                check_one(mutant, import_bytes, report)
    finally:
        if old_limit is None:
            os.environ.pop("RLX_MEMORY_LIMIT", None)
        else:
            os.environ["RLX_MEMORY_LIMIT"] = old_limit
    report.seconds = time.monotonic() - start
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--mutants", type=int, default=None, help="stop after this many instead")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--report", default=None, help="write the report as JSON here")
    args = ap.parse_args(argv)
    report = run(mutants=args.mutants, seconds=None if args.mutants else args.seconds,
                 seed=args.seed)
    print(report.describe())
    if args.report:
        with open(args.report, "w") as f:
            json.dump({"command": "python -m rlx_core.testing.mutate_onnx " + " ".join(
                sys.argv[1:] if argv is None else argv), "machine": machine_description(),
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                **report.to_json()}, f, indent=1)
    return 1 if report.untyped else 0


if __name__ == "__main__":
    sys.exit(main())

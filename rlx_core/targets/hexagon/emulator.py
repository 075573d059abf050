"""Run a rendered program under ``qemu-hexagon``: a freestanding static ELF per LIR graph.

The program is the rendered kernels, minirt.py, and a ``_start`` that reads every input and
parameter from stdin (in order, each 128-byte aligned), calls the entry point, and writes the
error slot and every output to stdout. One ELF per graph, cached on disk by the sha256 of its
source and flags (a verified entry, ``verified_files``: a damaged one is quarantined and linked
again); one emulator process per call. QEMU 7.2 knows Hexagon up to v67 (it rejects
v68 ELF files), so the emulated build is ``-mv67 -mhvx``: integer HVX loops run, the qf32 (v68)
loops compile away to their scalar tails there and are compile-checked for v68 separately.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from rlx_core.errors import ArgumentError, RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import TensorType
from rlx_core.targets import verified_files
from rlx_core.targets.build_cache import target_cache_dir
from rlx_core.targets.c_common.program import CProgram
from rlx_core.targets.host_args import cast_host, checked_shape
from rlx_core.targets.tool_process import run_tool

EMULATED_ARCH = "v67"
ALIGN = 128


class EmulatorError(RlxError):
    """qemu-hexagon could not run a generated program to completion."""

    code = "RLX-H004"


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@cache
def find_qemu() -> tuple[str | None, str]:
    path = os.environ.get("RLX_QEMU_HEXAGON") or shutil.which("qemu-hexagon")
    if path is None:
        return None, "qemu-hexagon is not installed (Debian: qemu-user)"
    return path, ""


@cache
def find_lld() -> tuple[str | None, str]:
    for name in ("ld.lld", "ld.lld-14", "ld.lld-15"):
        path = shutil.which(name)
        if path:
            return path, ""
    return None, "ld.lld is not installed (Debian: lld)"


def _layout(types: Sequence[TensorType]) -> tuple[list[int], int]:
    offsets, end = [], 0
    for t in types:
        offsets.append(end)
        end = _align(end + max(t.nbytes, 1))
    return offsets, max(end, ALIGN)


def main_source(cprog: CProgram) -> str:
    """``_start``: read inputs and parameters, run, write the error slot and the outputs."""
    in_types = (*cprog.input_types, *cprog.param_types)
    in_off, in_bytes = _layout(in_types)
    out_off, out_bytes = _layout(cprog.output_types)
    n_in = len(cprog.input_types)
    ins = ", ".join(f"rlx_io + {o}" for o in in_off[:n_in]) or "0"
    prm = ", ".join(f"rlx_io + {o}" for o in in_off[n_in:]) or "0"
    outs = ", ".join(f"rlx_out + {o}" for o in out_off) or "0"
    p = cprog.prefix
    return "\n".join([
        "void rlx_exit(int code);", "long rlx_read_all(void* p, long n);",
        "void rlx_write_all(const void* p, long n);",
        f"static unsigned char rlx_io[{in_bytes}] __attribute__((aligned({ALIGN})));",
        f"static unsigned char rlx_out[{out_bytes}] __attribute__((aligned({ALIGN})));",
        f"static unsigned char rlx_arena[{_align(max(cprog.arena_bytes, 1))}] "
        f"__attribute__((aligned({ALIGN})));",
        "void _start(void) {",
        f"    if (rlx_read_all(rlx_io, {in_bytes}) != {in_bytes}) rlx_exit(2);",
        f"    const void* const ins[] = {{{ins}}};",
        f"    const void* const prm[] = {{{prm}}};",
        f"    void* const outs[] = {{{outs}}};",
        f"    {p}_run(ins, prm, outs, rlx_arena);",
        "    int64_t info[3];",
        f"    info[0] = {p}_error(info + 1);",
        "    rlx_write_all(info, sizeof info);",
        f"    rlx_write_all(rlx_out, {out_bytes});",
        "    rlx_exit(0);", "}", ""])


def cache_dir() -> Path:
    """Where linked programs and the runtime object are kept (build_cache:
    ``<RLX_CACHE_DIR>/hexagon``, else ``~/.cache/rlx/hexagon``)."""
    return target_cache_dir("hexagon")


def minirt_object() -> Path:
    """minirt.py compiled once per content and flags (it takes clang seconds, programs don't)."""
    from rlx_core.targets.hexagon.minirt import SOURCE as MINIRT
    from rlx_core.targets.hexagon.toolchain import compile_flags, compile_object, find_clang

    clang, _ = find_clang()
    key = hashlib.sha256("\0".join([MINIRT, *compile_flags(clang or "", EMULATED_ARCH)])
                         .encode()).hexdigest()[:24]
    obj = cache_dir() / f"minirt-{key}.o"
    if not verified_files.lookup(obj):
        with tempfile.TemporaryDirectory(prefix="rlx-hexagon-") as tmp:
            compile_object(MINIRT, Path(tmp) / "minirt.o", EMULATED_ARCH, what="minirt runtime")
            verified_files.publish_copy(Path(tmp) / "minirt.o", obj)
    return obj


def build_elf(cprog: CProgram) -> tuple[Path, bool]:
    """(path of the linked ELF, cache hit) for ``cprog``; KernelCheckError on a compile error."""
    from rlx_core.targets.hexagon.minirt import SOURCE as MINIRT
    from rlx_core.targets.hexagon.toolchain import compile_flags, compile_object, find_clang

    program = cprog.source + "\n" + main_source(cprog)
    clang, _ = find_clang()
    key = hashlib.sha256("\0".join([program, MINIRT, *compile_flags(clang or "", EMULATED_ARCH)])
                         .encode()).hexdigest()[:24]
    elf = cache_dir() / f"{key}.elf"
    if verified_files.lookup(elf):
        return elf, True
    lld, why = find_lld()
    if lld is None:
        raise EmulatorError(f"cannot link a Hexagon program: {why}", hint="apt install lld")
    with tempfile.TemporaryDirectory(prefix="rlx-hexagon-") as tmp:
        t = Path(tmp)
        compile_object(program, t / "program.o", EMULATED_ARCH)
        link = run_tool([lld, "-static", "-e", "_start", "-o", str(t / "a.elf"),
                         str(t / "program.o"), str(minirt_object())], timeout=120)
        if link.returncode != 0:
            raise EmulatorError(f"ld.lld could not link the Hexagon program:\n"
                                f"{link.stderr.strip()[:1500]}",
                                hint="a runtime symbol is missing from minirt.py: report it")
        verified_files.publish_copy(t / "a.elf", elf)
    return elf, False


def _host(arr: Any, t: TensorType, what: str) -> bytes:
    import numpy as np

    want = np.dtype(dt.to_numpy_name(t.dtype))
    a = cast_host(checked_shape(arr, t, what), t.dtype, want)
    return np.ascontiguousarray(a).astype(want.newbyteorder("<")).tobytes()


class EmulatedProgram:
    """One linked ELF; ``run`` feeds it on stdin and reads its outputs from stdout."""

    def __init__(self, cprog: CProgram, elf: Path, param_data: dict[str, Any]):
        self.cprog = cprog
        self.elf = elf
        self.param_data = param_data

    def run(self, inputs: Sequence[Any], params: dict[str, Any]) -> list[Any]:
        import numpy as np

        cp = self.cprog
        if len(inputs) != len(cp.input_types):
            raise ArgumentError(f"the program takes {len(cp.input_types)} input(s), "
                                f"got {len(inputs)}")
        blobs = [_host(x, t, f"input {i}") for i, (x, t) in
                 enumerate(zip(inputs, cp.input_types, strict=True))]
        for name, t in zip(cp.param_names, cp.param_types, strict=True):
            data = params.get(name) if params else None
            data = self.param_data.get(name) if data is None else data
            if data is None:
                raise ArgumentError(f"no data for parameter %{name}",
                                    hint="pass it in the params dict under its name")
            blobs.append(_host(data, t, f"parameter %{name}"))
        offs, total = _layout((*cp.input_types, *cp.param_types))
        stdin = bytearray(total)
        for o, b in zip(offs, blobs, strict=True):
            stdin[o:o + len(b)] = b
        qemu, why = find_qemu()
        if qemu is None:
            raise EmulatorError(f"cannot run the Hexagon program: {why}",
                                hint="apt install qemu-user")
        proc = run_tool([qemu, str(self.elf)], input=bytes(stdin), text=False, timeout=600)
        out_off, out_bytes = _layout(cp.output_types)
        if proc.returncode != 0 or len(proc.stdout) != 24 + out_bytes:
            raise EmulatorError(f"qemu-hexagon exited with {proc.returncode} after "
                                f"{len(proc.stdout)} bytes (want {24 + out_bytes}): "
                                f"{proc.stderr.decode(errors='replace').strip()[:500]}",
                                hint="a runtime or emulator fault: report it with "
                                     "`rlx compile FILE --target hexagon --emit source`")
        info = np.frombuffer(proc.stdout[:24], "<i8")
        if info[0]:
            from rlx_core.targets.numpy_ref.semantics import IndexOutOfRangeError

            raise IndexOutOfRangeError(f"kernel {int(info[0]) - 1}: index {int(info[1])} is "
                                       f"out of range for an axis of size {int(info[2])}",
                                       hint=f"indices must lie in [{-int(info[2])}, "
                                            f"{int(info[2]) - 1}]")
        body = proc.stdout[24:]
        outs = []
        for o, t in zip(out_off, cp.output_types, strict=True):
            want = np.dtype(dt.to_numpy_name(t.dtype)).newbyteorder("<")
            raw = np.frombuffer(body[o:o + t.nbytes], want, count=t.size)
            outs.append(raw.astype(want.newbyteorder("=")).reshape(t.shape).copy())
        return outs

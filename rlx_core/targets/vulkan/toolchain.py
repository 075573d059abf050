"""GLSL 4.50 (or HLSL) -> SPIR-V with glslang, validated by spirv-val.

glslang runs in one long-lived server process where it can be built (``glslang_server.py``:
same libraries, byte-identical output, ~20x faster per kernel), else as ``glslangValidator``.
The tools come from Debian's ``glslang-tools``, ``glslang-dev`` and ``spirv-tools``
(``RLX_GLSLANG`` and ``RLX_SPIRV_VAL`` override the paths). A shader glslang rejects, or SPIR-V spirv-val rejects,
is a ShaderCompileError naming the line and the node.

Validated SPIR-V is also kept in the vulkan target's build cache (``build_cache``:
``<RLX_CACHE_DIR>/vulkan``, else ``~/.cache/rlx/vulkan``), each file with its integrity record
(``targets/verified_files.py``, as the cpu target's: a damaged one quarantined and rebuilt;
``RLX_SPIRV_CACHE=off`` disables it), content-addressed by the tools' identity, their arguments
and the source, so another process compiling the same shader (the next test, the next ONNX
case) skips both tools. It is best-effort: an unwritable cache only costs the compile.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from rlx_core.errors import RlxError, TargetUnavailableError
from rlx_core.targets import verified_files
from rlx_core.targets.build_cache import target_cache_dir
from rlx_core.targets.gpu_common.compile_error import compile_error
from rlx_core.targets.tool_process import run_tool
from rlx_core.targets.vulkan import glslang_server

# glslang: "ERROR: /tmp/x/k.comp:12: 'undeclared' : undeclared identifier"
GLSLANG_FILE_LINE = r"ERROR: [^:]*:(\d+):"


def tools() -> tuple[str, str]:
    """The glslangValidator and spirv-val executables, or TargetUnavailableError."""
    glslang = os.environ.get("RLX_GLSLANG") or shutil.which("glslangValidator")
    val = os.environ.get("RLX_SPIRV_VAL") or shutil.which("spirv-val")
    if not glslang or not val:
        missing = "glslangValidator" if not glslang else "spirv-val"
        raise TargetUnavailableError(f"{missing} not found (Debian: glslang-tools, spirv-tools)")
    return glslang, val


SPIRV_MAGIC = (0x07230203).to_bytes(4, "little")


def cache_dir() -> Path:
    """Where validated SPIR-V and the glslang server are kept (build_cache:
    ``<RLX_CACHE_DIR>/vulkan``, else ``~/.cache/rlx/vulkan``), created if missing; the
    temporaries a killed process left there are deleted once per process."""
    return target_cache_dir("vulkan")


def _cache_file(glslang: str, val: str, stage: str, source: str) -> Path | None:
    if os.environ.get("RLX_SPIRV_CACHE", "") == "off":
        return None
    h = hashlib.sha256()
    for tool in (glslang, val):  # a reinstalled tool is another key
        try:
            st = os.stat(tool)
            h.update(f"{tool}:{st.st_size}:{st.st_mtime_ns};".encode())
        except OSError:
            return None
    h.update(f"{stage};".encode() + source.encode())
    try:
        return cache_dir() / f"spirv-{h.hexdigest()[:40]}.spv"
    except (OSError, RlxError):
        return None


def _cached(path: Path | None) -> bytes | None:
    """The cached SPIR-V when its record vouches for it (else it is quarantined: a miss)."""
    try:
        data = path.read_bytes() if path is not None and verified_files.lookup(path) else b""
    except OSError:
        return None
    return data if data[:4] == SPIRV_MAGIC else None


def _keep(path: Path | None, spirv: bytes) -> None:
    """Keep ``spirv`` as the verified entry ``path``, best-effort: a cache that cannot take it
    (no folder, disk full: RLX-R014) costs the next process a compile, not this one its
    shader."""
    if path is None:
        return
    try:
        verified_files.publish_bytes(path, spirv)
    except RlxError:
        pass


def to_spirv(kernel: str, source: str, stage: str = "comp", api: str = "Vulkan") -> bytes:
    """SPIR-V of one compute shader (GLSL, or HLSL with ``-D``), validated."""
    glslang, val = tools()
    path = _cache_file(glslang, val, stage, source)
    hit = _cached(path)
    if hit is not None:
        return hit
    spirv = _compile(glslang, val, kernel, source, stage, api)
    _keep(path, spirv)
    return spirv


def _compile(glslang: str, val: str, kernel: str, source: str, stage: str, api: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="rlx-spv-") as tmp:
        src = Path(tmp) / f"k.{stage}"
        out = Path(tmp) / "k.spv"
        env = "vulkan1.1" if "GL_KHR_shader_subgroup" in source else "vulkan1.0"
        served = glslang_server.compile_shader(source, stage == "hlsl", env == "vulkan1.1")
        if served is not None:
            ok, body = served
            if not ok:
                raise compile_error(f"glslang ({api})", kernel, source,
                                    body.decode(errors="replace"), GLSLANG_FILE_LINE)
            out.write_bytes(body)
            return _validated(val, env, out, kernel, source)
        src.write_text(source)  # only glslangValidator reads the source from a file
        args = [glslang, "-V", "--target-env", env, "-o", str(out), str(src)]
        if stage == "hlsl":
            args[1:1] = ["-D", "-S", "comp", "-e", "main"]
        r = run_tool(args, timeout=120)
        if r.returncode != 0:
            raise compile_error(f"glslang ({api})", kernel, source, r.stdout + r.stderr,
                                GLSLANG_FILE_LINE)
        return _validated(val, env, out, kernel, source)


def _validated(val: str, env: str, out: Path, kernel: str, source: str) -> bytes:
    """The SPIR-V in ``out`` once spirv-val accepts it."""
    v = run_tool([val, "--target-env", env, str(out)], timeout=120)
    if v.returncode != 0:
        raise compile_error("spirv-val", kernel, source, v.stdout + v.stderr)
    return out.read_bytes()

"""The in-process glslang server: the same SPIR-V as glslangValidator, its errors, its fallbacks."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets import verified_files
from rlx_core.targets.gpu_common.compile_error import ShaderCompileError
from rlx_core.targets.registry import get_target
from rlx_core.targets.vulkan import glslang_server, toolchain
from tests.dispatch.graphs import GraphMaker

pytestmark = pytest.mark.skipif(
    not glslang_server.status()[0] or not shutil.which("glslangValidator"),
    reason=f"glslang server unusable here: {glslang_server.status()[1]}")


def _kernels(target: str) -> list[str]:
    ok, why = get_target(target).available()
    if not ok:
        pytest.skip(f"{target} unavailable here: {why}")
    m = GraphMaker()
    x = m.input("x", "f32", (4, 33))
    s = m.op("exp", [m.op("mul", [x, x])])
    g = m.graph(m.op("reduce_sum", [s], axes=(1,)))
    exe = rlx.compile(g, np.ones((4, 33), np.float32), target=target)
    return list(exe.program.sources.values())


def _vk11(source: str) -> bool:
    return "GL_KHR_shader_subgroup" in source


def _validator(source: str, hlsl: bool, tmp: Path) -> bytes:
    src, out = tmp / ("k.hlsl" if hlsl else "k.comp"), tmp / "k.spv"
    src.write_text(source)
    env = "vulkan1.1" if _vk11(source) else "vulkan1.0"
    args = ["glslangValidator", "-V", "--target-env", env, "-o", str(out), str(src)]
    if hlsl:
        args[1:1] = ["-D", "-S", "comp", "-e", "main"]
    subprocess.run(args, check=True, capture_output=True)
    return out.read_bytes()


@pytest.mark.parametrize("target", ["vulkan", "directx"])
def test_the_server_writes_the_bytes_glslang_validator_writes(target: str,
                                                             tmp_path: Path) -> None:
    hlsl = target == "directx"
    sources = _kernels(target)
    assert sources
    for source in sources:
        served = glslang_server.compile_shader(source, hlsl, _vk11(source))
        assert served is not None and served[0], served
        assert served[1] == _validator(source, hlsl, tmp_path)


def test_a_rejected_shader_is_the_typed_error_with_its_line() -> None:
    bad = "#version 450\nlayout(local_size_x=1) in;\nvoid main() {\n  nope = 1;\n}\n"
    with pytest.raises(ShaderCompileError) as err:
        toolchain.to_spirv("k0", bad)
    assert err.value.code == "RLX-G001" and "at line 4" in str(err.value)


def test_without_the_server_glslang_validator_compiles_the_same(monkeypatch) -> None:
    source = _kernels("vulkan")[0]
    served = toolchain.to_spirv("k", source)
    monkeypatch.setenv("RLX_GLSLANG_SERVER", "0")
    assert glslang_server.compile_shader(source, False, _vk11(source)) is None
    assert toolchain.to_spirv("k", source) == served


def test_a_dead_server_is_replaced_and_a_second_death_falls_back(monkeypatch) -> None:
    source = _kernels("vulkan")[0]
    monkeypatch.setattr(glslang_server._SERVER, "deaths", 0)
    proc = glslang_server._process()
    assert proc is not None
    proc.kill()
    proc.wait()
    # the next call notices the dead process and starts another one
    assert glslang_server.compile_shader(source, False, _vk11(source))[0]
    # a server that dies mid-request counts as a death; after two, glslangValidator takes over
    monkeypatch.setattr(glslang_server._SERVER, "deaths", 2)
    assert glslang_server.compile_shader(source, False, _vk11(source)) is None
    assert toolchain.to_spirv("k", source)[:4] == b"\x03\x02\x23\x07"


def test_spirv_lives_in_the_vulkan_cache_with_its_record_and_a_bad_entry_is_rebuilt(
        monkeypatch, tmp_path: Path) -> None:
    """SPIR-V goes to the vulkan target's own folder (<RLX_CACHE_DIR>/vulkan), not the cpu's."""
    source = _kernels("vulkan")[0]
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    first = toolchain.to_spirv("k", source)
    assert not list(tmp_path.glob("spirv-*"))  # nothing in the cpu target's folder
    [spv] = list((tmp_path / "vulkan").glob("spirv-*.spv"))
    assert spv.read_bytes() == first and spv.with_name(spv.name + ".sha256").is_file()
    spv.write_bytes(first[:8] + b"\0" * (len(first) - 8))  # damaged: same size, other bytes
    verified_files.forget(spv)  # as another process would see it
    assert toolchain.to_spirv("k", source) == first  # the record caught it: compiled again
    assert any((tmp_path / "vulkan" / "quarantine").iterdir())
    assert spv.read_bytes() == first


def test_spirv_is_returned_when_the_cache_cannot_keep_it(monkeypatch, tmp_path: Path) -> None:
    """The SPIR-V cache is best-effort: a full disk (RLX-R014 inside) costs the next process a
    compile, not this one its shader, and leaves no temporary or half-written entry behind."""
    source = _kernels("vulkan")[0]
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path / "first"))
    first = toolchain.to_spirv("k", source)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path / "full"))
    monkeypatch.setattr(verified_files.os, "replace", full)
    assert toolchain.to_spirv("k", source) == first
    monkeypatch.undo()
    assert not [p.name for p in (tmp_path / "full" / "vulkan").iterdir() if p.is_file()]


def test_the_server_is_used_where_chmod_is_refused(monkeypatch, tmp_path: Path) -> None:
    """An entry another user published into a shared cache, or a FAT/SMB mount: chmod is
    EPERM. The published server is executable as it is; building and finding it needs none."""
    def refuse(*a, **k):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(glslang_server, "_SERVER", glslang_server._Server())
    monkeypatch.setattr(glslang_server.os, "chmod", refuse)
    exe = glslang_server.executable()
    assert exe is not None, glslang_server._SERVER.why
    assert exe.parent == tmp_path / "vulkan" and exe.stat().st_mode & 0o100
    source = _kernels("vulkan")[0]
    try:
        served = glslang_server.compile_shader(source, False, _vk11(source))
    finally:
        glslang_server._close()  # this test's server, before the module's own comes back
    assert served is not None and served[0] and served[1][:4] == b"\x03\x02\x23\x07"

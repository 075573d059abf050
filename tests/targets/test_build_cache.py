"""Every target's build cache follows one convention (rlx_core/targets/build_cache.py):
RLX_CACHE_DIR is the cpu target's folder and holds the others' folders, a folder each; unset,
they sit beside the cpu's under ~/.cache/rlx."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rlx_core.targets import build_cache, verified_files
from rlx_core.targets.cortex_m import toolchain as cortex_m
from rlx_core.targets.cpu import cache as cpu_cache
from rlx_core.targets.fpga import toolchain as fpga
from rlx_core.targets.hexagon import emulator as hexagon
from rlx_core.targets.vulkan import toolchain as vulkan

FOLDERS = {"cortex-m": cortex_m.cache_root, "fpga": fpga.cache_root, "hexagon": hexagon.cache_dir,
           "vulkan": vulkan.cache_dir}


def test_the_variable_names_the_cpu_folder_and_holds_every_other_targets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path / "cache"))
    assert cpu_cache.cache_dir() == tmp_path / "cache"
    for target, folder in FOLDERS.items():
        assert folder() == tmp_path / "cache" / target
        assert (tmp_path / "cache" / target).is_dir()  # created on first use


def test_unset_every_folder_sits_under_the_home_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RLX_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert build_cache.configured() == tmp_path / ".cache" / "rlx" / "cpu"
    for target, folder in FOLDERS.items():
        assert folder() == tmp_path / ".cache" / "rlx" / target
    # blank is unset, as the cpu target always read it
    monkeypatch.setenv("RLX_CACHE_DIR", "")
    assert build_cache.configured("fpga") == tmp_path / ".cache" / "rlx" / "fpga"


@pytest.mark.parametrize("target", sorted(FOLDERS))
def test_each_folder_drops_the_temporaries_a_killed_process_left(
    target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the cpu folder's: a temporary older than any compile is deleted on first use, one
    being written now is kept."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    folder = tmp_path / target
    folder.mkdir()
    stale, fresh = folder / "entry-a.bin.x1.tmp", folder / "entry-b.bin.x2.tmp"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"half")
    old = time.time() - 2 * verified_files.STALE_TMP_SECONDS
    os.utime(stale, (old, old))
    assert FOLDERS[target]() == folder
    assert not stale.exists() and fresh.exists()


@pytest.mark.parametrize("target", sorted(FOLDERS))
def test_a_folder_that_cannot_be_made_is_the_typed_error(
    target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file where the target's folder goes: RLX-R014 naming the folder, not a raw OSError."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    (tmp_path / target).write_text("not a folder")
    with pytest.raises(verified_files.CacheWriteError) as info:
        FOLDERS[target]()
    assert info.value.code == "RLX-R014" and str(tmp_path / target) in info.value.message

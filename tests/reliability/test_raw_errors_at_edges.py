"""Found item 7 of issue 31: inputs at the edges of the public API (weights files, weight
dicts, keyword calls, model files, output paths) end in typed errors, never raw ones."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.cli import ModelImportError, OutputPathError, _check_output, load_model_file, main
from rlx_core.errors import ArgumentError
from rlx_core.frontend.weights import (
    WeightsFileError,
    WeightsMismatchError,
    bind_weights,
    read_header,
)


def _safetensors(tmp_path: Path, header: bytes) -> Path:
    p = tmp_path / "w.safetensors"
    p.write_bytes(struct.pack("<Q", len(header)) + header)
    return p


@pytest.mark.parametrize("header, says", [
    (b"[" * 200_000 + b"]" * 200_000, "nests JSON too deeply"),  # ~400 KB: RecursionError before
    (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "nests JSON too deeply"),
    (b'{"w": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 4]}}', "malformed entry"),
    (b'{"w": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}}', "unsupported dtype"),
    (b'{"w": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 4]}}',
     "not valid JSON"),
    (b'{"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}', "malformed entry"),
    (b'{"w": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 4]}}', "malformed entry"),
    (b'{"w": ' + b"[" * 50 + b"]" * 50 + b"}", "malformed entry"),
    (b'"just a string"', "not a JSON object"),
])
def test_hostile_safetensors_headers_are_typed(tmp_path, header, says) -> None:
    with pytest.raises(WeightsFileError, match=says) as info:
        read_header(_safetensors(tmp_path, header))
    assert info.value.hint and len(info.value.message) < 2000  # bounded, whatever the input


def test_many_bad_entries_are_listed_bounded(tmp_path) -> None:
    entries = ",".join(f'"w{i}": {{"dtype": "X", "shape": [1], "data_offsets": [0, 1]}}'
                       for i in range(500))
    with pytest.raises(WeightsFileError, match="500 corrupted header entries") as info:
        read_header(_safetensors(tmp_path, ("{" + entries + "}").encode()))
    assert "... and 480 more" in info.value.message


@pytest.fixture(scope="module")
def graph():
    return rlx.trace(lambda x: x @ rlx.param(np.ones((3, 2), np.float32), "w"),
                     np.ones((1, 3), np.float32))


@pytest.mark.parametrize("value, says", [
    ("hello", "a str ('hello'), not an array"), (None, "a NoneType"), ({"a": 1}, "a dict"),
    (np.ones((3, 2), object), "which rlx has no dtype for"),
    (np.ones((2, 3), np.float32), "found f32[2,3]"),
])
def test_bind_weights_with_non_arrays_is_typed(graph, value, says) -> None:
    with pytest.raises(WeightsMismatchError, match=r"expected f32\[3,2\]") as info:
        bind_weights(graph, {"w": value})
    assert says in info.value.message
    assert info.value.mismatched[0][0] == "w"


def test_bind_weights_still_binds_arrays(graph) -> None:
    g = bind_weights(graph, {"w": np.full((3, 2), 2.0, np.float32)})
    out = rlx.compile(g, np.ones((1, 3), np.float32), target="numpy")(np.ones((1, 3), np.float32))
    np.testing.assert_allclose(out, [[6.0, 6.0]])


@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_jit_accepts_keyword_arguments(target) -> None:
    from rlx_core.targets.registry import get_target

    ok, why = get_target(target).available()
    if not ok:
        pytest.skip(f"{target}: {why}")
    f = rlx.jit(lambda x, y, scale=2.0: x * scale + y, target=target)
    a, b = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    np.testing.assert_allclose(f(x=a, y=b), a * 2 + 1)  # first call: a miss, by keyword
    np.testing.assert_allclose(f(a, y=b), a * 2 + 1)  # a hit through the module's keyword path
    np.testing.assert_allclose(f(a, b), a * 2 + 1)
    assert (f.misses, f.hits) == (1, 2)
    with pytest.raises(ArgumentError, match="unexpected keyword argument 'z'"):
        f(a, b, z=a)
    with pytest.raises(ArgumentError, match="multiple values for argument 'x'"):
        f(a, x=a)
    with pytest.raises(ArgumentError, match="'y' is given but 'x'|missing a required"):
        f(y=b)


def test_keyword_only_parameters_are_refused_typed() -> None:
    def g(x, *, y):
        return x + y

    f = rlx.jit(g, target="numpy")
    with pytest.raises(ArgumentError, match="keyword-only argument 'y'") as info:
        f(np.ones(2, np.float32), y=np.ones(2, np.float32))
    assert info.value.hint


def test_skipping_a_default_before_a_keyword_is_refused() -> None:
    f = rlx.jit(lambda x, s=2.0, y=None: x * s + y, target="numpy")
    with pytest.raises(ArgumentError, match="'y' is given but 's' before it"):
        f(np.ones(2, np.float32), y=np.ones(2, np.float32))


def _model(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "m.py"
    p.write_text(text)
    return p


def test_model_file_with_a_syntax_error(tmp_path, capsys) -> None:
    p = _model(tmp_path, "import numpy as np\ndef model(x):\n    return x +\n")
    with pytest.raises(ModelImportError, match=r"m.py:3: syntax error"):
        load_model_file(p)
    assert main(["compile", str(p)]) == 2
    err = capsys.readouterr().err
    assert "[RLX-C002]" in err and "Traceback" not in err and "return x +" in err


def test_model_file_that_raises_at_import(tmp_path) -> None:
    p = _model(tmp_path, "x = 1\nimport no_such_module_for_rlx_tests\n")
    with pytest.raises(ModelImportError, match=r"m.py:2: .*ModuleNotFoundError"):
        load_model_file(p)


def test_html_into_a_missing_folder(tmp_path, capsys) -> None:
    pytest.importorskip("rlx_explorer")
    p = _model(tmp_path, "import numpy as np\ndef model(x):\n    return x * 2.0\n"
                         "def example_inputs():\n    return (np.ones(3, np.float32),)\n")
    out = tmp_path / "no" / "such" / "x.html"
    assert main(["explore", str(p), "--html", str(out)]) == 2
    err = capsys.readouterr().err
    assert "[RLX-C003]" in err and "does not exist" in err and "Traceback" not in err
    assert main(["tour", str(p), "--html", str(out)]) == 2
    assert "[RLX-C003]" in capsys.readouterr().err
    with pytest.raises(OutputPathError, match="it is a folder"):
        _check_output(tmp_path)


@pytest.mark.parametrize("record", [
    '{"opt_flags": [5], "openmp": true, "notes": [], "avx512": false, "avx2_fma": false}',
    '{"opt_flags": ["-O3", "-fplugin=/tmp/x.so"], "openmp": true, "notes": [], "avx512": false,'
    ' "avx2_fma": false}',
    '{"opt_flags": "-O3", "openmp": 1, "notes": null, "avx512": 0, "avx2_fma": 0}',
    "[1, 2]", "garbage", "", '{"opt_flags": ["-O2"]}',
])
def test_a_damaged_toolchain_probe_is_probed_again(tmp_path, monkeypatch, record) -> None:
    from rlx_core.targets.cpu import toolchain

    if toolchain._compiler_path()[0] is None:
        pytest.skip("no C compiler here")
    probes: list[str] = []

    def probe(path: str, version: str) -> toolchain.Compiler:  # the real one runs cc 4 times
        probes.append(path)
        return toolchain.Compiler(path, version, ("-O2",), False, ("probed",), False, False)

    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(toolchain, "_probe", probe)
    monkeypatch.setattr(toolchain, "_COMPILERS", {})
    toolchain.find_compiler()  # writes the probe record
    (record_file,) = tmp_path.glob("probe-*.json")
    monkeypatch.setattr(toolchain, "_COMPILERS", {})
    assert toolchain.find_compiler().notes == ("probed",) and len(probes) == 1  # a good record
    record_file.write_text(record)
    monkeypatch.setattr(toolchain, "_COMPILERS", {})
    again = toolchain.find_compiler()
    assert len(probes) == 2 and again.opt_flags == ("-O2",)  # probed again, not trusted
    assert json.loads(record_file.read_text())["opt_flags"] == ["-O2"]  # and rewritten

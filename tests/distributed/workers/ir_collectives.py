"""Worker (2 ranks): the collective IR ops compiled and run on the numpy target, each against
numpy on every rank's data; their gradients; send/recv; a program built for another size."""

import numpy as np

import rlx_core as rlx
import rlx_core.distributed as D
from rlx_core.ir.parser import parse
from rlx_core.ir.printer import print_graph

comm = D.init(timeout=30)
r, n = comm.rank, comm.size
every = [np.arange(8, dtype=np.float32).reshape(2, 4) * (k + 1) - 3 * k for k in range(n)]
x = every[r]


def check(fn, want, *args):
    """Trace, print/parse round-trip, compile for numpy, run; compare with numpy."""
    args = args or (x,)
    g = rlx.trace(fn, *args)
    assert print_graph(parse(print_graph(g))) == print_graph(g)
    got = rlx.compile(fn, *args)(*args)
    np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=fn.__name__)
    return g


for op, ref in (("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min)):
    check(lambda a, op=op: D.all_reduce(a, op), ref(every, axis=0))
cat = np.concatenate(every, axis=1)
check(lambda a: D.all_gather(a, axis=1), cat)
total = np.sum(every, axis=0)
check(lambda a: D.reduce_scatter(a, axis=1), np.split(total, n, axis=1)[r])
check(lambda a: D.broadcast(a, root=n - 1), every[n - 1])
# eager calls run the same op at once
np.testing.assert_allclose(D.all_gather(x, axis=0), np.concatenate(every, axis=0))

# gradients (Megatron's convention: a replicated value's cotangent is the full one)
ws = [np.random.default_rng(k).standard_normal((4, 3)).astype(np.float32) for k in range(n)]
w = ws[r]


def column_parallel(a, wt):  # f: replicate the input, each rank its own columns, then g
    return (D.all_reduce(D.replicate(a) @ wt) ** 2).sum()


gx, gw = rlx.grad(column_parallel, argnums=(0, 1))(x, w)
y = sum(xk @ wk for xk, wk in zip(every, ws, strict=False))  # the all-reduced y is replicated
np.testing.assert_allclose(gx, sum((2 * y) @ wk.T for wk in ws), rtol=1e-5)
np.testing.assert_allclose(gw, x.T @ (2 * y), rtol=1e-5)
gx = rlx.grad(lambda a: (D.all_gather(a, axis=0) * 3.0).sum())(x)
np.testing.assert_allclose(gx, np.full_like(x, 3.0))
gx = rlx.grad(lambda a: (D.reduce_scatter(a, axis=1) ** 2).sum())(x)
np.testing.assert_allclose(gx, np.concatenate([2 * c for c in np.split(total, n, axis=1)], 1),
                           rtol=1e-6)
gx = rlx.grad(lambda a: (D.broadcast(a, root=0) * 2.0).sum())(x)
np.testing.assert_allclose(gx, np.full_like(x, 2.0 if r == 0 else 0.0))

# send / recv: rank 0 sends, the last rank doubles and sends back (one program each)
if r == 0:
    def ping(a):  # traced in this order: send, then recv (programs keep the trace order)
        sent = D.send(a, n - 1, tag=4)
        return D.recv((2, 4), "f32", peer=n - 1, tag=5) + sent * 0
    g = check(ping, 2 * x)
    assert [nd.op for nd in g.nodes].count("send") == 1
elif r == n - 1:
    check(lambda a: D.send(D.recv((2, 4), "f32", peer=0, tag=4) * 2.0, 0, tag=5) + a * 0,
          2 * every[0])
# a send whose result nobody uses is still run (DCE keeps effects)
if r == 0:
    def fire(a):
        D.send(a + 1.0, n - 1, tag=9)
        return a
    rlx.compile(fire, x)(x)
elif r == n - 1:
    np.testing.assert_allclose(D.recv((2, 4), "f32", peer=0, tag=9), every[0] + 1)

# in place: the compiled op hands MPI the result's own buffer (out=, an arena slot, a new
# output array), never a temporary that is copied after: seen at the mpi4py calls themselves
seen = []
plain_mpi = comm.comm


class SpyMPI:
    """The world's mpi4py communicator, noting the receive buffer of each reduce/gather."""

    def __getattr__(self, name):
        return getattr(plain_mpi, name)

    def Iallreduce(self, send, recv, op):  # noqa: N802 - mpi4py's name
        seen.append(recv)
        return plain_mpi.Iallreduce(send, recv, op=op)

    def Iallgather(self, send, recv):  # noqa: N802 - mpi4py's name
        seen.append(recv)
        return plain_mpi.Iallgather(send, recv)


comm.comm = SpyMPI()
exe = rlx.compile(lambda a: D.all_reduce(a), x)
out = np.empty_like(x)
assert exe(x, out=out) is out and seen[-1] is out
np.testing.assert_allclose(out, total, rtol=1e-6)
fresh = exe(x)
assert np.shares_memory(seen[-1], fresh) and not np.shares_memory(fresh, x)
np.testing.assert_allclose(fresh, total, rtol=1e-6)
exe = rlx.compile(lambda a: D.all_reduce(a * 2.0, "max") + 1.0, x)  # result in an arena slot
np.testing.assert_allclose(exe(x), 2 * np.max(every, axis=0) + 1, rtol=1e-6)
assert seen[-1] is not None and seen[-1].base is not None  # a view of the arena
gathered = np.empty((2 * n, 4), np.float32)
exe = rlx.compile(lambda a: D.all_gather(a, axis=0), x)
assert exe(x, out=gathered) is gathered and np.shares_memory(seen[-1], gathered)
np.testing.assert_allclose(gathered, np.concatenate(every, axis=0))
comm.comm = plain_mpi

# a program built for another group size is refused when it runs
exe = rlx.compile(lambda a: D.all_reduce(a, ranks=n + 1), x)
try:
    exe(x)
except D.RankCountError as err:
    assert err.code == "RLX-N006" and f"runs on {n}" in err.message
    print(f"rank {r}: {err.message}", flush=True)
else:
    raise AssertionError("a program for another rank count ran")
comm.barrier()
print(f"rank {r}/{n}: collective IR ops ok", flush=True)

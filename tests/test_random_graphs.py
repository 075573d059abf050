"""Hypothesis: random well-typed programs compiled for the numpy target equal direct numpy.

A program is a list of steps over an environment of values; the same program is interpreted
once with numpy and once with rlx tensors (traced and compiled), and the results compared.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rlx_core as rlx


def _np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# name -> (numpy function, rlx function); both take (*operands, **params)
OPS = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b),
    "maximum": (np.maximum, rlx.maximum),
    "where": (lambda a, b: np.where(a > b, a, b * 0.5), lambda a, b: rlx.where(a > b, a, b * 0.5)),
    "neg": (lambda a: -a, lambda a: -a),
    "abs": (np.abs, rlx.abs),
    "tanh": (np.tanh, rlx.tanh),
    "exp_tanh": (lambda a: np.exp(np.tanh(a)), lambda a: rlx.exp(rlx.tanh(a))),
    "sin": (np.sin, rlx.sin),
    "scale": (lambda a: a * 0.5 + 1.0, lambda a: a * 0.5 + 1.0),
    "sum": (lambda a, axis: a.sum(axis=axis), lambda a, axis: a.sum(axis=axis)),
    "max": (lambda a, axis: a.max(axis=axis), lambda a, axis: a.max(axis=axis)),
    "mean_keep": (lambda a, axis: a.mean(axis=axis, keepdims=True),
                  lambda a, axis: a.mean(axis=axis, keepdims=True)),
    "transpose": (lambda a, perm: a.transpose(perm), lambda a, perm: a.transpose(perm)),
    "flatten": (lambda a: a.reshape(-1), lambda a: a.reshape(-1)),
    "slice": (lambda a: a[::2], lambda a: a[::2]),
    "gram": (lambda a: a @ a.swapaxes(-1, -2), lambda a: a @ a.swapaxes(-1, -2)),
    "softmax": (lambda a, axis: _np_softmax(a, axis), lambda a, axis: rlx.nn.softmax(a, axis)),
    "concat": (lambda a, axis: np.concatenate([a, a * 2], axis),
               lambda a, axis: rlx.concat([a, a * 2], axis)),
}
BINARY = {"add", "sub", "mul", "maximum", "where"}
AXIS = {"sum", "max", "mean_keep", "softmax", "concat"}

shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


def _broadcastable(a, b):
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


@st.composite
def programs(draw):
    inputs = [draw(shapes) for _ in range(draw(st.integers(1, 3)))]
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    env = [rng.standard_normal(s).astype(np.float32) for s in inputs]
    arrays = list(env)
    steps = []
    for _ in range(draw(st.integers(1, 7))):
        name = draw(st.sampled_from(sorted(OPS)))
        a = draw(st.integers(0, len(env) - 1))
        x = env[a]
        params = {}
        operands = [a]
        if name in BINARY:
            partners = [i for i, v in enumerate(env) if _broadcastable(v.shape, x.shape)]
            operands.append(draw(st.sampled_from(partners)))
        if name in AXIS:
            if x.ndim == 0:
                continue
            params["axis"] = draw(st.integers(-x.ndim, x.ndim - 1))
        if name == "transpose":
            if x.ndim < 2:
                continue
            params["perm"] = tuple(draw(st.permutations(range(x.ndim))))
        if name in ("slice",) and x.ndim == 0:
            continue
        if name == "gram" and x.ndim < 2:
            continue
        value = OPS[name][0](*[env[i] for i in operands], **params)
        if not np.all(np.isfinite(value)) or np.max(np.abs(value), initial=0) > 1e4:
            continue
        steps.append((name, tuple(operands), params))
        env.append(np.asarray(value, np.float32))
    outputs = (len(env) - 1,) if steps else (0,)
    return arrays, steps, outputs


def run(program_steps, outputs, args, which):
    env = list(args)
    for name, operands, params in program_steps:
        env.append(OPS[name][which](*[env[i] for i in operands], **params))
    return tuple(env[i] for i in outputs)


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_random_program_matches_numpy(prog):
    arrays, steps, outputs = prog

    def fn(*xs):
        return run(steps, outputs, xs, 1)

    exe = rlx.compile(fn, *arrays, target="numpy", record=False)
    got = exe(*arrays)
    got = got if isinstance(got, tuple) else (got,)
    want = run(steps, outputs, arrays, 0)
    for g, w in zip(got, want, strict=False):
        w = np.asarray(w)
        g = np.asarray(g)
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(w).max(initial=0))))

"""The CuPy kernels (``kernels/gpu.py``) against their references: the same arguments everywhere
(checked on every backend), the same results on a GPU (run under ``TPCORE_BACKEND=cupy``)."""

import inspect

import numpy as np
import pytest
from tpcore.kernels import gpu as G

from tpcore.backend import asarray, backend_name, to_host
from tpcore.counter_rng import philox_fill
from tpcore.nn import attention as A
from tpcore.nn import functional as F
from tpcore.nn import losses as L
from tpcore.nn import optim as O
from tpcore.nn import relax as R

REFERENCES = [O.adam_update, R.gumbel_from_uniform, F.gelu_forward, F.softmax,
              R.gumbel_softmax_forward, F.softmax_backward, F.log_softmax_forward,
              F.log_softmax_backward, F.layer_norm_forward, F.layer_norm_backward,
              F.linear_forward, F.linear_backward, F.linear_gelu_forward, A.masked_softmax,
              L.cross_entropy_grad, philox_fill]


def test_every_gpu_kernel_takes_its_references_arguments():
    public = {n for n, f in vars(G).items() if inspect.isfunction(f) and not n.startswith("_")
              and f.__module__ == G.__name__}
    assert public == {f.__name__ for f in REFERENCES}
    for ref in REFERENCES:
        ours = inspect.signature(getattr(G, ref.__name__)).parameters
        theirs = inspect.signature(ref.__wrapped__).parameters
        assert [(p.name, p.default) for p in ours.values()] == \
            [(p.name, p.default) for p in theirs.values()], ref.__name__


gpu = pytest.mark.skipif(backend_name() != "cupy", reason="the CuPy kernels need a GPU")
DTYPES = [np.float32, np.float64]


def _close(got, want, dtype):
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        if g is None or isinstance(g, (int, float)):
            assert g == w
            continue
        g, w = to_host(g), to_host(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def _x(rng, shape, dtype, scale=1.0):
    return asarray((scale * rng.standard_normal(shape)).astype(dtype))


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 5, 16), (7, 1), (6, 31), (6, 32), (2, 4, 300)])
def test_row_kernels_equal_their_references(rng, dtype, shape):
    x, dy = _x(rng, shape, dtype, 3.0), _x(rng, shape, dtype)
    noise = _x(rng, shape, dtype)
    _close(G.softmax(x), F.softmax.__wrapped__(x), dtype)
    for n in (None, noise):
        got = G.gumbel_softmax_forward(x, n, 0.7)
        want = R.gumbel_softmax_forward.__wrapped__(x, n, 0.7)
        _close(got[0], want[0], dtype)
        _close(G.softmax_backward(dy, got[1]), F.softmax_backward.__wrapped__(dy, want[1]),
               dtype)
    y, cache = G.log_softmax_forward(x)
    y_ref, cache_ref = F.log_softmax_forward.__wrapped__(x)
    _close(y, y_ref, dtype)
    _close(G.log_softmax_backward(dy, cache), F.log_softmax_backward.__wrapped__(dy, cache_ref),
           dtype)
    gamma, beta = _x(rng, shape[-1:], dtype), _x(rng, shape[-1:], dtype)
    y, cache = G.layer_norm_forward(x, gamma, beta, 1e-5)
    y_ref, cache_ref = F.layer_norm_forward.__wrapped__(x, gamma, beta, 1e-5)
    _close((y, *cache[:2]), (y_ref, *cache_ref[:2]), dtype)
    _close(G.layer_norm_backward(dy, cache), F.layer_norm_backward.__wrapped__(dy, cache_ref),
           dtype)


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [False, True])
def test_linear_kernels_equal_their_references(rng, dtype, bias):
    """One product over the leading dimensions, the bias gradient as a ones-vector product."""
    x, w = _x(rng, (3, 5, 16), dtype), _x(rng, (16, 7), dtype)
    b = _x(rng, (7,), dtype) if bias else None
    y, cache = G.linear_forward(x, w, b)
    y_ref, cache_ref = F.linear_forward.__wrapped__(x, w, b)
    _close(y, y_ref, dtype)
    dy = _x(rng, y_ref.shape, dtype)
    _close(G.linear_backward(dy, cache), F.linear_backward.__wrapped__(dy, cache_ref), dtype)


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_gelu_kernel_equals_its_reference(rng, dtype):
    """The product, then bias and GELU in one pass: the activation, the derivative and the
    linear layer's cache as the two layers' references give them."""
    x, w, b = _x(rng, (3, 5, 16), dtype), _x(rng, (16, 40), dtype), _x(rng, (40,), dtype)
    y, (linear_cache, deriv) = G.linear_gelu_forward(x, w, b)
    y_ref, (linear_ref, deriv_ref) = F.linear_gelu_forward.__wrapped__(x, w, b)
    _close((y, deriv), (y_ref, deriv_ref), dtype)
    assert linear_cache[0] is x and linear_cache[1] is w and linear_cache[2] is True
    assert linear_ref[2] is True


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_elementwise_kernels_equal_their_references(rng, dtype):
    x = _x(rng, (6, 33), dtype, 2.0)
    _close(G.gelu_forward(x), F.gelu_forward.__wrapped__(x), dtype)
    u = asarray(rng.uniform(0, 1, (4, 50)).astype(dtype))
    u[0, :2] = asarray(np.array([0.0, 1.0], dtype))  # clipped ends
    _close(G.gumbel_from_uniform(u.copy()), R.gumbel_from_uniform.__wrapped__(u.copy()), dtype)
    w, g, m = _x(rng, (40,), dtype), _x(rng, (40,), dtype), _x(rng, (40,), dtype)
    v = asarray(np.abs(rng.standard_normal(40)).astype(dtype))
    ours = [a.copy() for a in (w, m, v)]
    theirs = [a.copy() for a in (w, m, v)]
    assert G.adam_update(ours[0], g, ours[1], ours[2], 0.9, 0.999, 0.01, 1e-8) is None
    O.adam_update.__wrapped__(theirs[0], g, theirs[1], theirs[2], 0.9, 0.999, 0.01, 1e-8)
    _close(tuple(ours), tuple(theirs), dtype)


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nk", [5, 40])
@pytest.mark.parametrize("mask_shape", [None, (3, 1), (1, 1), (3, 4), (1, 4)])
def test_the_masked_softmax_kernel_equals_its_reference(rng, dtype, nk, mask_shape):
    """Scores ``(3, 4, nk, nk)``; the mask broadcast along the batch, the heads, both or
    neither (causal rows, and one row masked whole: a uniform row)."""
    x = _x(rng, (3, 4, nk, nk), dtype, 4.0)
    mask = None
    if mask_shape is not None:
        m = rng.random((*mask_shape, nk, nk)) > 0.4
        m[..., 0, :] = False
        mask = asarray(m)
    _close(G.masked_softmax(x, mask, 0.125, A.MASKED_SCORE),
           A.masked_softmax.__wrapped__(x, mask, 0.125), dtype)


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("target_dtype", [np.int32, np.int64])
def test_the_cross_entropy_kernel_equals_its_reference(rng, dtype, target_dtype):
    logp = F.log_softmax_forward(_x(rng, (4, 6, 11), dtype, 3.0))[0]
    targets = asarray(rng.integers(0, 11, (4, 6)).astype(target_dtype))
    w = asarray((rng.random((4, 6)) * (rng.random((4, 6)) > 0.3)).astype(dtype))
    _close(G.cross_entropy_grad(logp, targets, w),
           L.cross_entropy_grad.__wrapped__(logp, targets, w), dtype)


@gpu
def test_cases_the_kernels_do_not_take_fall_back(rng):
    x = _x(rng, (4, 6), np.float32)
    assert G.softmax(x, axis=0) is NotImplemented
    assert G.softmax(x.T) is NotImplemented  # not C-contiguous
    assert G.gumbel_softmax_forward(x, None, 1.0, hard=True) is NotImplemented
    s = _x(rng, (2, 3, 4, 4), np.float32)
    assert G.masked_softmax(s, asarray(np.ones((2, 1, 1, 4), bool)), 0.5) is NotImplemented
    assert G.masked_softmax(s[..., :3], None, 0.5) is NotImplemented  # not C-contiguous
    _close(F.softmax(x, axis=0), F.softmax.__wrapped__(x, axis=0), np.float32)

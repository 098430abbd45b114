"""Elementwise and dense operations as forward/backward pairs.

Pattern: ``y, cache = op_forward(...)`` and ``grads = op_backward(dy, cache)``. Shapes use ``B``
batch, ``N`` sequence, ``D`` features; leading dimensions are free unless stated.
"""

from __future__ import annotations

import math
from typing import Any

from tpcore.backend import Array, matmul, on_gpu, scatter_add, xp_of
from tpcore.dispatch import kernel


@kernel("nn", gpu=True)
def linear_forward(x: Array, w: Array, b: Array | None = None) -> tuple[Array, tuple]:
    """``y = x W + b``; x: (..., Din), w: (Din, Dout), b: (Dout,) -> y: (..., Dout)."""
    y = matmul(x, w)
    if b is not None:
        y = y + b
    return y, (x, w, b is not None)


@kernel("nn", gpu=True)
def linear_backward(dy: Array, cache: tuple) -> tuple[Array, Array, Array | None]:
    """``dx = dy W^T``, ``dW = x^T dy`` and ``db = sum dy`` over all leading dimensions."""
    x, w, has_b = cache
    dx = matmul(dy, w.T)
    dw = matmul(x.reshape(-1, x.shape[-1]).T, dy.reshape(-1, dy.shape[-1]))
    db = dy.reshape(-1, dy.shape[-1]).sum(axis=0) if has_b else None
    return dx, dw, db


def embedding_forward(ids: Array, table: Array) -> tuple[Array, tuple]:
    """Row lookup ``y[...] = table[ids[...]]``. ``ids: (...)`` ints, ``table: (V, D)``."""
    return table[ids], (ids, table.shape)


ONE_HOT_MAX_VOCAB = 256
"""Embedding tables up to this many rows take the one-hot matmul form of the gradient."""


def embedding_backward(dy: Array, cache: tuple) -> Array:
    """Scatter-add: ``dtable[v] = sum of dy at every position where ids == v``.

    Small tables use the product ``onehot(ids)^T dy`` (a matmul, ~10x faster than a scatter on
    NumPy); large ones a scatter-add, which never materialises the one-hot matrix.
    """
    ids, shape = cache
    xp = xp_of(dy)
    flat_ids, flat = ids.reshape(-1), dy.reshape(-1, shape[1])
    if shape[0] <= ONE_HOT_MAX_VOCAB:
        return matmul(one_hot(flat_ids, shape[0], dtype=dy.dtype).T, flat)
    return scatter_add(xp.zeros(shape, dtype=dy.dtype), flat_ids, flat)


def relu_forward(x: Array) -> tuple[Array, Array]:
    """``y = max(x, 0)``."""
    mask = x > 0
    return x * mask, mask


def relu_backward(dy: Array, mask: Array) -> Array:
    """``dx = dy * [x > 0]``."""
    return dy * mask


_GELU_C = math.sqrt(2.0 / math.pi)


@kernel("nn", gpu=True)
def gelu_forward(x: Array) -> tuple[Array, Array]:
    """Tanh GELU: ``y = x/2 (1 + tanh(u))``, ``u = c (x + 0.044715 x^3)``, ``c = sqrt(2/pi)``.

    The cache is the derivative ``dy/dx = (1 + t)/2 + x/2 (1 - t^2) c (1 + 3 * 0.044715 x^2)``
    with ``t = tanh(u)``, computed here where ``t`` and ``x^2`` are at hand.
    """
    xp = xp_of(x)
    x2 = x * x  # x*x*x, never x**3: float pow is ~50x slower
    t = xp.tanh(_GELU_C * x * (1 + 0.044715 * x2))
    deriv = 1 - t * t
    deriv *= x
    deriv *= (0.5 * _GELU_C) * (1 + 0.134145 * x2)
    t += 1
    t *= 0.5
    deriv += t
    return x * t, deriv


@kernel(None, gpu=True)
def linear_gelu_forward(x: Array, w: Array, b: Array | None) -> tuple[Array, tuple]:
    """``y = gelu(x W + b)`` (:func:`linear_forward`, then :func:`gelu_forward`); returns ``y``
    and the two caches ``(linear's, gelu's)``, for :func:`linear_backward` and
    :func:`gelu_backward`. On a GPU the bias and the GELU are one pass over the product."""
    u, linear_cache = linear_forward(x, w, b)
    y, deriv = gelu_forward(u)
    return y, (linear_cache, deriv)


def gelu_backward(dy: Array, deriv: Array) -> Array:
    """``dx = dy * gelu'(x)`` (the derivative cached by the forward)."""
    return dy * deriv


SHORT_AXIS = 64
"""Last axes up to this length take the pairwise form of :func:`_row_max`."""


def _row_max(x: Array) -> Array:
    """``max(x, axis=-1, keepdims=True)``; on a short last axis of a host array by pairwise
    maxima of halves, which NumPy runs about twice as fast as its reduction over a short
    contiguous axis (on a GPU, one reduction is one launch)."""
    if x.shape[-1] > SHORT_AXIS or on_gpu(x):
        return x.max(axis=-1, keepdims=True)
    xp = xp_of(x)
    m = x
    while m.shape[-1] > 1:
        h = m.shape[-1] // 2
        top = xp.maximum(m[..., :h], m[..., h : 2 * h])
        m = xp.concatenate([top, m[..., 2 * h :]], axis=-1) if m.shape[-1] % 2 else top
    return m


def _row_sum(x: Array) -> Array:
    """``sum(x, axis=-1, keepdims=True)``; for a host array as a product with a ones vector (a
    matrix-vector product, about three times faster than NumPy's reduction over a contiguous
    last axis; on a GPU, one reduction is one launch)."""
    if on_gpu(x):
        return x.sum(axis=-1, keepdims=True)
    return x @ xp_of(x).ones((x.shape[-1], 1), dtype=x.dtype)


@kernel(None, gpu=True)
def softmax(x: Array, axis: int = -1) -> Array:
    """Numerically stable ``exp(x - max x) / sum exp(x - max x)`` along ``axis`` (no cache; see
    softmax_forward)."""
    xp = xp_of(x)
    if axis not in (-1, x.ndim - 1):
        e = xp.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)
    e = xp.exp(x - _row_max(x))
    e /= _row_sum(e)
    return e


def softmax_forward(x: Array, tau: float = 1.0, axis: int = -1) -> tuple[Array, tuple]:
    """``y = softmax(x / tau)`` along ``axis``."""
    y = softmax(x / tau, axis=axis)
    return y, (y, tau, axis)


@kernel("nn", gpu=True)
def softmax_backward(dy: Array, cache: tuple) -> Array:
    """``dx = y * (dy - sum(dy * y)) / tau`` (Jacobian ``diag(y) - y y^T``, over tau)."""
    y, tau, axis = cache
    return y * (dy - (dy * y).sum(axis=axis, keepdims=True)) / tau


@kernel("nn", gpu=True)
def log_softmax_forward(x: Array, axis: int = -1) -> tuple[Array, tuple]:
    """``y = x - logsumexp(x)`` along ``axis``."""
    xp = xp_of(x)
    shifted = x - x.max(axis=axis, keepdims=True)
    y = shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))
    return y, (y, axis)


@kernel("nn", gpu=True)
def log_softmax_backward(dy: Array, cache: tuple) -> Array:
    """``dx = dy - softmax(x) * sum(dy)``."""
    y, axis = cache
    xp = xp_of(dy)
    return dy - xp.exp(y) * dy.sum(axis=axis, keepdims=True)


LAYER_NORM_EPS = 1e-5
"""The ``eps`` of :func:`layer_norm_forward`."""


@kernel("nn", gpu=True)
def layer_norm_forward(
    x: Array, gamma: Array, beta: Array, eps: float = LAYER_NORM_EPS
) -> tuple[Array, tuple]:
    """``y = gamma * (x - mean) / sqrt(var + eps) + beta`` over the last axis ``D``."""
    xp = xp_of(x)
    d = x.shape[-1]
    xc = x - _row_sum(x) / d
    inv = 1.0 / xp.sqrt(_row_sum(xc * xc) / d + eps)
    xhat = xc * inv
    return gamma * xhat + beta, (xhat, inv, gamma)


@kernel("nn", gpu=True)
def layer_norm_backward(dy: Array, cache: tuple) -> tuple[Array, Array, Array]:
    """With ``g = dy * gamma``: ``dx = inv * (g - mean(g) - xhat * mean(g * xhat))``;
    ``dgamma = sum(dy * xhat)``, ``dbeta = sum(dy)`` over leading dimensions."""
    xhat, inv, gamma = cache
    g = dy * gamma
    d = dy.shape[-1]
    dx = inv * (g - _row_sum(g) / d - xhat * (_row_sum(g * xhat) / d))
    dgamma = (dy * xhat).reshape(-1, d).sum(axis=0)
    dbeta = dy.reshape(-1, d).sum(axis=0)
    return dx, dgamma, dbeta


def one_hot(ids: Array, k: int, dtype: Any = None) -> Array:
    """``(... ) -> (..., k)`` one-hot encoding of integer ``ids``."""
    xp = xp_of(ids)
    return (ids[..., None] == xp.arange(k)).astype(dtype or "float32")


def dropout_forward(x: Array, p: float, rng: Any | None) -> tuple[Array, Array | None]:
    """Inverted dropout: zero each entry with probability ``p``, scale the rest by ``1/(1-p)``.
    Identity when ``p == 0`` or ``rng`` is None (evaluation)."""
    if p <= 0 or rng is None:
        return x, None
    mask = (rng.random(x.shape) >= p).astype(x.dtype) / (1.0 - p)
    return x * mask, mask


def dropout_backward(dy: Array, mask: Array | None) -> Array:
    """``dx = dy * mask`` (identity when no mask was drawn)."""
    return dy if mask is None else dy * mask

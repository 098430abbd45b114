"""Fused kernels for the MLPs of the Transformer Program model (``tpcore.models.program.ops``
``mlp_forward``, ``mlp_backward``), reached through :mod:`tpcore.kernels.program_model`. They keep
the names, arguments, results and caches of the NumPy references (see ``tpcore.kernels.nn`` for
the contract); the discrete mode (no temperature: argmax samples) runs the references.

The MLPs keep their BLAS products and fuse the passes between them: bias and ReLU in one, bias,
noise and softmax in one; back, the ReLU and the first bias gradient in one (with the first
layer's gradients too when it has few inputs).

Late in training most of an MLP's outputs are one-hot to float32's resolution, as the read gates
are (``tpcore.kernels.program_read``): the Gumbel softmax at a low temperature leaves one weight
at exactly 1 and the others below ``2^-64``. Such a *settled* row's ``dz = y (dy - sum(dy y)) /
tau`` is zero to within ``2 k 2^-64 max|dy| / tau``, so once at least half of an MLP's rows are
settled its backward runs over the other rows alone, the settled ones taken as exact zeros (the
products then sum fewer terms, so they round differently from the full ones).
"""

from __future__ import annotations

import numba
import numpy as np
from tpcore.kernels.nn import KERNEL, softmax_backward, softmax_rows
from tpcore.kernels.program_read import NEGLIGIBLE


@numba.njit(**KERNEL)
def _bias_relu(h, b, hmask):
    """``h <- max(h + b, 0)`` and ``hmask = h > 0`` for ``h: (G, T, D)``, ``b: (G, 1, D)``."""
    t = h.dtype.type
    for g in range(h.shape[0]):
        for r in range(h.shape[1]):
            for j in range(h.shape[2]):
                v = h[g, r, j] + b[g, 0, j]
                hmask[g, r, j] = v > 0
                h[g, r, j] = max(v, t(0))


@numba.njit(**KERNEL)
def _two_inputs_relu(x, w1, b1, h, hmask):
    """``h = max(x W1 + b1, 0)`` and ``hmask = h > 0`` for two inputs, ``x: (G, T, 2)``, in one
    pass (through BLAS, a product over two inputs, then the bias and ReLU, took 1.7x as long)."""
    t = h.dtype.type
    for g in range(h.shape[0]):
        w_a, w_b, bias = w1[g, 0], w1[g, 1], b1[g, 0]
        for r in range(h.shape[1]):
            x_a, x_b, hr, mr = x[g, r, 0], x[g, r, 1], h[g, r], hmask[g, r]
            for j in range(hr.shape[0]):
                v = bias[j] + x_a * w_a[j] + x_b * w_b[j]
                mr[j] = v > 0
                hr[j] = max(v, t(0))


def mlp_forward(x, w1, b1, w2, b2, noise, tau):
    """``ops.mlp_forward`` in training mode: a BLAS product, bias and ReLU in one pass
    (the whole first layer in one pass for two inputs, as the numerical MLPs have), a BLAS
    product, bias, noise and softmax in one pass."""
    if tau is None:
        return NotImplemented
    g, t, i = x.shape
    if i == 2:
        h = np.empty((g, t, w1.shape[2]), dtype=x.dtype)
        hmask = np.empty(h.shape, dtype=np.bool_)
        _two_inputs_relu(x, w1, np.ascontiguousarray(b1), h, hmask)
    else:
        h = x @ w1
        hmask = np.empty(h.shape, dtype=np.bool_)
        _bias_relu(h, np.ascontiguousarray(b1), hmask)
    z = h @ w2
    z += b2
    y = softmax_rows(z, noise, tau)
    return y, (x, w1, w2, h, hmask, (y, tau, -1))


@numba.njit(**KERNEL)
def _relu_back(dh, hmask, db1):
    """``dh <- dh * hmask`` in place and ``db1 = sum_t dh[:, t]`` for ``dh, hmask: (G, T, D)``,
    ``db1: (G, 1, D)``."""
    t = dh.dtype.type
    for g in range(dh.shape[0]):
        acc = db1[g, 0]
        for j in range(acc.shape[0]):
            acc[j] = t(0)
        for r in range(dh.shape[1]):
            d, m = dh[g, r], hmask[g, r]
            for j in range(d.shape[0]):
                v = d[j] if m[j] else t(0)
                d[j] = v
                acc[j] += v


@numba.njit(**KERNEL)
def _relu_back_inputs(dh, hmask, x, w1, db1, dw1, dx):
    """:func:`_relu_back` and, in the same pass over the rows, ``dx = dh W1^T`` and
    ``dW1 = x^T dh`` for few inputs ``x: (G, T, I)`` (products with ``I`` columns are slow
    through BLAS)."""
    t = dh.dtype.type
    for g in range(dh.shape[0]):
        acc = db1[g, 0]
        for j in range(acc.shape[0]):
            acc[j] = t(0)
            for i in range(x.shape[2]):
                dw1[g, i, j] = t(0)
        for r in range(dh.shape[1]):
            d, m = dh[g, r], hmask[g, r]
            for j in range(d.shape[0]):
                v = d[j] if m[j] else t(0)
                d[j] = v
                acc[j] += v
            for i in range(x.shape[2]):
                xi, wi, dwi = x[g, r, i], w1[g, i], dw1[g, i]
                total = t(0)
                for j in range(d.shape[0]):
                    total += d[j] * wi[j]
                    dwi[j] += xi * d[j]
                dx[g, r, i] = total


FEW_INPUTS = 4
"""MLPs with at most this many inputs (the numerical MLPs' two) take their first layer's
gradients from :func:`_relu_back_inputs`."""


LIVE_SHARE = 0.5
"""An MLP with at most this share of live (not settled) rows takes its backward over them alone
(module docstring)."""


@numba.njit(**KERNEL)
def _live_rows(y, negligible, live):
    """``live[g, r]``: whether row ``r`` of ``y: (G, T, K)`` is not settled, i.e. not one weight
    of exactly 1 with every other below ``negligible``."""
    t = y.dtype.type
    for g in range(y.shape[0]):
        for r in range(y.shape[1]):
            ones, small = 0, 0
            for c in range(y.shape[2]):
                v = y[g, r, c]
                if v == t(1):
                    ones += 1
                elif v < negligible:
                    small += 1
            live[g, r] = not (ones == 1 and small == y.shape[2] - 1)


def mlp_backward(dy, cache):
    """``ops.mlp_backward`` with the softmax backward in one pass, the ReLU's and the
    first bias gradient in another (with the first layer's gradients for few inputs), the
    second bias gradient as a product with a ones vector; an MLP whose rows are mostly settled
    over its live rows alone (module docstring)."""
    x, w1, w2, h, hmask, y_cache = cache
    if y_cache is None:
        return NotImplemented
    y, tau, _ = y_cache
    yc = np.ascontiguousarray(y)
    live = np.empty(yc.shape[:2], dtype=np.bool_)
    _live_rows(yc, yc.dtype.type(NEGLIGIBLE), live)
    few = live.sum(axis=1) <= LIVE_SHARE * y.shape[1]
    if not few.any():
        return _dense_backward(dy, cache)
    dx = np.zeros(x.shape, dtype=dy.dtype)
    grads = []
    for g in range(x.shape[0]):
        rows = np.flatnonzero(live[g]) if few[g] else slice(None)
        part = (x[g:g + 1, rows], w1[g:g + 1], w2[g:g + 1], h[g:g + 1, rows],
                hmask[g:g + 1, rows], (yc[g:g + 1, rows], tau, -1))
        dx_g, *rest = _dense_backward(np.ascontiguousarray(dy[g:g + 1, rows]), part)
        dx[g, rows] = dx_g[0]
        grads.append(rest)
    return (dx, *(np.concatenate(parts) for parts in zip(*grads)))


def _dense_backward(dy, cache):
    """The backward over every row of ``dy`` (:func:`mlp_backward`'s cache)."""
    x, w1, w2, h, hmask, y_cache = cache
    dz = softmax_backward(dy, y_cache)
    dh = dz @ w2.swapaxes(-1, -2)
    db1 = np.empty((dh.shape[0], 1, dh.shape[2]), dtype=dh.dtype)
    if x.shape[2] <= FEW_INPUTS:
        dx, dw1 = np.empty(x.shape, dtype=dh.dtype), np.empty(w1.shape, dtype=dh.dtype)
        _relu_back_inputs(dh, hmask, x, w1, db1, dw1, dx)
    else:
        _relu_back(dh, hmask, db1)
        dx, dw1 = dh @ w1.swapaxes(-1, -2), x.swapaxes(-1, -2) @ dh
    ones = np.ones((1, dz.shape[1]), dtype=dz.dtype)
    return dx, dw1, db1, h.swapaxes(-1, -2) @ dz, ones @ dz

"""The batch-inner layout of the program model's attention kernels, and products in it.

A head of the Transformer Program model works on ``B`` sequences of ``N x N`` scores, where NumPy
runs every ``(N, d) @ (d, N)`` product as one BLAS call (about 70 ns for 8 x 8) and one pass per
elementwise operation. Laid out *batch-inner*, ``(N, d, B)`` (:func:`inner`, ``LANES`` sequences
at a time), every per-sequence product and every row operation (sum over keys, maximum, softmax)
becomes a loop over the ``B`` sequences, which compiles to vector instructions: the products
``S = (Q P) K^T``, ``A V`` and their gradients are sums of such loops (:func:`mul_nt`,
:func:`mul_nn`, :func:`mul_tn`). :mod:`tpcore.kernels.program_attention` uses them; a cache
holds batch-inner arrays as transposed views with the reference's shapes (:func:`seq_major`).
"""

from __future__ import annotations

import numba
import numpy as np
from tpcore.kernels.nn import KERNEL

LANES = 16
"""Sequences transposed together by :func:`inner` and :func:`outer` (a 512-bit vector of
float32)."""


# ---------------------------------------------------------------- batch-inner layout
@numba.njit(**KERNEL)
def inner(a, out):
    """``out[i, e, b] = a[b, i, e]``: ``(B, N, D)`` to batch-inner ``(N, D, B)``, reading
    ``LANES`` sequences at a time and writing one vector per ``(i, e)``."""
    b_size, n, d = a.shape
    full = b_size - b_size % LANES
    for b0 in range(0, full, LANES):
        for i in range(n):
            for e in range(d):
                for w in range(LANES):
                    out[i, e, b0 + w] = a[b0 + w, i, e]
    for b in range(full, b_size):
        for i in range(n):
            for e in range(d):
                out[i, e, b] = a[b, i, e]


@numba.njit(**KERNEL)
def outer(a, out):
    """The inverse of :func:`inner`: ``out[b, i, e] = a[i, e, b]``."""
    n, d, b_size = a.shape
    full = b_size - b_size % LANES
    for b0 in range(0, full, LANES):
        for i in range(n):
            for e in range(d):
                for w in range(LANES):
                    out[b0 + w, i, e] = a[i, e, b0 + w]
    for b in range(full, b_size):
        for i in range(n):
            for e in range(d):
                out[b, i, e] = a[i, e, b]


def seq_major(a):
    """The sequence-major ``(H, B, ...)`` view of a batch-inner ``(H, ..., B)`` array: the
    reference's shape, as the kernels' caches hold their arrays."""
    return a.transpose(0, a.ndim - 1, *range(1, a.ndim - 1))


def batch_inner(a, dtype):
    """``a: (H, B, ...)`` as a contiguous batch-inner ``(H, ..., B)`` array of ``dtype`` (no copy
    for an array that :func:`seq_major` made)."""
    return np.ascontiguousarray(a.transpose(0, *range(2, a.ndim), 1), dtype=dtype)


def keys_inner(a, b, n, dtype):
    """A ``(1 or B, 1 or N, N)`` mask or bias as a batch-inner ``(N, N, B)`` array of ``dtype``."""
    out = np.empty((n, n, b), dtype=dtype)
    inner(np.broadcast_to(a.astype(dtype, copy=False), (b, n, n)), out)
    return out


# ---------------------------------------------------------------- products over the lanes
@numba.njit(inline="always", **KERNEL)
def _fma(o, x, y, first):
    """``o <- x y`` (``first``) or ``o <- o + x y`` over the lanes: one term of a product."""
    if first:
        for w in range(o.shape[0]):
            o[w] = x[w] * y[w]
    else:
        for w in range(o.shape[0]):
            o[w] += x[w] * y[w]


@numba.njit(**KERNEL)
def mul_nt(a, b, out):
    """``out[i, j] = sum_c a[i, c] b[j, c]`` for every lane: ``a: (N, D, L)``,
    ``b: (M, D, L)`` -> ``out: (N, M, L)`` (``A B^T`` per sequence)."""
    for i in range(a.shape[0]):
        for j in range(b.shape[0]):
            for c in range(a.shape[1]):
                _fma(out[i, j], a[i, c], b[j, c], c == 0)


@numba.njit(**KERNEL)
def mul_nn(a, b, out):
    """``out[i, e] = sum_j a[i, j] b[j, e]``: ``a: (N, M, L)``, ``b: (M, D, L)`` ->
    ``(N, D, L)`` (``A B`` per sequence)."""
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            for e in range(b.shape[1]):
                _fma(out[i, e], a[i, j], b[j, e], j == 0)


@numba.njit(**KERNEL)
def mul_tn(a, b, out):
    """``out[j, e] = sum_i a[i, j] b[i, e]``: ``a: (N, M, L)``, ``b: (N, D, L)`` ->
    ``(M, D, L)`` (``A^T B`` per sequence)."""
    for j in range(a.shape[1]):
        for i in range(a.shape[0]):
            for e in range(b.shape[1]):
                _fma(out[j, e], a[i, j], b[i, e], i == 0)

"""Fused kernels for the Transformer Program modules (``tpcore.models.program_ops``), with the
names, arguments, results and caches of the NumPy references they stand in for (see
``tpcore.kernels.nn`` for the contract). Active hooks run the references, and so does the
discrete mode of the categorical heads and the MLPs (no temperature: argmax samples).

The matrix products stay BLAS products; what the kernels fuse are the elementwise chains
between them, one pass per row of ``N`` scores or ``k`` logits instead of one NumPy pass per
operation: the categorical attention's default-to-BOS, log, bias, scale, noise and softmax (and
their backward), the numerical attention's mask and sums over keys (and theirs), and an MLP's
bias and ReLU, bias, noise and softmax.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from tpcore.kernels.elementary import exp, log
from tpcore.kernels.nn import KERNEL, softmax_backward, softmax_rows

LOG_EPS = 1e-20
BOS_EPS = 1e-10
"""As in ``tpcore.models.program_ops``."""


def _active(hooks):
    return hooks is not None and hooks.active


def _full(a, n, dtype):
    """A ``(1 or B, n, n)`` mask or bias as a contiguous ``dtype`` array (broadcast over
    queries where it has one row)."""
    return np.ascontiguousarray(np.broadcast_to(a, (a.shape[0], n, n)), dtype=dtype)


def _scores(q, k, p):
    """``S = (Q P) K^T`` and the cache of ``program_ops.scores_forward``."""
    h, b, n, d = q.shape
    qp = (q.reshape(h, b * n, d) @ p).reshape(h, b, n, d)
    return qp @ k.swapaxes(-1, -2), (q, k, p, qp)


def _scores_backward(ds, cache):
    """``program_ops.scores_backward``: ``(dq, dk, dp)``."""
    q, k, p, qp = cache
    h, b, n, d = q.shape
    dqp = (ds @ k).reshape(h, b * n, d)
    dk = ds.swapaxes(-1, -2) @ qp
    return (dqp @ p.swapaxes(-1, -2)).reshape(q.shape), dk, q.reshape(h, b * n, d).swapaxes(
        -1, -2) @ dqp


# ---------------------------------------------------------------- categorical attention
@numba.njit(**KERNEL)
def _cat_head(sp, maskf, bias, g, has_noise, scale, inv_tau, a, s, dmask):
    """One head over the batch: ``sp: (B, N, N)`` scores, made ``S'`` in place (BOS default
    added at key 0); ``a: (B, N, N)`` the relaxed attention; ``s, dmask: (B, N)`` the masked row
    sums and where the default is positive. ``maskf, bias: (1 or B, N, N)``. The logs and
    exponentials run as long flat loops (they vectorise), the row work in between."""
    t = sp.dtype.type
    b_size, n, _ = sp.shape
    mstep = 1 if maskf.shape[0] > 1 else 0
    bstep = 1 if bias.shape[0] > 1 else 0
    for b in range(b_size):
        for i in range(n):
            total = t(0)
            for j in range(n):
                total += sp[b, i, j] * maskf[b * mstep, i, j]
            s[b, i] = total
            u = t(1) - total / (total + t(BOS_EPS))
            dmask[b, i] = u > 0
            sp[b, i, 0] += max(u, t(0))
    flat_sp, flat_a = sp.reshape(-1), a.reshape(-1)
    for k in range(flat_a.shape[0]):
        flat_a[k] = log(flat_sp[k] + t(LOG_EPS))
    for b in range(b_size):
        ab, bb, gb = a[b].reshape(-1), bias[b * bstep].reshape(-1), g[b].reshape(-1)
        for k in range(ab.shape[0]):
            z = (ab[k] + bb[k]) * scale
            ab[k] = (z + gb[k]) * inv_tau if has_noise else z * inv_tau
    rows = a.reshape(-1, n)
    for r in range(rows.shape[0]):
        top = t(-np.inf)
        for j in range(n):
            top = max(top, rows[r, j])
        for j in range(n):
            rows[r, j] -= top
    for k in range(flat_a.shape[0]):
        flat_a[k] = exp(flat_a[k])
    for r in range(rows.shape[0]):
        norm = t(0)
        for j in range(n):
            norm += rows[r, j]
        norm = t(1) / norm
        for j in range(n):
            rows[r, j] *= norm


@numba.njit(**KERNEL)
def _cat_forward(sp, maskf, bias, g, has_noise, scale, inv_tau, a, s, dmask):
    for h in range(sp.shape[0]):
        _cat_head(sp[h], maskf, bias, g[h] if has_noise else sp[h], has_noise, scale, inv_tau,
                  a[h], s[h], dmask[h])


def cat_attention_forward(q, k, v, p, mask, bias, noise, tau, hooks=None, names=()):
    """``program_ops.cat_attention_forward`` in training mode: the product ``S``, then one
    pass per head and sequence from ``S`` to the attention ``A``, then ``A V``."""
    if tau is None or _active(hooks) or (noise is not None and noise.shape[:2] != q.shape[:2]):
        return NotImplemented
    t = q.dtype.type
    sp, s_cache = _scores(q, k, p)
    maskf = mask.astype(q.dtype)
    h, b, n = sp.shape[:3]
    a = np.empty_like(sp)
    s = np.empty((h, b, n), dtype=q.dtype)
    dmask = np.empty((h, b, n), dtype=np.bool_)
    scale = 1.0 / math.sqrt(q.shape[-1])
    _cat_forward(sp, _full(maskf, n, q.dtype), _full(bias, n, q.dtype),
                 sp if noise is None else np.ascontiguousarray(noise, dtype=q.dtype),
                 noise is not None, t(scale), t(1.0 / tau), a, s, dmask)
    return a @ v, (a, (a, tau, -1), v, s_cache, maskf, s, dmask, sp, scale, hooks, names)


@numba.njit(**KERNEL)
def _cat_back_rows(da, a, sp, maskf, s, dmask, factor):
    """``da: (N, N)`` becomes ``dS`` in place (softmax backward times ``scale / tau``, over
    ``S' + 1e-20``, plus the BOS default's gradient on every unmasked key)."""
    t = da.dtype.type
    n = da.shape[0]
    for i in range(n):
        acc = t(0)
        for j in range(n):
            acc += da[i, j] * a[i, j]
        for j in range(n):
            da[i, j] = a[i, j] * (da[i, j] - acc) * factor / (sp[i, j] + t(LOG_EPS))
        du = da[i, 0] if dmask[i] else t(0)
        dsum = du * (-t(BOS_EPS) / ((s[i] + t(BOS_EPS)) * (s[i] + t(BOS_EPS))))
        for j in range(n):
            da[i, j] += dsum * maskf[i, j]


@numba.njit(**KERNEL)
def _cat_backward(da, a, sp, maskf, s, dmask, factor):
    mstep = 1 if maskf.shape[0] > 1 else 0
    for h in range(da.shape[0]):
        for b in range(da.shape[1]):
            _cat_back_rows(da[h, b], a[h, b], sp[h, b], maskf[b * mstep], s[h, b],
                           dmask[h, b], factor)


def cat_attention_backward(dout, cache):
    """``program_ops.cat_attention_backward``: ``dV = A^T dout``, ``dA = dout V^T``, one pass
    per head and sequence to ``dS``, then the score backward."""
    a, a_cache, v, s_cache, maskf, s, dmask, sp, scale, hooks, names = cache
    if _active(hooks) or a_cache is None or a_cache[0] is not a:
        return NotImplemented
    dv = a.swapaxes(-1, -2) @ dout
    da = dout @ v.swapaxes(-1, -2)
    _cat_backward(da, a, sp, _full(maskf, da.shape[-1], da.dtype), s, dmask,
                  dout.dtype.type(scale / a_cache[1]))
    dq, dk, dp = _scores_backward(da, s_cache)
    return dq, dk, dv, dp


# ---------------------------------------------------------------- numerical attention
@numba.njit(**KERNEL)
def _num_forward(s, maskf, v, out):
    """``s <- mask * s`` (the pattern ``Sm``) and ``out_i = sum_j Sm_ij v_j`` for
    ``s: (H, B, N, N)``, ``maskf: (1 or B, N, N)``, ``v, out: (H, B, N)``."""
    t = s.dtype.type
    mstep = 1 if maskf.shape[0] > 1 else 0
    for h in range(s.shape[0]):
        for b in range(s.shape[1]):
            mb = maskf[b * mstep]
            for i in range(s.shape[2]):
                acc = t(0)
                for j in range(s.shape[3]):
                    val = s[h, b, i, j] * mb[i, j]
                    s[h, b, i, j] = val
                    acc += val * v[h, b, j]
                out[h, b, i] = acc


def num_attention_forward(q, k, v, p, mask, hooks=None, names=()):
    """``program_ops.num_attention_forward`` without active hooks: the product ``S``, then the
    mask and the sums over keys in one pass."""
    if _active(hooks):
        return NotImplemented
    s, s_cache = _scores(q, k, p)
    out = np.empty_like(v, dtype=q.dtype)
    _num_forward(s, _full(mask, s.shape[-1], q.dtype), np.ascontiguousarray(v, dtype=q.dtype),
                 out)
    return out, (s, v, s_cache, mask, hooks, names)


@numba.njit(**KERNEL)
def _num_backward(dout, sm, v, maskf, ds, dv):
    """``dS_ij = mask_ij dout_i v_j`` into ``ds`` and ``dv_j = sum_i Sm_ij dout_i``."""
    t = ds.dtype.type
    mstep = 1 if maskf.shape[0] > 1 else 0
    n = ds.shape[3]
    for h in range(ds.shape[0]):
        for b in range(ds.shape[1]):
            mb = maskf[b * mstep]
            for j in range(n):
                dv[h, b, j] = t(0)
            for i in range(n):
                g = dout[h, b, i]
                for j in range(n):
                    ds[h, b, i, j] = g * v[h, b, j] * mb[i, j]
                    dv[h, b, j] += sm[h, b, i, j] * g


def num_attention_backward(dout, cache):
    """``program_ops.num_attention_backward``: ``dS`` and ``dV`` in one pass, then the score
    backward."""
    sm, v, s_cache, mask, hooks, names = cache
    if _active(hooks):
        return NotImplemented
    ds = np.empty_like(sm)
    dv = np.empty_like(v, dtype=dout.dtype)
    _num_backward(np.ascontiguousarray(dout), sm, np.ascontiguousarray(v, dtype=dout.dtype),
                  _full(mask, sm.shape[-1], dout.dtype), ds, dv)
    dq, dk, dp = _scores_backward(ds, s_cache)
    return dq, dk, dv, dp


# ---------------------------------------------------------------- MLPs
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


def mlp_forward(x, w1, b1, w2, b2, noise, tau):
    """``program_ops.mlp_forward`` in training mode: BLAS products, bias and ReLU in one pass,
    bias, noise and softmax in one pass."""
    if tau is None:
        return NotImplemented
    h = x @ w1
    hmask = np.empty(h.shape, dtype=np.bool_)
    _bias_relu(h, np.ascontiguousarray(b1), hmask)
    z = h @ w2
    z += b2
    y = softmax_rows(z, noise, tau)
    return y, (x, w1, w2, h, hmask, (y, tau, -1))


def mlp_backward(dy, cache):
    """``program_ops.mlp_backward`` with the softmax backward in one pass, the ReLU's in place
    and the bias gradients as products with a ones vector."""
    x, w1, w2, h, hmask, y_cache = cache
    if y_cache is None:
        return NotImplemented
    dz = softmax_backward(dy, y_cache)
    ones = np.ones((1, dz.shape[1]), dtype=dz.dtype)
    dh = dz @ w2.swapaxes(-1, -2)
    dh *= hmask
    return (dh @ w1.swapaxes(-1, -2), x.swapaxes(-1, -2) @ dh, ones @ dh,
            h.swapaxes(-1, -2) @ dz, ones @ dz)

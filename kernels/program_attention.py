"""Fused kernels for the attention heads of the Transformer Program model
(``tpcore.models.program.ops``): categorical heads (``cat_attention_forward``, ``..._backward``)
and numerical heads (``num_attention_forward``, ``..._backward``), reached through
:mod:`tpcore.kernels.program_model`. They keep the names, arguments, results and caches of the
NumPy references (see ``tpcore.kernels.nn`` for the contract); active hooks run the references,
and so does the discrete mode of the categorical heads (no temperature: argmax samples).

Each head runs batch-inner (:mod:`tpcore.kernels.batch_inner`): the scores ``S = (Q P) K^T``,
the rows' masks, softmax and sums over keys and the products with the values are loops over
the sequences, one pass per head each way. The caches hold the batch-inner arrays as transposed
views with the reference's shapes, so either backward takes either forward's cache; products
shared by all sequences (``Q P``, ``dQP P^T``, ``Q^T dQP``) stay BLAS products on the
sequence-major arrays.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from tpcore.kernels.batch_inner import (
    batch_inner,
    inner,
    keys_inner,
    mul_nn,
    mul_nt,
    mul_tn,
    outer,
    seq_major,
)
from tpcore.kernels.elementary import exp, log
from tpcore.kernels.nn import KERNEL

LOG_EPS = 1e-20
BOS_EPS = 1e-10
"""As in ``tpcore.models.program.ops``."""


def _active(hooks):
    return hooks is not None and hooks.active


# ---------------------------------------------------------------- scores S = (Q P) K^T
def _qp(q, p):
    """``Q P`` as one BLAS product per head (``q: (H, B, N, d)``, ``p: (H, d, d)``)."""
    h, b, n, d = q.shape
    return (q.reshape(h, b * n, d) @ p).reshape(h, b, n, d)


@numba.njit(**KERNEL)
def _scores(qp, k, qpt, kt, st):
    """Head by head: ``QP`` and ``K`` batch-inner into ``qpt, kt: (H, N, d, B)`` and
    ``S = QP K^T`` into ``st: (H, N, N, B)``."""
    for h in range(qp.shape[0]):
        inner(qp[h], qpt[h])
        inner(k[h], kt[h])
        mul_nt(qpt[h], kt[h], st[h])


@numba.njit(**KERNEL)
def _scores_back(ds, kt, qpt, tmp, dqp, dk):
    """One head's ``dQP = dS K`` and ``dK = dS^T QP`` from batch-inner ``ds: (N, N, B)``,
    written sequence-major into ``dqp, dk: (B, N, d)`` (``tmp: (N, d, B)`` scratch)."""
    mul_nn(ds, kt, tmp)
    outer(tmp, dqp)
    mul_tn(ds, qpt, tmp)
    outer(tmp, dk)


def _scores_grads(dqp, q, p):
    """``dQ = dQP P^T`` and ``dP = Q^T dQP`` (summed over B, N) as BLAS products."""
    h, b, n, d = dqp.shape
    dqp2 = dqp.reshape(h, b * n, d)
    return ((dqp2 @ p.swapaxes(-1, -2)).reshape(dqp.shape),
            q.reshape(h, b * n, d).swapaxes(-1, -2) @ dqp2)


def _scores_cache(q, k, p, qp, kt, qpt):
    """``ops.scores_forward``'s cache ``(q, k, p, qp)``; ``k`` and ``qp`` as views of
    their batch-inner copies."""
    return q, seq_major(kt), p, seq_major(qpt)


# ---------------------------------------------------------------- categorical attention
@numba.njit(**KERNEL)
def _cat_rows(sp, mask, bias, g, has_noise, scale, inv_tau, a, s, dmask, row):
    """One head, batch-inner: ``sp: (N, N, B)`` scores made ``S'`` in place (BOS default added
    at key 0), ``a`` the relaxed attention, ``s, dmask: (N, B)`` the masked row sums and where
    the default is positive; ``mask, bias, g: (N, N, B)``; ``row: (B,)`` scratch."""
    t = sp.dtype.type
    n, _, lanes = sp.shape
    for i in range(n):
        si, di, s0 = s[i], dmask[i], sp[i, 0]
        for w in range(lanes):
            si[w] = t(0)
        for j in range(n):
            x, m = sp[i, j], mask[i, j]
            for w in range(lanes):
                si[w] += x[w] * m[w]
        for w in range(lanes):
            u = t(1) - si[w] / (si[w] + t(BOS_EPS))
            di[w] = u > 0
            s0[w] += max(u, t(0))
        for j in range(n):
            x, bj, y, gj = sp[i, j], bias[i, j], a[i, j], g[i, j]
            for w in range(lanes):
                z = (log(x[w] + t(LOG_EPS)) + bj[w]) * scale
                y[w] = (z + gj[w]) * inv_tau if has_noise else z * inv_tau
        _softmax_lanes(a[i], row)


@numba.njit(**KERNEL)
def _softmax_lanes(y, row):
    """``y: (N, B)`` <- its softmax over ``N`` for every lane (``row: (B,)`` scratch)."""
    t = y.dtype.type
    for w in range(y.shape[1]):
        row[w] = y[0, w]
    for j in range(1, y.shape[0]):
        for w in range(y.shape[1]):
            row[w] = max(row[w], y[j, w])
    for j in range(y.shape[0]):
        for w in range(y.shape[1]):
            y[j, w] = exp(y[j, w] - row[w])
    for w in range(y.shape[1]):
        row[w] = y[0, w]
    for j in range(1, y.shape[0]):
        for w in range(y.shape[1]):
            row[w] += y[j, w]
    for w in range(y.shape[1]):
        row[w] = t(1) / row[w]
    for j in range(y.shape[0]):
        for w in range(y.shape[1]):
            y[j, w] *= row[w]


@numba.njit(**KERNEL)
def _cat_forward(qp, k, v, mask, bias, g, has_noise, scale, inv_tau, qpt, kt, vt, spt, at, st,
                 dmt, out):
    """Every head: the scores, the attention ``at`` and ``out = A V: (H, B, N, d)``; the
    batch-inner arrays ``qpt, kt, vt, spt, at, st, dmt`` are the cache."""
    h_size, b_size, n, d = qp.shape
    _scores(qp, k, qpt, kt, spt)
    gt = np.empty((n, n, b_size), qp.dtype)
    ot = np.empty((n, d, b_size), qp.dtype)
    row = np.empty(b_size, qp.dtype)
    for h in range(h_size):
        inner(v[h], vt[h])
        if has_noise:
            inner(g[h], gt)
        _cat_rows(spt[h], mask, bias, gt, has_noise, scale, inv_tau, at[h], st[h], dmt[h], row)
        mul_nn(at[h], vt[h], ot)
        outer(ot, out[h])


def cat_attention_forward(q, k, v, p, mask, bias, noise, tau, hooks=None, names=()):
    """``ops.cat_attention_forward`` in training mode, batch-inner (module docstring)."""
    if tau is None or _active(hooks) or (noise is not None and noise.shape[:2] != q.shape[:2]):
        return NotImplemented
    dt = q.dtype
    t = dt.type
    h, b, n, d = q.shape
    qp = _qp(q, p)
    qpt, kt, vt = (np.empty((h, n, d, b), dtype=dt) for _ in range(3))
    spt, at = np.empty((h, n, n, b), dtype=dt), np.empty((h, n, n, b), dtype=dt)
    st, dmt = np.empty((h, n, b), dtype=dt), np.empty((h, n, b), dtype=np.bool_)
    out = np.empty((h, b, n, d), dtype=dt)
    scale = 1.0 / math.sqrt(d)
    _cat_forward(qp, np.ascontiguousarray(k), np.ascontiguousarray(v),
                 keys_inner(mask, b, n, dt), keys_inner(bias, b, n, dt),
                 q if noise is None else np.ascontiguousarray(noise, dtype=dt),
                 noise is not None, t(scale), t(1.0 / tau), qpt, kt, vt, spt, at, st, dmt, out)
    a = seq_major(at)
    return out, (a, (a, tau, -1), seq_major(vt), _scores_cache(q, k, p, qp, kt, qpt),
                 mask.astype(dt), seq_major(st), seq_major(dmt), seq_major(spt), scale, hooks,
                 names)


@numba.njit(**KERNEL)
def _cat_rows_back(da, a, sp, s, dmask, mask, factor, row):
    """One head, batch-inner: ``da: (N, N, B)`` becomes ``dS`` in place (softmax backward
    times ``scale / tau``, over ``S' + 1e-20``, plus the BOS default's gradient on every
    unmasked key)."""
    t = da.dtype.type
    n, _, lanes = da.shape
    for i in range(n):
        for w in range(lanes):
            row[w] = t(0)
        for j in range(n):
            x, y = da[i, j], a[i, j]
            for w in range(lanes):
                row[w] += x[w] * y[w]
        for j in range(n):
            x, y, z = da[i, j], a[i, j], sp[i, j]
            for w in range(lanes):
                x[w] = y[w] * (x[w] - row[w]) * factor / (z[w] + t(LOG_EPS))
        x, si, di = da[i, 0], s[i], dmask[i]
        for w in range(lanes):
            du = x[w] if di[w] else t(0)
            row[w] = du * (-t(BOS_EPS) / ((si[w] + t(BOS_EPS)) * (si[w] + t(BOS_EPS))))
        for j in range(n):
            x, m = da[i, j], mask[i, j]
            for w in range(lanes):
                x[w] += row[w] * m[w]


@numba.njit(**KERNEL)
def _cat_backward(dout, at, spt, st, dmt, mask, vt, kt, qpt, factor, dv, dqp, dk):
    """Every head: ``dV = A^T dout``, ``dA = dout V^T``, ``dS``, ``dQP``, ``dK`` (sequence-major
    results ``dv, dqp, dk: (H, B, N, d)``)."""
    h_size, b_size, n, d = dout.shape
    dt = np.empty((n, d, b_size), dout.dtype)
    tmp = np.empty((n, d, b_size), dout.dtype)
    da = np.empty((n, n, b_size), dout.dtype)
    row = np.empty(b_size, dout.dtype)
    for h in range(h_size):
        inner(dout[h], dt)
        mul_tn(at[h], dt, tmp)
        outer(tmp, dv[h])
        mul_nt(dt, vt[h], da)
        _cat_rows_back(da, at[h], spt[h], st[h], dmt[h], mask, factor, row)
        _scores_back(da, kt[h], qpt[h], tmp, dqp[h], dk[h])


def cat_attention_backward(dout, cache):
    """``ops.cat_attention_backward``: one batch-inner pass per head from ``dout`` to
    ``dV``, ``dQP`` and ``dK``, then ``dQ`` and ``dP`` as BLAS products."""
    a, a_cache, v, s_cache, maskf, s, dmask, sp, scale, hooks, names = cache
    if _active(hooks) or a_cache is None or a_cache[0] is not a:
        return NotImplemented
    q, k, p, qp = s_cache
    dt = dout.dtype
    h, b, n, d = dout.shape
    dv, dqp, dk = (np.empty((h, b, n, d), dtype=dt) for _ in range(3))
    _cat_backward(np.ascontiguousarray(dout), batch_inner(a, dt), batch_inner(sp, dt),
                  batch_inner(s, dt), batch_inner(dmask, np.bool_),
                  keys_inner(maskf, b, n, dt), batch_inner(v, dt), batch_inner(k, dt),
                  batch_inner(qp, dt), dt.type(scale / a_cache[1]), dv, dqp, dk)
    dq, dp = _scores_grads(dqp, q, p)
    return dq, dk, dv, dp


# ---------------------------------------------------------------- numerical attention
@numba.njit(**KERNEL)
def _num_forward(qp, k, v, mask, qpt, kt, smt, vt, out):
    """Every head: the scores ``S`` made ``Sm = mask * S`` in place in ``smt: (H, N, N, B)``,
    ``vt: (H, N, B)`` the values batch-inner and ``out_i = sum_j Sm_ij v_j: (H, B, N)``."""
    h_size, b_size, n, _ = qp.shape
    _scores(qp, k, qpt, kt, smt)
    ot = np.empty((n, 1, b_size), qp.dtype)
    for h in range(h_size):
        inner(v[h].reshape(b_size, n, 1), vt[h].reshape(n, 1, b_size))
        sm, vh = smt[h], vt[h]
        for i in range(n):
            o = ot[i, 0]
            for j in range(n):
                x, m, y = sm[i, j], mask[i, j], vh[j]
                for w in range(b_size):
                    x[w] *= m[w]
                    o[w] = x[w] * y[w] if j == 0 else o[w] + x[w] * y[w]
        outer(ot, out[h].reshape(b_size, n, 1))


def num_attention_forward(q, k, v, p, mask, hooks=None, names=()):
    """``ops.num_attention_forward`` without active hooks, batch-inner: the scores,
    the mask and the sums over keys in one pass per head."""
    if _active(hooks):
        return NotImplemented
    dt = q.dtype
    h, b, n, d = q.shape
    qp = _qp(q, p)
    qpt, kt = np.empty((h, n, d, b), dtype=dt), np.empty((h, n, d, b), dtype=dt)
    smt, vt = np.empty((h, n, n, b), dtype=dt), np.empty((h, n, b), dtype=dt)
    out = np.empty((h, b, n), dtype=dt)
    k, v = np.ascontiguousarray(k), np.ascontiguousarray(v, dtype=dt)
    _num_forward(qp, k, v, keys_inner(mask, b, n, dt), qpt, kt, smt, vt, out)
    if _keys_only(mask):
        return out, (seq_major(smt), v, (q, k, p, qp), mask, hooks, names)
    return out, (seq_major(smt), seq_major(vt), _scores_cache(q, k, p, qp, kt, qpt), mask, hooks,
                 names)


def _keys_only(mask):
    """Whether a ``(1 or B, 1 or N, N)`` mask depends on the key alone (no causal mask)."""
    return mask.shape[-2] == 1


@numba.njit(**KERNEL)
def _num_backward_keys(dout, qp, k, v, keys, dqp, dk, dv):
    """The numerical heads' backward for a mask on the keys alone, ``mask_ij = m_j``, where the
    sums over the ``N x N`` pattern factor through two ``d``-vectors per sequence:
    ``u = sum_i dout_i QP_i`` and ``z = sum_j m_j v_j K_j`` give ``dQP_i = dout_i z``,
    ``dK_j = m_j v_j u`` and ``dv_j = m_j K_j . u``. Sequence-major arrays ``(H, B, N, d)``,
    ``v, dout, dv: (H, B, N)``, ``keys: (1 or B, N)``."""
    t = dout.dtype.type
    h_size, b_size, n, d = qp.shape
    u, z = np.empty(d, dout.dtype), np.empty(d, dout.dtype)
    mstep = 1 if keys.shape[0] > 1 else 0
    for h in range(h_size):
        for b in range(b_size):
            m = keys[b * mstep]
            for c in range(d):
                u[c] = t(0)
                z[c] = t(0)
            for i in range(n):
                g, mv = dout[h, b, i], m[i] * v[h, b, i]
                for c in range(d):
                    u[c] += g * qp[h, b, i, c]
                    z[c] += mv * k[h, b, i, c]
            for i in range(n):
                g, mv = dout[h, b, i], m[i] * v[h, b, i]
                total = t(0)
                for c in range(d):
                    dqp[h, b, i, c] = g * z[c]
                    dk[h, b, i, c] = mv * u[c]
                    total += k[h, b, i, c] * u[c]
                dv[h, b, i] = m[i] * total


@numba.njit(**KERNEL)
def _num_backward(dout, smt, vt, mask, kt, qpt, dv, dqp, dk):
    """Every head: ``dS_ij = mask_ij dout_i v_j``, ``dv_j = sum_i Sm_ij dout_i`` (into
    ``dv: (H, B, N)``), then ``dQP`` and ``dK``."""
    h_size, b_size, n, d = dqp.shape
    gt = np.empty((n, 1, b_size), dout.dtype)
    dvt = np.empty((n, 1, b_size), dout.dtype)
    ds = np.empty((n, n, b_size), dout.dtype)
    tmp = np.empty((n, d, b_size), dout.dtype)
    for h in range(h_size):
        inner(dout[h].reshape(b_size, n, 1), gt)
        sm, vh = smt[h], vt[h]
        for i in range(n):
            g = gt[i, 0]
            for j in range(n):
                x, m, y, z, o = ds[i, j], mask[i, j], vh[j], sm[i, j], dvt[j, 0]
                for w in range(b_size):
                    x[w] = g[w] * y[w] * m[w]
                    o[w] = z[w] * g[w] if i == 0 else o[w] + z[w] * g[w]
        outer(dvt, dv[h].reshape(b_size, n, 1))
        _scores_back(ds, kt[h], qpt[h], tmp, dqp[h], dk[h])


def num_attention_backward(dout, cache):
    """``ops.num_attention_backward``: ``dQP``, ``dK`` and ``dV`` by
    :func:`_num_backward_keys` for a mask on the keys alone, else ``dS`` and ``dV`` in one
    batch-inner pass per head and the score backward; then ``dQ`` and ``dP`` as BLAS
    products."""
    sm, v, s_cache, mask, hooks, names = cache
    if _active(hooks):
        return NotImplemented
    q, k, p, qp = s_cache
    dt = dout.dtype
    h, b, n, d = q.shape
    dv = np.empty((h, b, n), dtype=dt)
    dqp, dk = np.empty((h, b, n, d), dtype=dt), np.empty((h, b, n, d), dtype=dt)
    if _keys_only(mask):
        _num_backward_keys(np.ascontiguousarray(dout), np.ascontiguousarray(qp, dtype=dt),
                           np.ascontiguousarray(k, dtype=dt), np.ascontiguousarray(v, dtype=dt),
                           np.ascontiguousarray(mask[:, 0], dtype=dt), dqp, dk, dv)
    else:
        _num_backward(np.ascontiguousarray(dout), batch_inner(sm, dt), batch_inner(v, dt),
                      keys_inner(mask, b, n, dt), batch_inner(k, dt), batch_inner(qp, dt),
                      dv, dqp, dk)
    dq, dp = _scores_grads(dqp, q, p)
    return dq, dk, dv, dp

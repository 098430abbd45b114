"""Fused kernels for the Transformer Program modules (``tpcore.models.program.ops``), with the
names, arguments, results and caches of the NumPy references they stand in for (see
``tpcore.kernels.nn`` for the contract). Active hooks run the references, and so does the
discrete mode of the categorical heads and the MLPs (no temperature: argmax samples).

The attention heads work on ``B`` sequences of ``N x N`` scores, where NumPy runs every
``(N, d) @ (d, N)`` product as one BLAS call (about 70 ns for 8 x 8) and one pass per
elementwise operation. The kernels instead lay each head out *batch-inner*, ``(N, d, B)``
(:func:`_inner`, ``LANES`` sequences at a time), so that every per-sequence product and every
row operation (sum over keys, maximum, softmax) is a loop over the ``B`` sequences, which
compiles to vector instructions: the products ``S = (Q P) K^T``, ``A V`` and their gradients
are sums of such loops (:func:`_nt`, :func:`_nn`, :func:`_tn`). The caches hold the
batch-inner arrays as transposed views with the reference's shapes, so either backward takes
either forward's cache; products shared by all sequences (``Q P``, ``dQP P^T``, ``Q^T dQP``)
stay BLAS products on the sequence-major arrays.

The MLPs keep their BLAS products and fuse the passes between them: bias and ReLU in one, bias,
noise and softmax in one; back, the ReLU and the first bias gradient in one (with the first
layer's gradients too when it has few inputs).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from tpcore.kernels.elementary import exp, log
from tpcore.kernels.nn import KERNEL, softmax_backward, softmax_rows

LOG_EPS = 1e-20
BOS_EPS = 1e-10
"""As in ``tpcore.models.program.ops``."""
LANES = 16
"""Sequences transposed together by :func:`_inner` and :func:`_outer` (a 512-bit vector of
float32)."""


def _active(hooks):
    return hooks is not None and hooks.active


# ---------------------------------------------------------------- batch-inner layout
@numba.njit(**KERNEL)
def _inner(a, out):
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
def _outer(a, out):
    """The inverse of :func:`_inner`: ``out[b, i, e] = a[i, e, b]``."""
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


def _lanes(a):
    """The ``(H, B, ...)`` view of a batch-inner ``(H, ..., B)`` array: the reference's shape."""
    return a.transpose(0, a.ndim - 1, *range(1, a.ndim - 1))


def _batch_inner(a, dtype):
    """``a: (H, B, ...)`` as a contiguous batch-inner ``(H, ..., B)`` array of ``dtype`` (no copy
    for an array that :func:`_lanes` made)."""
    return np.ascontiguousarray(a.transpose(0, *range(2, a.ndim), 1), dtype=dtype)


def _keys_inner(a, b, n, dtype):
    """A ``(1 or B, 1 or N, N)`` mask or bias as a batch-inner ``(N, N, B)`` array of ``dtype``."""
    out = np.empty((n, n, b), dtype=dtype)
    _inner(np.broadcast_to(a.astype(dtype, copy=False), (b, n, n)), out)
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
def _nt(a, b, out):
    """``out[i, j] = sum_c a[i, c] b[j, c]`` for every lane: ``a: (N, D, L)``,
    ``b: (M, D, L)`` -> ``out: (N, M, L)`` (``A B^T`` per sequence)."""
    for i in range(a.shape[0]):
        for j in range(b.shape[0]):
            for c in range(a.shape[1]):
                _fma(out[i, j], a[i, c], b[j, c], c == 0)


@numba.njit(**KERNEL)
def _nn(a, b, out):
    """``out[i, e] = sum_j a[i, j] b[j, e]``: ``a: (N, M, L)``, ``b: (M, D, L)`` ->
    ``(N, D, L)`` (``A B`` per sequence)."""
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            for e in range(b.shape[1]):
                _fma(out[i, e], a[i, j], b[j, e], j == 0)


@numba.njit(**KERNEL)
def _tn(a, b, out):
    """``out[j, e] = sum_i a[i, j] b[i, e]``: ``a: (N, M, L)``, ``b: (N, D, L)`` ->
    ``(M, D, L)`` (``A^T B`` per sequence)."""
    for j in range(a.shape[1]):
        for i in range(a.shape[0]):
            for e in range(b.shape[1]):
                _fma(out[j, e], a[i, j], b[i, e], i == 0)


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
        _inner(qp[h], qpt[h])
        _inner(k[h], kt[h])
        _nt(qpt[h], kt[h], st[h])


@numba.njit(**KERNEL)
def _scores_back(ds, kt, qpt, tmp, dqp, dk):
    """One head's ``dQP = dS K`` and ``dK = dS^T QP`` from batch-inner ``ds: (N, N, B)``,
    written sequence-major into ``dqp, dk: (B, N, d)`` (``tmp: (N, d, B)`` scratch)."""
    _nn(ds, kt, tmp)
    _outer(tmp, dqp)
    _tn(ds, qpt, tmp)
    _outer(tmp, dk)


def _scores_grads(dqp, q, p):
    """``dQ = dQP P^T`` and ``dP = Q^T dQP`` (summed over B, N) as BLAS products."""
    h, b, n, d = dqp.shape
    dqp2 = dqp.reshape(h, b * n, d)
    return ((dqp2 @ p.swapaxes(-1, -2)).reshape(dqp.shape),
            q.reshape(h, b * n, d).swapaxes(-1, -2) @ dqp2)


def _scores_cache(q, k, p, qp, kt, qpt):
    """``ops.scores_forward``'s cache ``(q, k, p, qp)``; ``k`` and ``qp`` as views of
    their batch-inner copies."""
    return q, _lanes(kt), p, _lanes(qpt)


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
        _inner(v[h], vt[h])
        if has_noise:
            _inner(g[h], gt)
        _cat_rows(spt[h], mask, bias, gt, has_noise, scale, inv_tau, at[h], st[h], dmt[h], row)
        _nn(at[h], vt[h], ot)
        _outer(ot, out[h])


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
                 _keys_inner(mask, b, n, dt), _keys_inner(bias, b, n, dt),
                 q if noise is None else np.ascontiguousarray(noise, dtype=dt),
                 noise is not None, t(scale), t(1.0 / tau), qpt, kt, vt, spt, at, st, dmt, out)
    a = _lanes(at)
    return out, (a, (a, tau, -1), _lanes(vt), _scores_cache(q, k, p, qp, kt, qpt),
                 mask.astype(dt), _lanes(st), _lanes(dmt), _lanes(spt), scale, hooks, names)


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
        _inner(dout[h], dt)
        _tn(at[h], dt, tmp)
        _outer(tmp, dv[h])
        _nt(dt, vt[h], da)
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
    _cat_backward(np.ascontiguousarray(dout), _batch_inner(a, dt), _batch_inner(sp, dt),
                  _batch_inner(s, dt), _batch_inner(dmask, np.bool_),
                  _keys_inner(maskf, b, n, dt), _batch_inner(v, dt), _batch_inner(k, dt),
                  _batch_inner(qp, dt), dt.type(scale / a_cache[1]), dv, dqp, dk)
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
        _inner(v[h].reshape(b_size, n, 1), vt[h].reshape(n, 1, b_size))
        sm, vh = smt[h], vt[h]
        for i in range(n):
            o = ot[i, 0]
            for j in range(n):
                x, m, y = sm[i, j], mask[i, j], vh[j]
                for w in range(b_size):
                    x[w] *= m[w]
                    o[w] = x[w] * y[w] if j == 0 else o[w] + x[w] * y[w]
        _outer(ot, out[h].reshape(b_size, n, 1))


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
    _num_forward(qp, k, v, _keys_inner(mask, b, n, dt), qpt, kt, smt, vt, out)
    if _keys_only(mask):
        return out, (_lanes(smt), v, (q, k, p, qp), mask, hooks, names)
    return out, (_lanes(smt), _lanes(vt), _scores_cache(q, k, p, qp, kt, qpt), mask, hooks,
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
        _inner(dout[h].reshape(b_size, n, 1), gt)
        sm, vh = smt[h], vt[h]
        for i in range(n):
            g = gt[i, 0]
            for j in range(n):
                x, m, y, z, o = ds[i, j], mask[i, j], vh[j], sm[i, j], dvt[j, 0]
                for w in range(b_size):
                    x[w] = g[w] * y[w] * m[w]
                    o[w] = z[w] * g[w] if i == 0 else o[w] + z[w] * g[w]
        _outer(dvt, dv[h].reshape(b_size, n, 1))
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
        _num_backward(np.ascontiguousarray(dout), _batch_inner(sm, dt), _batch_inner(v, dt),
                      _keys_inner(mask, b, n, dt), _batch_inner(k, dt), _batch_inner(qp, dt),
                      dv, dqp, dk)
    dq, dp = _scores_grads(dqp, q, p)
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


def mlp_backward(dy, cache):
    """``ops.mlp_backward`` with the softmax backward in one pass, the ReLU's and the
    first bias gradient in another (with the first layer's gradients for few inputs), the
    second bias gradient as a product with a ones vector."""
    x, w1, w2, h, hmask, y_cache = cache
    if y_cache is None:
        return NotImplemented
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

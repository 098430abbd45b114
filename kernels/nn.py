"""Fused kernels for ``tpcore.nn``: each function here has the name, arguments, results and
cache of the NumPy reference it stands in for (``tpcore.nn.functional``, ``attention``,
``optim``, ``relax``), so either backward takes either forward's cache, and the tests compare
the two in float64. ``tpcore.dispatch.kernel`` picks these on NumPy float arrays; a function
returns ``NotImplemented`` for a case it does not take (the reference runs then).

What they save is memory traffic: the reference makes one NumPy pass over the array per
elementary operation (a layer norm is about ten passes over ``(B, N, D)``); a kernel reads its
inputs once and writes its outputs once, keeping a row (or an attention tile) in registers.
They run on one thread: a second core goes to the BLAS products between them (one thread
pool; two pools spinning against each other on two cores cost more than they gain).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from tpcore.kernels.elementary import JIT, exp, log, tanh

KERNEL = dict(JIT, cache=True, nogil=True)
MASKED_SCORE = -1e9  # tpcore.nn.attention.MASKED_SCORE
"""Score of a masked key, as in ``tpcore.nn.attention``."""


# ---------------------------------------------------------------- linear
def _rows(a):
    """``a: (..., D)`` as the matrix ``(rows, D)`` (a view when it can be)."""
    return a.reshape(-1, a.shape[-1])


def _column_sums(a):
    """``a.sum(axis=0)`` of a matrix as a product with a ones vector (twice as fast)."""
    return np.ones(a.shape[0], dtype=a.dtype) @ a


def linear_forward(x, w, b=None):
    """``tpcore.nn.functional.linear_forward`` as one matrix product over all leading dimensions
    (NumPy runs ``(B, N, D) @ (D, E)`` as ``B`` small products, ~20 % slower here) and the bias
    added in place."""
    y = _rows(x) @ w
    if b is not None:
        y += b
    return y.reshape(*x.shape[:-1], w.shape[1]), (x, w, b is not None)


def linear_backward(dy, cache):
    """``tpcore.nn.functional.linear_backward`` with one matrix product per gradient."""
    x, w, has_b = cache
    dy2 = _rows(dy)
    dx = (dy2 @ w.T).reshape(*dy.shape[:-1], w.shape[0])
    return dx, _rows(x).T @ dy2, _column_sums(dy2) if has_b else None


# ---------------------------------------------------------------- layer norm
@numba.njit(**KERNEL)
def _ln_forward(x, gamma, beta, eps, y, xhat, inv):
    rows, d = x.shape
    t = x.dtype.type
    inv_d = t(1.0 / d)
    for r in range(rows):
        mean = t(0)
        for j in range(d):
            mean += x[r, j]
        mean *= inv_d
        var = t(0)
        for j in range(d):
            var += (x[r, j] - mean) * (x[r, j] - mean)
        s = t(1) / np.sqrt(var * inv_d + eps)
        inv[r, 0] = s
        for j in range(d):
            h = (x[r, j] - mean) * s
            xhat[r, j] = h
            y[r, j] = gamma[j] * h + beta[j]


def layer_norm_forward(x, gamma, beta, eps=1e-5):
    """``tpcore.nn.functional.layer_norm_forward`` in one pass per row."""
    d = x.shape[-1]
    x2 = np.ascontiguousarray(x).reshape(-1, d)
    y, xhat = np.empty_like(x2), np.empty_like(x2)
    inv = np.empty((x2.shape[0], 1), dtype=x.dtype)
    _ln_forward(x2, gamma, beta, x.dtype.type(eps), y, xhat, inv)
    lead = x.shape[:-1]
    return y.reshape(x.shape), (xhat.reshape(x.shape), inv.reshape(*lead, 1), gamma)


@numba.njit(**KERNEL)
def _ln_backward(dy, xhat, inv, gamma, dx, dgamma, dbeta):
    rows, d = dy.shape
    t = dy.dtype.type
    inv_d = t(1.0 / d)
    for j in range(d):
        dgamma[j] = 0.0
        dbeta[j] = 0.0
    for r in range(rows):
        sg = t(0)
        sgx = t(0)
        for j in range(d):
            g = dy[r, j] * gamma[j]
            sg += g
            sgx += g * xhat[r, j]
            dgamma[j] += dy[r, j] * xhat[r, j]
            dbeta[j] += dy[r, j]
        sg *= inv_d
        sgx *= inv_d
        for j in range(d):
            dx[r, j] = inv[r, 0] * (dy[r, j] * gamma[j] - sg - xhat[r, j] * sgx)


def layer_norm_backward(dy, cache):
    """``tpcore.nn.functional.layer_norm_backward``: ``dx`` row by row, ``dgamma`` and ``dbeta``
    summed on the way."""
    xhat, inv, gamma = cache
    d = dy.shape[-1]
    dy2 = np.ascontiguousarray(dy).reshape(-1, d)
    dx = np.empty_like(dy2)
    dgamma, dbeta = np.empty(d, dtype=dy.dtype), np.empty(d, dtype=dy.dtype)
    _ln_backward(dy2, np.ascontiguousarray(xhat).reshape(-1, d),
                 np.ascontiguousarray(inv).reshape(-1, 1), gamma, dx, dgamma, dbeta)
    return dx.reshape(dy.shape), dgamma, dbeta


# ---------------------------------------------------------------- GELU
GELU_C = math.sqrt(2.0 / math.pi)


@numba.njit(**KERNEL)
def _gelu(x, y, deriv):
    t = x.dtype.type
    c, k1, k3, half, one = t(GELU_C), t(0.044715), t(0.134145), t(0.5), t(1)
    for i in range(x.shape[0]):
        v = x[i]
        v2 = v * v
        th = tanh(c * v * (one + k1 * v2))
        mid = half * (one + th)
        y[i] = v * mid
        deriv[i] = mid + half * v * (one - th * th) * c * (one + k3 * v2)


def gelu_forward(x):
    """``tpcore.nn.functional.gelu_forward`` (tanh GELU and its derivative) in one pass."""
    flat = np.ascontiguousarray(x).reshape(-1)
    y, deriv = np.empty_like(flat), np.empty_like(flat)
    _gelu(flat, y, deriv)
    return y.reshape(x.shape), deriv.reshape(x.shape)


# ---------------------------------------------------------------- log-softmax
@numba.njit(**KERNEL)
def _log_softmax(x, y, lse):
    """``y[r] = x[r] - max(x[r]) - log(sum(exp(x[r] - max(x[r]))))`` for the rows of
    ``x, y: (R, K)``: the shifted rows into ``y``, their exponentials (:func:`_exp_flat`)
    summed into ``lse: (R,)``, the logs of the sums in one loop, subtracted."""
    for r in range(x.shape[0]):
        top = x[r, 0]
        for j in range(1, x.shape[1]):
            top = max(top, x[r, j])
        for j in range(x.shape[1]):
            y[r, j] = x[r, j] - top
    e = y.copy()
    _exp_flat(e)
    for r in range(x.shape[0]):
        total = e[r, 0]
        for j in range(1, x.shape[1]):
            total += e[r, j]
        lse[r] = total
    for r in range(lse.shape[0]):
        lse[r] = log(lse[r])
    for r in range(x.shape[0]):
        for j in range(x.shape[1]):
            y[r, j] -= lse[r]


def log_softmax_forward(x, axis=-1):
    """``tpcore.nn.functional.log_softmax_forward`` over the last axis in a few passes."""
    if axis not in (-1, x.ndim - 1):
        return NotImplemented
    x2 = _rows(np.ascontiguousarray(x))
    y = np.empty_like(x2)
    _log_softmax(x2, y, np.empty(x2.shape[0], dtype=x.dtype))
    y = y.reshape(x.shape)
    return y, (y, axis)


@numba.njit(**KERNEL)
def _log_softmax_grad(dy, y, dx):
    """``dx[r] = dy[r] - exp(y[r]) sum(dy[r])`` for the rows of ``(R, K)`` arrays. (The copy of
    ``y`` is a loop: a slice assignment would compile numba's shape-mismatch message, seconds of
    a first run.)"""
    for r in range(y.shape[0]):
        for j in range(y.shape[1]):
            dx[r, j] = y[r, j]
    _exp_flat(dx)
    for r in range(dy.shape[0]):
        total = dy[r, 0]
        for j in range(1, dy.shape[1]):
            total += dy[r, j]
        for j in range(dy.shape[1]):
            dx[r, j] = dy[r, j] - dx[r, j] * total


def log_softmax_backward(dy, cache):
    """``tpcore.nn.functional.log_softmax_backward`` over the last axis in two passes."""
    y, axis = cache
    if axis not in (-1, y.ndim - 1) or dy.shape != y.shape or dy.dtype != y.dtype:
        return NotImplemented
    dy2 = _rows(np.ascontiguousarray(dy))
    dx = np.empty_like(dy2)
    _log_softmax_grad(dy2, _rows(np.ascontiguousarray(y)), dx)
    return dx.reshape(dy.shape)


# ---------------------------------------------------------------- attention
@numba.njit(**KERNEL)
def _exp_flat(x):
    """``x <- exp(x)`` over a contiguous array: one long loop, which vectorises (rows of a few
    entries each do not)."""
    flat = x.reshape(-1)
    for k in range(flat.shape[0]):
        flat[k] = exp(flat[k])


@numba.njit(**KERNEL)
def _normalize_rows(e):
    """``e[r] <- e[r] / sum(e[r])`` for the rows of ``e: (R, K)``."""
    t = e.dtype.type
    for r in range(e.shape[0]):
        total = t(0)
        for j in range(e.shape[1]):
            total += e[r, j]
        inv = t(1) / total
        for j in range(e.shape[1]):
            e[r, j] *= inv


@numba.njit(**KERNEL)
def _masked_softmax(s, mask, scale):
    """``s <- softmax(where(mask, s * scale, -1e9))`` over the last axis of ``s: (B, H, N, N)``
    (in place), ``mask: (1 or B, N, N)``: shift each row by its maximum, exponentiate the whole
    array, normalise the rows."""
    b_size, n_heads, n, _ = s.shape
    per_sequence = 1 if mask.shape[0] > 1 else 0
    masked = s.dtype.type(MASKED_SCORE)
    for b in range(b_size):
        mb = mask[b * per_sequence]
        for h in range(n_heads):
            for i in range(n):
                row = s[b, h, i]
                top = masked
                for j in range(n):
                    v = row[j] * scale if mb[i, j] else masked
                    row[j] = v
                    top = max(top, v)
                for j in range(n):
                    row[j] -= top
    _exp_flat(s)
    _normalize_rows(s.reshape(-1, n))


@numba.njit(**KERNEL)
def _softmax_grad(dp, p, scale):
    """``dp <- p (dp - rowsum(dp p)) scale`` over the last axis of ``dp, p: (R, K)``."""
    t = dp.dtype.type
    for i in range(dp.shape[0]):
        acc = t(0)
        for j in range(dp.shape[1]):
            acc += dp[i, j] * p[i, j]
        for j in range(dp.shape[1]):
            dp[i, j] = p[i, j] * (dp[i, j] - acc) * scale


def _heads(a, n_heads):
    """``(B, N, D) -> (B, H, N, Dh)`` as a view (the reference's ``_split`` without hooks)."""
    b, n, d = a.shape
    return a.reshape(b, n, n_heads, d // n_heads).transpose(0, 2, 1, 3)


def _mask3(mask, b, n):
    """The mask as ``(1 or B, N, N)`` booleans (all True for None), or None when it varies over
    heads."""
    if mask is None:
        return np.ones((1, n, n), dtype=np.bool_)
    if mask.ndim != 4 or mask.shape[1] != 1 or mask.shape[0] not in (1, b):
        return None
    return np.ascontiguousarray(np.broadcast_to(mask, (mask.shape[0], 1, n, n))[:, 0])


def mha_forward(x, params, n_heads, mask=None, hooks=None):
    """``tpcore.nn.attention.mha_forward`` without active hooks: the heads are strided views of
    the ``[q k v]`` product, the head outputs are written straight into the merged ``(B, N, D)``
    array, and mask, scale and softmax are one pass over the scores. Same cache as the
    reference (its ``q, k, v`` are views of the product)."""
    b, n, d = x.shape
    m3 = _mask3(mask, b, n)
    if (hooks is not None and hooks.active) or m3 is None:
        return NotImplemented
    w = np.concatenate([params[f"w{c}"] for c in "qkv"], axis=1)
    qkv = (_rows(x) @ w).reshape(b, n, 3 * d)
    if params.get("bq") is not None:
        qkv += np.concatenate([params[f"b{c}"] for c in "qkv"])
    q, k, v = (_heads(part, n_heads) for part in np.split(qkv, 3, axis=-1))
    scale = 1.0 / math.sqrt(d // n_heads)
    p = q @ k.swapaxes(-1, -2)
    _masked_softmax(p, m3, x.dtype.type(scale))
    z = np.empty_like(x, shape=(b, n, d))
    np.matmul(p, v, out=_heads(z, n_heads))
    y = (_rows(z) @ params["wo"]).reshape(b, n, d)
    if params.get("bo") is not None:
        y += params["bo"]
    has_b, has_bo = params.get("bq") is not None, params.get("bo") is not None
    return y, (p, (x, w, has_b), (p, p, q, k, v, scale, hooks), (z, params["wo"], has_bo),
               n_heads, hooks)


def mha_backward(dy, cache):
    """``tpcore.nn.attention.mha_backward`` without active hooks: ``dz = dy Wo^T`` is read as
    heads in place, ``dS`` is one pass, and ``dq, dk, dv`` are written straight into the
    ``d[q k v]`` array that the input projection's backward takes."""
    pattern, qkv_cache, att_cache, out_cache, n_heads, hooks = cache
    _, p, q, k, v, scale, _ = att_cache
    if (hooks is not None and hooks.active) or pattern is not p:
        return NotImplemented
    z, wo, has_bo = out_cache
    x, w, has_b = qkv_cache
    b, n, d = dy.shape
    dy2 = dy.reshape(-1, d)
    grads = {"wo": z.reshape(-1, d).T @ dy2}
    if has_bo:
        grads["bo"] = _column_sums(dy2)
    dz = _heads((dy2 @ wo.T).reshape(b, n, d), n_heads)
    dqkv = np.empty_like(dy, shape=(b, n, 3 * d))
    dq, dk, dv = (_heads(part, n_heads) for part in np.split(dqkv, 3, axis=-1))
    np.matmul(p.swapaxes(-1, -2), dz, out=dv)
    ds = dz @ v.swapaxes(-1, -2)
    rows = ds.reshape(-1, n)
    _softmax_grad(rows, p.reshape(-1, n), dy.dtype.type(scale))
    np.matmul(ds, k, out=dq)
    np.matmul(ds.swapaxes(-1, -2), q, out=dk)
    dqkv2 = dqkv.reshape(-1, 3 * d)
    dw = x.reshape(-1, d).T @ dqkv2
    grads |= dict(zip(("wq", "wk", "wv"), np.split(dw, 3, axis=1)))
    if has_b:
        grads |= dict(zip(("bq", "bk", "bv"), np.split(_column_sums(dqkv2), 3)))
    return (dqkv2 @ w.T).reshape(b, n, d), grads


# ---------------------------------------------------------------- Adam
@numba.njit(**KERNEL)
def _adam(w, g, m, v, b1, c1, b2, c2, step, eps):
    for i in range(w.shape[0]):
        gi = g[i]
        mi = b1 * m[i] + c1 * gi
        vi = b2 * v[i] + c2 * (gi * gi)
        m[i] = mi
        v[i] = vi
        w[i] -= step * mi / (np.sqrt(vi) + eps)


def adam_update(w, g, m, v, b1, b2, step, eps):
    """``tpcore.nn.optim.adam_update`` in one pass over the parameter (in place)."""
    if any(not a.flags.c_contiguous or a.dtype != w.dtype for a in (w, m, v)):
        return NotImplemented
    t = w.dtype.type
    g = np.ascontiguousarray(g, dtype=w.dtype)
    _adam(w.reshape(-1), g.reshape(-1), m.reshape(-1), v.reshape(-1), t(b1), t(1 - b1), t(b2),
          t(1 - b2), t(step), t(eps))
    return None


# ---------------------------------------------------------------- Gumbel noise
@numba.njit(**KERNEL)
def _gumbel(u, tiny, top):
    for i in range(u.shape[0]):
        x = min(max(u[i], tiny), top)
        u[i] = -log(-log(x))


def gumbel_from_uniform(u):
    """``tpcore.nn.relax.gumbel_from_uniform`` in one pass (in place)."""
    if not u.flags.c_contiguous:
        return NotImplemented
    info = np.finfo(u.dtype)
    _gumbel(u.reshape(-1), u.dtype.type(info.tiny), u.dtype.type(1.0 - info.eps))
    return u


@numba.njit(**KERNEL)
def _gumbel_bits(bits, out, tiny, top):
    """``out[i] = -log(-log(u_i))`` with ``u_i = (bits[i] >> 8) 2^-24`` (clipped to
    ``[tiny, top]``): NumPy's float32 uniform from a 32-bit draw, and the noise, in one pass."""
    scale = np.float32(1.0 / 16777216.0)
    for i in range(bits.shape[0]):
        u = min(max(np.float32(bits[i] >> np.uint32(8)) * scale, tiny), top)
        out[i] = -log(-log(u))


def gumbel_fill(out, rng):
    """``tpcore.nn.relax.gumbel_fill`` for float32 from NumPy's default generator (PCG64): the
    generator's 64-bit outputs (``random_raw``) are the 32-bit draws of its float32 stream in
    pairs, low half first, so they make the very same uniforms, with the same state after, in
    about half the time of ``rng.random``; conversion and noise in one pass. A half draw the
    generator holds from before (an odd count) goes first, an odd one last, through
    ``rng.random``."""
    if (out.dtype != np.float32 or not out.flags.c_contiguous
            or type(rng) is not np.random.Generator
            or type(rng.bit_generator) is not np.random.PCG64):
        return NotImplemented
    flat = out.reshape(-1)
    start = min(int(rng.bit_generator.state["has_uint32"]), flat.size)
    if start:
        flat[0] = rng.random(dtype=np.float32)
    pairs = (flat.size - start) // 2
    bits = rng.bit_generator.random_raw(pairs).view(np.uint32)
    if start + 2 * pairs < flat.size:
        flat[-1] = rng.random(dtype=np.float32)
    info = np.finfo(np.float32)
    tiny, top = np.float32(info.tiny), np.float32(1.0 - info.eps)
    end = start + 2 * pairs
    _gumbel_bits(bits, flat[start:end], tiny, top)
    for part in (flat[:start], flat[end:]):
        if part.size:
            _gumbel(part, tiny, top)
    return out


# ---------------------------------------------------------------- softmax
@numba.njit(**KERNEL)
def _softmax(x, g, has_noise, inv_tau, y):
    """``y[r] = softmax((x[r] + g[r]) inv_tau)`` for the rows of ``x: (R, K)`` (``g`` unused
    unless ``has_noise``), in three passes as :func:`_masked_softmax_rows`."""
    t = x.dtype.type
    for r in range(x.shape[0]):
        top = t(-np.inf)
        for j in range(x.shape[1]):
            v = (x[r, j] + g[r, j]) * inv_tau if has_noise else x[r, j] * inv_tau
            y[r, j] = v
            top = max(top, v)
        for j in range(x.shape[1]):
            y[r, j] -= top
    _exp_flat(y)
    _normalize_rows(y)


def softmax_rows(x, noise, tau):
    """``softmax((x + noise) / tau)`` over the last axis (``noise`` may be None) in one pass."""
    k = x.shape[-1]
    x2 = np.ascontiguousarray(x).reshape(-1, k)
    g2 = x2 if noise is None else np.ascontiguousarray(noise, dtype=x.dtype).reshape(-1, k)
    y = np.empty_like(x2)
    _softmax(x2, g2, noise is not None, x.dtype.type(1.0 / tau), y)
    return y.reshape(x.shape)


def gumbel_softmax_forward(logits, noise, tau, hard=False, axis=-1):
    """``tpcore.nn.relax.gumbel_softmax_forward`` (soft, last axis) in one pass per row."""
    if hard or axis not in (-1, logits.ndim - 1) or (noise is not None
                                                    and noise.shape != logits.shape):
        return NotImplemented
    y = softmax_rows(logits, noise, tau)
    return y, (y, tau, axis)


def softmax_backward(dy, cache):
    """``tpcore.nn.functional.softmax_backward`` (last axis) in one pass per row."""
    y, tau, axis = cache
    if axis not in (-1, y.ndim - 1) or dy.shape != y.shape or dy.dtype != y.dtype:
        return NotImplemented
    k = y.shape[-1]
    dx = np.array(dy, order="C").reshape(-1, k)
    _softmax_grad(dx, np.ascontiguousarray(y).reshape(-1, k), dy.dtype.type(1.0 / tau))
    return dx.reshape(dy.shape)

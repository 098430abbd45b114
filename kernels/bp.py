"""Numba kernel for exact BP_k on k-filtered binary trees, one sequence at a time.

Same semantics as the NumPy reference ``tpcore.bp.bp_forward`` (which the tests compare it
with): one upward and one downward sweep, every message normalised (uniform when its sum is 0),
root marginal, leaf marginals, leaf cavities and log Z. Host-only (numba on NumPy arrays).

The transition tensor is passed as its support: ``idx: (T, 3)`` rows ``(a, b, c)`` and weights
``w: (T,)`` with ``M[a, b, c] = w``. A grammar of the random ensemble has T = q^2 (each pair has
one parent), a dense tensor T = q^3, so the cost per factor is O(T) rather than O(q^3).
Nodes use heap numbering: level m, position j is node ``2**m + j``; its children are
``2 n`` and ``2 n + 1``.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _normalize(x: np.ndarray) -> float:
    """Normalise ``x`` in place (uniform when its sum is 0) and return the sum."""
    q = x.shape[0]
    s = 0.0
    for a in range(q):
        s += x[a]
    if s > 0.0:
        for a in range(q):
            x[a] /= s
    else:
        for a in range(q):
            x[a] = 1.0 / q
    return s


@numba.njit(cache=True)
def _log(s: float) -> float:
    return np.log(s) if s > 0.0 else -np.inf


@numba.njit(cache=True)
def bp_batch(idx: np.ndarray, w: np.ndarray, Q: np.ndarray, p0: np.ndarray,
             evidence: np.ndarray, k: int):
    """BP_k over a batch. ``idx: (T, 3)``, ``w: (T,)``, ``Q: (2**k, q, q)``, ``p0: (q,)``,
    ``evidence: (B, N, q)`` -> ``root (B, q)``, ``leaves (B, N, q)``, ``cavity (B, N, q)``,
    ``log_z (B,)``."""
    B, N, q = evidence.shape
    l = 0
    while (1 << l) < N:
        l += 1
    J = 1 << k
    T = w.shape[0]
    root = np.empty((B, q))
    leaves = np.empty((B, N, q))
    cavity = np.empty((B, N, q))
    log_z = np.empty(B)
    up = np.empty((2 * N, q))
    down = np.empty((2 * N, q))
    v = np.empty((J, q))
    pre = np.empty((J + 1, q))
    suf = np.empty((J + 1, q))
    r = np.empty(q)
    for n in range(B):
        lz = 0.0
        for i in range(N):
            for a in range(q):
                up[N + i, a] = evidence[n, i, a]
            lz += _log(_normalize(up[N + i]))
        for m in range(l - 1, k - 1, -1):
            for p in range(1 << m, 2 << m):
                for a in range(q):
                    up[p, a] = 0.0
                for t in range(T):
                    up[p, idx[t, 0]] += w[t] * up[2 * p, idx[t, 1]] * up[2 * p + 1, idx[t, 2]]
                lz += _log(_normalize(up[p]))
        for j in range(J):
            for a in range(q):
                acc = 0.0
                for b in range(q):
                    acc += Q[j, a, b] * up[J + j, b]
                v[j, a] = acc
            lz += _log(_normalize(v[j]))
        # root and cavities from normalised prefix / suffix products of the v_j
        for a in range(q):
            pre[0, a] = p0[a]
            suf[J, a] = 1.0
        for j in range(J):
            for a in range(q):
                pre[j + 1, a] = pre[j, a] * v[j, a]
            s = 0.0
            for a in range(q):
                s += pre[j + 1, a]
            lz += _log(s)
            if s > 0.0:
                for a in range(q):
                    pre[j + 1, a] /= s
        for j in range(J - 1, -1, -1):
            for a in range(q):
                suf[j, a] = suf[j + 1, a] * v[j, a]
            s = 0.0
            for a in range(q):
                s += suf[j, a]
            if s > 0.0:
                for a in range(q):
                    suf[j, a] /= s
        for a in range(q):
            r[a] = pre[J, a]
        _normalize(r)
        for a in range(q):
            root[n, a] = r[a]
        for j in range(J):
            for a in range(q):
                r[a] = pre[j, a] * suf[j + 1, a]
            _normalize(r)
            for b in range(q):
                acc = 0.0
                for a in range(q):
                    acc += Q[j, a, b] * r[a]
                down[J + j, b] = acc
            _normalize(down[J + j])
        for m in range(k, l):
            for p in range(1 << m, 2 << m):
                cl = 2 * p
                cr = 2 * p + 1
                for a in range(q):
                    down[cl, a] = 0.0
                    down[cr, a] = 0.0
                for t in range(T):
                    a = idx[t, 0]
                    b = idx[t, 1]
                    c = idx[t, 2]
                    wd = w[t] * down[p, a]
                    down[cl, b] += wd * up[cr, c]
                    down[cr, c] += wd * up[cl, b]
                _normalize(down[cl])
                _normalize(down[cr])
        for i in range(N):
            for a in range(q):
                cavity[n, i, a] = down[N + i, a]
                r[a] = down[N + i, a] * evidence[n, i, a]
            _normalize(r)
            for a in range(q):
                leaves[n, i, a] = r[a]
        log_z[n] = lz
    return root, leaves, cavity, log_z

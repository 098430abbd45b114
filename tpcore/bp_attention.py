"""Belief propagation as ``l`` single-head attention blocks (the paper's Appendix E).

A forward-only recursion that yields the exact MLM marginal of every leaf of the full (k = 0)
tree of depth ``l`` in ``l`` steps, written as a transformer would compute it. Token i carries

* ``m_i``: the upward message of its ancestor ``A_h`` at height h (``A_0 = i``);
* ``R_i: (q, q)``: the transfer table from leaf value to the value of ``A_h``.

Block h (h = 0..l-1):

* attention: token i averages ``m_j`` over the leaves j of the sibling subtree ``C_h`` of
  ``A_h`` (all of them hold ``u_{C_h}``, so the average is exact, masked leaves included).
  The pattern comes from the positional part only: with path signs ``p_i in {±1}^l`` (root
  first), score ``beta (sum_{t < l-h-1} p_it p_jt - p_i,l-h-1 p_j,l-h-1)`` (``beta`` times an
  identity-like block, the paper's eq. 20 read with identities), whose softmax is uniform on
  ``C_h`` as ``beta -> inf``; ``beta=None`` uses that limit exactly;
* FFN: ``T_h[b, a] = sum_c M[a, P(b, c)] mbar(c)`` with ``P(b, c) = (b, c)`` when ``A_h`` is a
  left child and ``(c, b)`` when right; ``m <- m T_h``, ``R <- R T_h`` (normalised).

After l blocks, ``mu_i(b) ∝ sum_a R_i[b, a] p0(a)`` = ``P(x_i = b | all other leaves)``, BP's leaf
cavity (the index placement of the paper's eqs. 24-26 is inconsistent; this is the clean form).
"""

from __future__ import annotations

from typing import Any

from tpcore.backend import xp_of


def path_signs(l: int, xp: Any) -> Any:
    """``p[i, t] = +1`` if the path to leaf i turns left at level t (root first), else -1:
    (2**l, l)."""
    i = xp.arange(2**l)[:, None]
    bits = (i >> (l - 1 - xp.arange(l))[None, :]) & 1
    return 1.0 - 2.0 * bits


def complementary_attention(l: int, h: int, xp: Any, beta: float | None = None) -> Any:
    """Attention pattern of block h: ``A[i, j]`` uniform over the sibling subtree of leaf i's
    height-h ancestor (``beta=None``), or the softmax of the positional scores: (N, N)."""
    N = 2**l
    if beta is None:
        i = xp.arange(N)
        inside = (i[None, :] >> h) == ((i[:, None] >> h) ^ 1)
        return inside / float(2**h)
    p = path_signs(l, xp)
    w = xp.zeros(l)
    w[: l - h - 1] = beta
    w[l - h - 1] = -beta
    s = (p * w) @ p.T
    e = xp.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def forward_only_marginals(M: Any, p0: Any, evidence: Any, beta: float | None = None) -> Any:
    """Leaf predictions ``P(x_i | other leaves)`` on the full tree from ``evidence: (B, N, q)``
    (one-hot, all ones where masked) in ``l`` attention + FFN steps: (B, N, q)."""
    xp = xp_of(M, evidence)
    N = evidence.shape[1]
    l = N.bit_length() - 1
    m = evidence / evidence.sum(axis=-1, keepdims=True)
    R = None
    for h in range(l):
        mbar = xp.einsum("ij,njc->nic", complementary_attention(l, h, xp, beta), m)
        right = ((xp.arange(N) >> h) & 1).astype(bool)[None, :, None, None]
        T = xp.where(right, xp.einsum("acb,nic->niba", M, mbar),
                     xp.einsum("abc,nic->niba", M, mbar))
        m = xp.einsum("nib,niba->nia", m, T)
        m = m / m.sum(axis=-1, keepdims=True)
        R = T if R is None else xp.einsum("nixb,niba->nixa", R, T)
        R = R / R.sum(axis=(-2, -1), keepdims=True)
    mu = xp.einsum("niba,a->nib", R, p0)
    return mu / mu.sum(axis=-1, keepdims=True)

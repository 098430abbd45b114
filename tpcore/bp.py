"""Exact belief propagation BP_k on the k-filtered binary tree, with log Z and a hand-written
backward.

Factor graph of the k-filtered model of depth ``l`` (``N = 2**l`` leaves):

* below level k, one full factor ``M[x_u, x_l, x_r]`` per internal node;
* above it, the root ``x_0`` (prior ``p0``) links to each level-k node j through the pairwise
  factor ``Q[j][x_0, x_j]`` (``tpcore.tasks.trees.path_matrices``; ``k = 0`` gives Q = I);
* leaf i carries the evidence vector ``e_i: (q,)`` (one-hot when observed, all ones when masked).

Sweeps (all messages normalised to sum 1; a message whose sum is 0 becomes uniform):

* up:   ``u_i = e_i``; ``u_u(a) ∝ sum_{b,c} M[a,b,c] u_l(b) u_r(c)`` up to level k;
        ``v_j(a) ∝ sum_b Q[j][a,b] u_j(b)``; root ``r(a) ∝ p0(a) prod_j v_j(a)``;
* down: ``c_j(a) ∝ p0(a) prod_{l != j} v_l(a)``; ``d_j(b) ∝ sum_a Q[j][a,b] c_j(a)``;
        ``d_l(b) ∝ sum_{a,c} M[a,b,c] d_u(a) u_r(c)``,
        ``d_r(c) ∝ sum_{a,b} M[a,b,c] d_u(a) u_l(b)``;
* outputs: root marginal ``r``, leaf cavity ``d_i`` (= ``P(x_i | other leaves)``, the MLM
  prediction), leaf marginal ``μ_i ∝ e_i d_i`` and ``log Z = log sum_tree p0 prod factors
  prod_i e_i(x_i)``, the sum of the logs of every upward normaliser (root included). With
  one-hot evidence log Z is the log-likelihood of the leaves under the k-filtered model; with
  all-ones evidence at masked leaves it is the likelihood of the observed ones.

``bp_forward``/``bp_backward`` are the array-module reference (vectorised over the batch and
over the nodes of a level, runs on NumPy or CuPy); ``belief_propagation`` dispatches to the numba
kernel ``tpcore.kernels.bp`` for NumPy inputs and to the reference otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tpcore.backend import xp_of
from tpcore.errors import TpcoreError
from tpcore.limits import check_memory
from tpcore.tasks.trees import path_bits, path_matrices


@dataclass
class BPResult:
    """``root: (B, q)``, ``leaves: (B, N, q)`` posterior marginals, ``cavity: (B, N, q)``
    leaf predictions from all other leaves, ``log_z: (B,)``."""

    root: Any
    leaves: Any
    cavity: Any
    log_z: Any


def evidence_from_leaves(leaves: Any, q: int, mask: Any = None, dtype: Any = None) -> Any:
    """One-hot evidence ``(B, N, q)`` from symbols ``leaves: (B, N)``; rows where
    ``mask: (B, N)`` is true (masked leaves) are all ones. Symbols outside 0..q-1 raise."""
    xp = xp_of(leaves)
    leaves = xp.asarray(leaves)
    if leaves.ndim != 2:
        raise TpcoreError(f"leaves must be (B, N); got shape {tuple(leaves.shape)}")
    if leaves.size and (int(leaves.min()) < 0 or int(leaves.max()) >= q):
        raise TpcoreError(f"leaf symbols must be in 0..{q - 1}; got {int(leaves.min())}.."
                          f"{int(leaves.max())}")
    dtype = xp.float64 if dtype is None else dtype
    e = (leaves[..., None] == xp.arange(q)).astype(dtype)
    if mask is not None:
        e = xp.where(xp.asarray(mask, dtype=bool)[..., None], xp.ones((), dtype), e)
    return e


def memory_estimate(batch: int, l: int, q: int, k: int, kernel: bool = False) -> int:
    """Bytes of the largest arrays BP_k allocates for ``batch`` sequences of ``2**l`` leaves over
    ``q`` symbols (float64; a bound): the grammar and path matrices; per sequence, on the
    reference path six sets of upward and downward messages over all levels
    ``(2**(l+1), q)`` and the cavity logs ``(2**k, 2**k, q)`` twice, on the kernel path its
    evidence copy and three ``(2**l, q)`` outputs."""
    per_sequence = 4 * 2**l * q if kernel else 6 * 2 ** (l + 1) * q + 2 * 4**k * q
    return 8 * (q**3 + 2**k * q * q + batch * per_sequence)


def _depth(evidence: Any, k: int, kernel: bool = False) -> int:
    """``l`` of ``evidence: (B, 2**l, q)``; checks the shape, ``k`` and the memory BP needs."""
    n = evidence.shape[1]
    l = n.bit_length() - 1
    if evidence.ndim != 3 or n < 2 or 2**l != n:
        raise TpcoreError(f"evidence must be (B, 2**l, q) with l >= 1; got {tuple(evidence.shape)}")
    if not 0 <= k <= l:
        raise TpcoreError(f"k={k!r} is invalid; expected an integer in 0..{l}")
    B, _, q = evidence.shape
    check_memory(memory_estimate(B, l, q, k, kernel), f"BP_{k} on {B} sequences of 2**{l} "
                 f"leaves over q={q} symbols")
    return l


def _normalize(x: Any) -> tuple[Any, Any]:
    """``y = x / s`` with ``s = x.sum(-1)``, uniform where ``s == 0``; returns ``(y, s)``."""
    xp = xp_of(x)
    s = x.sum(axis=-1, keepdims=True)
    ok = s > 0
    return xp.where(ok, x / xp.where(ok, s, 1), 1.0 / x.shape[-1]), s


def _normalize_backward(dy: Any, y: Any, s: Any, dlog_s: Any = None) -> Any:
    """Backward of ``_normalize`` (and of ``log s`` when ``dlog_s`` is given):
    ``dx = (dy - sum(dy * y)) / s + dlog_s / s``; zero where ``s == 0``."""
    xp = xp_of(dy)
    g = dy - (dy * y).sum(axis=-1, keepdims=True)
    if dlog_s is not None:
        g = g + dlog_s
    ok = s > 0
    return xp.where(ok, g / xp.where(ok, s, 1), 0.0)


def _log_softmax_rows(lg: Any) -> tuple[Any, Any]:
    """``(p, log sum exp)`` over the last axis of log-weights that may be -inf (uniform and
    ``-inf`` when a whole row is)."""
    xp = xp_of(lg)
    m = lg.max(axis=-1, keepdims=True)
    fin = xp.isfinite(m)
    w = xp.exp(lg - xp.where(fin, m, 0))
    p, s = _normalize(w)
    with _quiet(xp):
        lse = xp.where(fin, xp.log(s) + xp.where(fin, m, 0), -xp.inf)
    return p, lse[..., 0]


class _quiet:
    """Silence NumPy's divide/invalid warnings for log(0) = -inf (no-op for CuPy)."""

    def __init__(self, xp: Any):
        self.ctx = xp.errstate(divide="ignore", invalid="ignore") if hasattr(xp, "errstate") \
            else None

    def __enter__(self) -> None:
        if self.ctx is not None:
            self.ctx.__enter__()

    def __exit__(self, *exc: Any) -> None:
        if self.ctx is not None:
            self.ctx.__exit__(*exc)


def _log(x: Any) -> Any:
    xp = xp_of(x)
    with _quiet(xp):
        return xp.log(x)


def bp_forward(M: Any, p0: Any, evidence: Any, k: int, Q: Any = None) -> tuple[BPResult, dict]:
    """Reference BP_k: ``M: (q, q, q)``, ``p0: (q,)``, ``evidence: (B, 2**l, q)`` -> result and
    the cache ``bp_backward`` needs. ``Q: (2**k, q, q)`` defaults to ``path_matrices(M, k)``."""
    xp = xp_of(M, evidence)
    l = _depth(evidence, k)
    Q = path_matrices(M, k) if Q is None else Q
    # upward sweep: up[m] holds the normalised messages of level m (m = k..l)
    u, s = _normalize(evidence)
    up, up_s = {l: u}, {l: s}
    for m in range(l - 1, k - 1, -1):
        below = up[m + 1]
        up[m], up_s[m] = _normalize(xp.einsum("abc,nib,nic->nia", M, below[:, 0::2],
                                              below[:, 1::2]))
    v, v_s = _normalize(xp.einsum("jab,njb->nja", Q, up[k]))
    L = _log(v)  # (B, J, q)
    log_p0 = _log(p0)
    root, log_root_z = _log_softmax_rows(log_p0 + L.sum(axis=1))
    log_z = sum(_log(up_s[m])[..., 0].sum(axis=1) for m in up) \
        + _log(v_s)[..., 0].sum(axis=1) + log_root_z
    # downward sweep: cavities c_j(a) ∝ p0(a) prod_{l != j} v_l(a), computed in logs
    J = L.shape[1]
    off = ~xp.eye(J, dtype=bool)
    lc = log_p0 + xp.where(off[None, :, :, None], L[:, None, :, :], 0.0).sum(axis=2)
    c, _ = _log_softmax_rows(lc)
    down, down_s = {}, {}
    down[k], down_s[k] = _normalize(xp.einsum("jab,nja->njb", Q, c))
    for m in range(k, l):
        d, below = down[m], up[m + 1]
        dl = xp.einsum("abc,nia,nic->nib", M, d, below[:, 1::2])
        dr = xp.einsum("abc,nia,nib->nic", M, d, below[:, 0::2])
        raw = xp.stack([dl, dr], axis=2).reshape(below.shape)
        down[m + 1], down_s[m + 1] = _normalize(raw)
    mu, mu_s = _normalize(evidence * down[l])
    cache = dict(M=M, p0=p0, Q=Q, e=evidence, k=k, l=l, up=up, up_s=up_s, v=v, v_s=v_s, L=L,
                 root=root, c=c, off=off, down=down, down_s=down_s, mu=mu, mu_s=mu_s)
    return BPResult(root=root, leaves=mu, cavity=down[l], log_z=log_z), cache


def bp_backward(cache: dict, d_log_z: Any = None, d_root: Any = None, d_leaves: Any = None,
                d_cavity: Any = None) -> tuple[Any, Any, Any]:
    """Backward of ``bp_forward``: upstream gradients of ``log_z (B,)``, ``root (B, q)``,
    ``leaves (B, N, q)`` and ``cavity (B, N, q)`` (None = zero) -> ``(dM, dQ, d_evidence)``.

    Reverse mode through every step: a normalisation ``y = x / s`` (with ``log s`` into log Z)
    back-propagates ``dx = (dy - <dy, y>) / s + dlogZ / s``; a factor message
    ``x_u(a) = sum M[a,b,c] y_l(b) y_r(c)`` sends ``dM[a,b,c] += dx_u(a) y_l(b) y_r(c)``,
    ``dy_l(b) += sum_{a,c} M[a,b,c] dx_u(a) y_r(c)`` (and symmetrically); the downward factor
    messages are the same trilinear form with the roles of the three slots exchanged; log-domain
    products ``lc_j = log p0 + sum_{l != j} log v_l`` send ``d log v_l = sum_{j != l} dlc_j``
    and ``dv = d log v / v``. ``dQ`` still has to be taken through ``path_matrices`` (see
    ``path_matrices_backward``) when Q is a function of M.
    """
    xp = xp_of(cache["e"])
    M, Q, e, k, l = cache["M"], cache["Q"], cache["e"], cache["k"], cache["l"]
    up, up_s, down, down_s = cache["up"], cache["up_s"], cache["down"], cache["down_s"]
    B = e.shape[0]
    zero = xp.zeros((), dtype=e.dtype)
    g_z = (xp.zeros(B, dtype=e.dtype) if d_log_z is None else d_log_z)[:, None, None]
    dM = xp.zeros_like(M)
    dQ = xp.zeros_like(Q)
    # leaf marginals mu ∝ e * d_l
    dmu = zero if d_leaves is None else d_leaves
    g = _normalize_backward(dmu + xp.zeros_like(e), cache["mu"], cache["mu_s"])
    de = g * down[l]
    dd = {l: g * e + (zero if d_cavity is None else d_cavity)}
    du = {m: xp.zeros_like(up[m]) for m in up}
    # downward levels, deepest first
    for m in range(l - 1, k - 1, -1):
        below = up[m + 1]
        graw = _normalize_backward(dd[m + 1], down[m + 1], down_s[m + 1])
        gl, gr = graw[:, 0::2], graw[:, 1::2]
        d, yl, yr = down[m], below[:, 0::2], below[:, 1::2]
        dM += xp.einsum("nib,nia,nic->abc", gl, d, yr) + xp.einsum("nic,nia,nib->abc", gr, d, yl)
        dd[m] = xp.einsum("abc,nib,nic->nia", M, gl, yr) + xp.einsum("abc,nic,nib->nia", M, gr, yl)
        du[m + 1][:, 1::2] += xp.einsum("abc,nib,nia->nic", M, gl, d)
        du[m + 1][:, 0::2] += xp.einsum("abc,nic,nia->nib", M, gr, d)
    # level-k downward messages d_j ∝ sum_a Q[j][a, b] c_j(a)
    graw = _normalize_backward(dd[k], down[k], down_s[k])
    c = cache["c"]
    dQ += xp.einsum("nja,njb->jab", c, graw)
    dc = xp.einsum("jab,njb->nja", Q, graw)
    dlc = c * (dc - (dc * c).sum(axis=-1, keepdims=True))
    dL = xp.where(cache["off"][None, :, :, None], dlc[:, :, None, :], 0.0).sum(axis=1)
    # root r = softmax(log p0 + sum_j L_j), log Z += logsumexp
    root = cache["root"]
    dr = zero if d_root is None else d_root
    dlr = root * (dr - (dr * root).sum(axis=-1, keepdims=True)) + g_z[:, 0] * root
    dL = dL + dlr[:, None, :]
    v = cache["v"]
    dv = xp.where(v > 0, dL / xp.where(v > 0, v, 1), 0.0)
    graw = _normalize_backward(dv, v, cache["v_s"], g_z)
    dQ += xp.einsum("nja,njb->jab", graw, up[k])
    du[k] += xp.einsum("jab,nja->njb", Q, graw)
    # upward levels, top first
    for m in range(k, l):
        below = up[m + 1]
        graw = _normalize_backward(du[m], up[m], up_s[m], g_z)
        yl, yr = below[:, 0::2], below[:, 1::2]
        dM += xp.einsum("nia,nib,nic->abc", graw, yl, yr)
        du[m + 1][:, 0::2] += xp.einsum("abc,nia,nic->nib", M, graw, yr)
        du[m + 1][:, 1::2] += xp.einsum("abc,nia,nib->nic", M, graw, yl)
    de += _normalize_backward(du[l], up[l], up_s[l], g_z)
    return dM, dQ, de


def path_matrices_backward(M: Any, k: int, dQ: Any) -> Any:
    """Backward of ``path_matrices``: ``dQ: (2**k, q, q)`` -> ``dM: (q, q, q)``.

    ``Q[j] = A_1 ... A_k`` with ``A_m`` = ``M^L`` or ``M^R``: ``dA_m += P_{m-1}^T dQ[j] S_{m+1}^T``
    (P the product before, S after), then ``dM[a,b,c] += dM^L[a,b] + dM^R[a,c]``.
    """
    xp = xp_of(M)
    q = M.shape[0]
    turns = [M.sum(axis=2), M.sum(axis=1)]
    dturn = [xp.zeros((q, q), dtype=M.dtype), xp.zeros((q, q), dtype=M.dtype)]
    eye = xp.eye(q, dtype=M.dtype)
    for j, bits in enumerate(path_bits(k).tolist()):
        mats = [turns[t] for t in bits]
        suffix = [eye]
        for A in reversed(mats):
            suffix.insert(0, A @ suffix[0])
        prefix = eye
        for m, t in enumerate(bits):
            dturn[t] += prefix.T @ dQ[j] @ suffix[m + 1].T
            prefix = prefix @ mats[m]
    return dturn[0][:, :, None] + dturn[1][:, None, :]


def transition_from_logits(theta: Any) -> Any:
    """``M[a] = softmax(theta[a])`` over the q^2 children pairs: ``theta: (q, q, q)``."""
    xp = xp_of(theta)
    q = theta.shape[0]
    z = theta.reshape(q, q * q)
    w = xp.exp(z - z.max(axis=1, keepdims=True))
    return (w / w.sum(axis=1, keepdims=True)).reshape(theta.shape)


def transition_from_logits_backward(M: Any, dM: Any) -> Any:
    """Softmax backward per parent: ``dtheta = M * (dM - sum_{b,c} dM * M)``."""
    return M * (dM - (dM * M).sum(axis=(1, 2), keepdims=True))


def log_likelihood_grad(theta: Any, p0: Any, evidence: Any, k: int = 0) -> tuple[Any, Any]:
    """Mean log Z over the batch and its gradient with respect to the logits ``theta``."""
    M = transition_from_logits(theta)
    res, cache = bp_forward(M, p0, evidence, k)
    B = evidence.shape[0]
    xp = xp_of(evidence)
    dM, dQ, _ = bp_backward(cache, d_log_z=xp.full(B, 1.0 / B, dtype=evidence.dtype))
    if k > 0:
        dM = dM + path_matrices_backward(M, k, dQ)
    return res.log_z.mean(), transition_from_logits_backward(M, dM)


def belief_propagation(M: Any, p0: Any, evidence: Any, k: int,
                       use_kernel: bool | None = None) -> BPResult:
    """BP_k marginals and log Z for a batch of evidence ``(B, 2**l, q)``.

    NumPy inputs run on the numba kernel (same results as ``bp_forward`` to rounding) unless
    ``use_kernel=False``; other array modules use the reference.
    """
    xp = xp_of(M, evidence)
    if use_kernel is None:
        use_kernel = xp is np
    if not use_kernel:
        return bp_forward(M, p0, evidence, k)[0]
    from tpcore.kernels.bp import bp_batch

    _depth(evidence, k, kernel=True)
    M = np.ascontiguousarray(M, dtype=np.float64)
    idx = np.argwhere(M > 0)
    root, leaves, cavity, log_z = bp_batch(
        idx.astype(np.int64), M[M > 0], np.ascontiguousarray(path_matrices(M, k)),
        np.ascontiguousarray(p0, dtype=np.float64),
        np.ascontiguousarray(evidence, dtype=np.float64), k)
    return BPResult(root=root, leaves=leaves, cavity=cavity, log_z=log_z)


def expected_rule_counts(M: Any, p0: Any, evidence: Any) -> tuple[Any, Any]:
    """Inside-outside E-step on the full (k = 0) tree: ``C[a,b,c] = sum_n sum_factors
    P(x_u=a, x_l=b, x_r=c | leaves_n)`` and ``sum_n log Z_n``.

    Uses ``C = M * d(sum_n log Z_n)/dM`` (the expected count of a rule is its weight times the
    derivative of the log partition function), i.e. the backward of ``bp_forward``.
    """
    xp = xp_of(evidence)
    res, cache = bp_forward(M, p0, evidence, 0)
    dM, _, _ = bp_backward(cache, d_log_z=xp.ones(evidence.shape[0], dtype=evidence.dtype))
    return M * dM, res.log_z.sum()

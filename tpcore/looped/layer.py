"""The transformer layer of Eq. 1 (Giannou et al. 2023) with a hand-written backward.

Columns are tokens: ``X`` is ``(d, n)`` or batched ``(B, d, n)``. One layer is

    A    = X + sum_h V_h X P_h,            P_h = sigma_lam( (K_h X)^T (Q_h X) )      (1a)
    f(X) = A + W2 ReLU(W1 A + b1 1^T) + b2 1^T                                      (1b)

where ``sigma_lam`` is a softmax over the keys ``j`` of each query column ``k``:
``P[j, k] = exp(lam S[j, k]) / sum_i exp(lam S[i, k])`` with ``S = (K X)^T (Q X)``, so output
column ``k`` is ``x_k + sum_h sum_j P_h[j, k] V_h x_j``. ``hard=True`` replaces the softmax by a
hardmax that splits ties evenly: ``P[j, k] = 1/|T_k|`` for ``j`` in
``T_k = {j : S[j, k] >= max_i S[i, k] - tol}`` (read/write need exactly 1/2 on two tied columns).

Shapes: ``K_h, Q_h: (k_h, d)``, ``V_h: (d, d)``, ``W1: (h, d)``, ``b1: (h,)``, ``W2: (d, h)``,
``b2: (d,)``. Weights are shared by every program of a batch. Everything runs over the array module
of ``X`` (NumPy or CuPy); the looped computer uses float64.

API (FLEQ and SUBLEQ both build on it)::

    layer = Layer(heads=(AttentionHead(K, Q, V, lam),), W1=W1, b1=b1, W2=W2, b2=b2)
    Y, cache = layer_forward(X, layer, hard=False)        # exact Eq. 1
    dX, grads = layer_backward(dY, cache)                 # grads: Layer of gradients
    Y = layer_forward_sparse(X, layer, n_global=s)        # scratchpad-only global attention

``layer_forward_sparse`` is the paper's sparsity remark: only the first ``n_global`` (scratchpad)
columns attend to every column; every other column ``k`` attends to the scratchpad columns and
to itself, which costs O(n s d) instead of O(n^2 d). With ``Layer.scope`` a feed-forward unit can be
declared to act only on scratchpad columns (``SCOPE_GLOBAL``) or only on the others
(``SCOPE_LOCAL``); the sparse forward then evaluates it only there. The constructions gate such
units with a large constant, so they are exactly zero elsewhere and both forwards give the same X
(the tests check this).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from tpcore.backend import xp_of

SCOPE_ALL, SCOPE_GLOBAL, SCOPE_LOCAL = 0, 1, 2
"""Feed-forward unit scopes: every column, scratchpad columns only, non-scratchpad columns only."""


@dataclass(frozen=True)
class AttentionHead:
    """One attention head: scores ``(K X)^T (Q X)``, inverse temperature ``lam``, values ``V X``."""

    K: Any
    Q: Any
    V: Any
    lam: float = 1.0


@dataclass(frozen=True)
class Layer:
    """Weights of one Eq. 1 layer. ``scope: (h,)`` ints (``SCOPE_*``) or None (all ``SCOPE_ALL``);
    it matters only to :func:`layer_forward_sparse`."""

    heads: tuple[AttentionHead, ...]
    W1: Any
    b1: Any
    W2: Any
    b2: Any
    scope: Any = field(default=None, compare=False)

    @property
    def width(self) -> int:
        """Model width d."""
        return int(self.W2.shape[0])

    @property
    def hidden(self) -> int:
        """Feed-forward hidden width h."""
        return int(self.W1.shape[0])


def _t(a: Any) -> Any:
    """Swap the last two axes (batched transpose)."""
    return a.swapaxes(-1, -2)


def _batch_sum(a: Any, batched: bool) -> Any:
    return a.sum(axis=0) if batched else a


def hardmax_columns(S: Any, tol: float = 1e-9) -> Any:
    """Column-wise hardmax of scores ``S: (..., n_keys, n_queries)`` splitting ties evenly."""
    top = S.max(axis=-2, keepdims=True)
    mask = (S >= top - tol).astype(S.dtype)
    return mask / mask.sum(axis=-2, keepdims=True)


def softmax_columns(Z: Any) -> Any:
    """Column-wise (over axis -2) max-subtracted softmax of ``Z: (..., n_keys, n_queries)``."""
    xp = xp_of(Z)
    E = xp.exp(Z - Z.max(axis=-2, keepdims=True))
    return E / E.sum(axis=-2, keepdims=True)


def attention_forward(X: Any, heads: tuple[AttentionHead, ...], hard: bool = False,
                      tol: float = 1e-9) -> tuple[Any, list[tuple[Any, Any, Any, Any]]]:
    """Eq. 1a: ``A = X + sum_h V_h X P_h``. Returns ``(A, per-head (KX, QX, S, P))``."""
    A = X.copy()
    saved = []
    for h in heads:
        KX, QX = h.K @ X, h.Q @ X
        S = _t(KX) @ QX
        P = hardmax_columns(S, tol) if hard else softmax_columns(h.lam * S)
        A = A + (h.V @ X) @ P
        saved.append((KX, QX, S, P))
    return A, saved


def layer_forward(X: Any, layer: Layer, hard: bool = False,
                  tol: float = 1e-9) -> tuple[Any, dict[str, Any]]:
    """Eq. 1 on ``X: (d, n)`` or ``(B, d, n)``; returns ``(f(X), cache)`` for the backward."""
    if X.ndim not in (2, 3) or X.shape[-2] != layer.width:
        raise ValueError(f"X has shape {tuple(X.shape)}; expected (d, n) or (B, d, n) with "
                         f"d = {layer.width}")
    A, saved = attention_forward(X, layer.heads, hard, tol)
    H = layer.W1 @ A + layer.b1[:, None]
    R = H * (H > 0)
    Y = A + layer.W2 @ R + layer.b2[:, None]
    return Y, {"X": X, "A": A, "H": H, "R": R, "saved": saved, "layer": layer, "hard": hard}


def layer_backward(dY: Any, cache: dict[str, Any]) -> tuple[Any, Layer]:
    """Gradients of Eq. 1 given ``dY = dL/df(X)`` (same shape as X).

    Feed-forward (R = ReLU(H), H = W1 A + b1):
        dW2 = sum_b dY R^T,  db2 = sum_{b,k} dY,  dH = (W2^T dY) * [H > 0],
        dW1 = sum_b dH A^T,  db1 = sum_{b,k} dH,  dA = dY + W1^T dH.
    Each head (S = (KX)^T QX, Z = lam S, P = softmax over keys, out = V X P):
        dV = sum_b dA (X P)^T,  dP = (V X)^T dA,
        dZ[:, k] = P[:, k] * (dP[:, k] - sum_j P[j, k] dP[j, k]),
        dS = lam dZ,  dlam = sum dZ * S,
        dK = sum_b (QX dS^T) X^T,  dQ = sum_b (KX dS) X^T,
        dX = dA + sum_h [ V^T dA P^T + K^T QX dS^T + Q^T KX dS ].
    The hardmax is piecewise constant, so with ``hard=True`` ``dP`` does not propagate
    (``dS = 0``, ``dlam = 0``). Returns ``(dX, grads)`` with ``grads`` a :class:`Layer`.
    """
    X, A, H, R, layer = cache["X"], cache["A"], cache["H"], cache["R"], cache["layer"]
    batched = X.ndim == 3
    dW2 = _batch_sum(dY @ _t(R), batched)
    db2 = dY.sum(axis=(0, 2) if batched else -1)
    dH = (_t(layer.W2) @ dY) * (H > 0)
    dW1 = _batch_sum(dH @ _t(A), batched)
    db1 = dH.sum(axis=(0, 2) if batched else -1)
    dA = dY + _t(layer.W1) @ dH
    dX = dA.copy()
    head_grads = []
    for h, (KX, QX, S, P) in zip(layer.heads, cache["saved"]):
        dV = _batch_sum(dA @ _t(X @ P), batched)
        dX = dX + _t(h.V) @ dA @ _t(P)
        if cache["hard"]:
            dK, dQ, dlam = 0 * h.K, 0 * h.Q, 0.0
        else:
            dP = _t(h.V @ X) @ dA
            dZ = P * (dP - (P * dP).sum(axis=-2, keepdims=True))
            dS = h.lam * dZ
            dlam = (dZ * S).sum()
            dKX, dQX = QX @ _t(dS), KX @ dS
            dK = _batch_sum(dKX @ _t(X), batched)
            dQ = _batch_sum(dQX @ _t(X), batched)
            dX = dX + _t(h.K) @ dKX + _t(h.Q) @ dQX
        head_grads.append(AttentionHead(dK, dQ, dV, dlam))
    return dX, replace(layer, heads=tuple(head_grads), W1=dW1, b1=db1, W2=dW2, b2=db2)


def _sparse_head(X: Any, h: AttentionHead, n_global: int, hard: bool, tol: float) -> Any:
    """``V X P`` where query columns ``k >= n_global`` only see keys ``{0..n_global-1, k}``."""
    xp = xp_of(X)
    KX, QX, VX = h.K @ X, h.Q @ X, h.V @ X
    g = n_global
    S_glob = _t(KX) @ QX[..., :g]                      # (..., n, g): global queries, all keys
    P_glob = hardmax_columns(S_glob, tol) if hard else softmax_columns(h.lam * S_glob)
    out_glob = VX @ P_glob                             # (..., d, g)
    S_loc = _t(KX[..., :g]) @ QX[..., g:]              # (..., g, n-g): local queries, global keys
    S_self = (KX[..., g:] * QX[..., g:]).sum(axis=-2)  # (..., n-g): local query, its own key
    S_all = xp.concatenate([S_loc, S_self[..., None, :]], axis=-2)
    P_loc = hardmax_columns(S_all, tol) if hard else softmax_columns(h.lam * S_all)
    out_loc = VX[..., :g] @ P_loc[..., :g, :] + VX[..., g:] * P_loc[..., g:, :]
    return xp.concatenate([out_glob, out_loc], axis=-1)


def layer_forward_sparse(X: Any, layer: Layer, n_global: int, hard: bool = False,
                         tol: float = 1e-9) -> Any:
    """Eq. 1 with scratchpad-only global attention and scoped feed-forward units (no backward).

    Query columns ``k < n_global`` attend to all keys; columns ``k >= n_global`` attend to keys
    ``0..n_global-1`` and ``k``. Units of scope ``SCOPE_GLOBAL`` are evaluated only on columns
    ``< n_global``, ``SCOPE_LOCAL`` only on the others (they contribute 0 elsewhere).
    """
    xp = xp_of(X)
    if not 1 <= n_global < X.shape[-1]:
        raise ValueError(f"n_global = {n_global}; expected 1 <= n_global < n = {X.shape[-1]}")
    A = X.copy()
    for h in layer.heads:
        A += _sparse_head(X, h, n_global, hard, tol)
    scope = (xp.zeros(layer.hidden, dtype=int) if layer.scope is None
             else xp.asarray(layer.scope))
    Y = A + layer.b2[:, None]
    for sc, cols in ((SCOPE_ALL, slice(None)), (SCOPE_GLOBAL, slice(0, n_global)),
                     (SCOPE_LOCAL, slice(n_global, None))):
        units = xp.nonzero(scope == sc)[0]
        if units.size == 0:
            continue
        Ac = A[..., cols]
        H = layer.W1[units] @ Ac + layer.b1[units][:, None]
        Y[..., cols] += layer.W2[:, units] @ (H * (H > 0))
    return Y

"""Forward/backward pairs of the Transformer Program modules, batched over heads.

Every function takes already-sampled discrete choices (gates ``pi``, predicate matrices ``P``) so it
is deterministic given its inputs and can be gradchecked; :func:`sample` draws those choices
(Gumbel-softmax in training, argmax in the discrete mode). The components of
:mod:`tpcore.models.program` (``heads``, ``mlps``) call them; the fused kernels of
``tpcore.kernels.program_model`` stand in for the ones marked ``@kernel``. Shapes:

- categorical stream ``X: (m, B, N, d)``: ``m`` variables (slots), each a ``d``-wide one-hot (a
  relaxed one when training), stored variable-major so that reading variables is one matrix
  product ``pi @ X.reshape(m, -1)`` whose result is already head-major;
- numerical stream ``Xn: (p, B, N)``;
- per-head tensors are head-major: ``Q, K, V: (H, B, N, d)``, scores ``S: (H, B, N, N)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tpcore.backend import Array, matmul, xp_of
from tpcore.dispatch import kernel
from tpcore.nn.functional import relu_backward, relu_forward, softmax_backward
from tpcore.nn.hookpoints import NO_HOOKS, Hooks
from tpcore.nn.relax import argmax_onehot, gumbel_softmax_forward

Noise = Callable[[tuple[int, ...]], Array | None]
"""What the components draw their Gumbel noise with: ``noise(shape)`` returns fresh noise of that
shape from the forward's generator, or None (no noise: a plain softmax, or the discrete mode)."""
MASKED_LOGIT = -1e30
"""Logit of masked keys (padding; keys after the query under a causal mask)."""
LOG_EPS = 1e-20
"""``log(S + LOG_EPS)`` turns 0/1 scores into logits."""
BOS_EPS = 1e-10
"""``relu(1 - s / (s + BOS_EPS))`` is the default-to-BOS score added at key 0."""


def sample(logits: Array, noise: Array | None, tau: float | None) -> tuple[Array, tuple | None]:
    """A relaxed one-hot along the last axis: ``softmax((logits + g) / tau)`` when ``tau`` is
    given (training), else ``argmax_onehot(logits)`` (discrete mode, no cache)."""
    if tau is None:
        return argmax_onehot(logits), None
    return gumbel_softmax_forward(logits, noise, tau)


def sample_backward(dy: Array, cache: tuple | None) -> Array:
    """``dlogits = y (dy - sum(dy y)) / tau`` (zero in the discrete mode, which has no gradient)."""
    if cache is None:
        raise ValueError("the discrete mode has no gradient; run forward with a temperature")
    return softmax_backward(dy, cache)


@kernel("program_model")
def read_forward(x: Array, pi: Array, hard: bool = False) -> Array:
    """``G`` gated mixtures of the stream's variables: ``R[g] = sum_m pi[g, m] X[m]``.

    ``x: (m, B, N, d)``, ``pi: (G, m)`` -> ``R: (G, B, N, d)``. With one-hot ``pi`` this selects
    one variable per gate (the read matrix ``[pi_1 I; ...; pi_m I]`` of the paper); ``hard``
    says ``pi`` is one-hot (the discrete mode), and the chosen variables are then gathered,
    ``R[g] = X[argmax pi[g]]``: the same numbers without a product over every variable.
    Numerical streams ``(p, B, N)`` read the same way.
    """
    if hard:
        return x[pi.argmax(axis=1)]
    return matmul(pi, x.reshape(x.shape[0], -1)).reshape(pi.shape[0], *x.shape[1:])


def read_backward(dr: Array, x: Array, pi: Array) -> tuple[Array, Array]:
    """``dX = pi^T dR`` (shaped like ``x``) and ``dpi = dR X^T`` summed over ``B, N, d``:
    ``(G, m)``."""
    g, m = pi.shape
    dr2 = dr.reshape(g, x[0].size)  # (0, B N d) too, for a layer without heads
    return matmul(pi.T, dr2).reshape(x.shape), matmul(dr2, x.reshape(m, -1).T)


@kernel("program_model")
def gated_read_backward(dr: Array, x: Array, pi: Array, gates_cache: tuple | None
                        ) -> tuple[Array, Array]:
    """Back through a read and the Gumbel softmax that sampled its gates ``pi`` from their
    logits: ``dX = pi^T dR`` and ``dlogits = GumbelSoftmax'(dR X^T)``, ``(G, m)``
    (:func:`read_backward`, then :func:`sample_backward` with the sample's cache)."""
    dx, dpi = read_backward(dr, x, pi)
    return dx, sample_backward(dpi, gates_cache)


def closest_bias(n: int, dtype: Any = "float32", xp: Any = None) -> Array:
    """Relative-position bias ``b[i, j]`` (query ``i``, key ``j``) preferring the closest match.

    ``b = -2`` on the diagonal (the query itself comes last); for ``|i - j| = t >= 1``,
    ``b = -(t - 1) / (n - 2)``: 0 for neighbours falling linearly to -1 at the farthest key, equal
    on both sides so the earlier key wins ties under a first-index argmax.
    """
    xp = xp or np
    t = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]).astype(np.float64)
    b = -(t - 1) / max(n - 2, 1)
    np.fill_diagonal(b, -2.0)
    return xp.asarray(b, dtype=dtype)


def scores_forward(q: Array, k: Array, p: Array) -> tuple[Array, tuple]:
    """Predicate scores ``S = (Q P) K^T``: ``q, k: (H, B, N, d)``, ``p: (H, d, d)`` (rows relaxed
    one-hots: query value ``a`` matches key value ``b`` with weight ``P[a, b]``) ->
    ``S: (H, B, N, N)``, in ``{0, 1}`` once everything is discrete."""
    h, b, n, d = q.shape
    qp = matmul(q.reshape(h, b * n, d), p).reshape(h, b, n, d)
    return matmul(qp, k.swapaxes(-1, -2)), (q, k, p, qp)


def scores_backward(ds: Array, cache: tuple) -> tuple[Array, Array, Array]:
    """``dQP = dS K``, ``dK = dS^T QP``, ``dQ = dQP P^T``, ``dP = Q^T dQP`` (summed over B, N)."""
    q, k, p, qp = cache
    h, b, n, d = q.shape
    dqp = matmul(ds, k)
    dk = matmul(ds.swapaxes(-1, -2), qp)
    dqp2 = dqp.reshape(h, b * n, d)
    dq = matmul(dqp2, p.swapaxes(-1, -2)).reshape(q.shape)
    dp = matmul(q.reshape(h, b * n, d).swapaxes(-1, -2), dqp2)
    return dq, dk, dp


def masked_bias(bias: Array, mask: Array) -> Array:
    """``bias`` with ``-1e30`` added where ``mask`` is False: ``(1 or B, N, N)``."""
    return xp_of(bias).where(mask, bias, bias + MASKED_LOGIT)


@kernel("program_model")
def cat_attention_forward(
    q: Array, k: Array, v: Array, p: Array, mask: Array, bias: Array, noise: Array | None,
    tau: float | None, hooks: Hooks = NO_HOOKS, names: Sequence[str] = (),
) -> tuple[Array, tuple]:
    """Categorical attention of ``H`` heads: one relaxed hard attention per query.

    ``q, k, v: (H, B, N, d)``; ``p: (H, d, d)``; ``mask: (1 or B, N, N)`` bool, True where query
    ``i`` may attend key ``j``; ``bias: (1 or B, N, N)`` = :func:`closest_bias` through
    :func:`masked_bias`; ``noise: (H, B, N, N)``.

    1. ``S = (Q P) K^T``; ``s_i = sum_j mask_ij S_ij``;
    2. default to BOS: ``S'[:, 0] = S[:, 0] + relu(1 - s / (s + 1e-10))``;
    3. ``L = log(S' + 1e-20) + bias`` (so ``L = -1e30`` where masked);
    4. ``A = GumbelSoftmax(L / sqrt(d); tau)`` (``argmax_onehot(L)`` when ``tau`` is None),
       head ``h``'s ``A[h]: (B, N, N)`` through the hook point ``names[h]``;
    5. ``out = A V: (H, B, N, d)``.

    Discretely: the nearest matching key, the earlier on equal distance, the query itself only
    if nothing else matches, key 0 if nothing matches.
    """
    xp = xp_of(q)
    s_full, s_cache = scores_forward(q, k, p)
    maskf = mask.astype(q.dtype)
    s = matmul(s_full * maskf, xp.ones((s_full.shape[-1], 1), dtype=q.dtype))[..., 0]
    u = 1.0 - s / (s + BOS_EPS)
    dflt, dflt_mask = relu_forward(u)
    s_prime = s_full
    s_prime[..., 0] += dflt
    logits = s_prime + LOG_EPS
    xp.log(logits, out=logits)
    logits += bias
    scale = 1.0 / math.sqrt(q.shape[-1])
    logits *= scale
    a, a_cache = sample(logits, noise, tau)
    a = hooks.stack(names, a)
    return matmul(a, v), (a, a_cache, v, s_cache, maskf, s, dflt_mask, s_prime, scale, hooks, names)


@kernel("program_model")
def cat_attention_backward(dout: Array, cache: tuple) -> tuple[Array, Array, Array, Array]:
    """Gradients ``(dq, dk, dv, dp)``, reversing the steps of :func:`cat_attention_forward`:
    ``dV = A^T dout``; ``dA = dout V^T``; ``dL = GumbelSoftmax'(dA) / sqrt(d)`` (0 where masked,
    as ``A`` is; an edited ``A`` enters ``dV`` only); ``dS' = dL / (S' + 1e-20)``;
    ``dS = dS' + mask * (dS'[:, 0] * relu'(u) * -1e-10 / (s + 1e-10)^2)`` (the BOS default depends
    on every unmasked score of the row); then the score backward."""
    a, a_cache, v, s_cache, maskf, s, dflt_mask, s_prime, scale, hooks, names = cache
    dv = matmul(a.swapaxes(-1, -2), dout)
    da = hooks.grad_stack(names, matmul(dout, v.swapaxes(-1, -2)))
    ds_prime = sample_backward(da, a_cache)
    ds_prime *= scale
    ds_prime /= s_prime + LOG_EPS
    du = relu_backward(ds_prime[..., 0], dflt_mask)
    dsum = du * (-BOS_EPS / (s + BOS_EPS) ** 2)
    ds_prime += dsum[..., None] * maskf
    dq, dk, dp = scores_backward(ds_prime, s_cache)
    return dq, dk, dv, dp


@kernel("program_model")
def num_attention_forward(
    q: Array, k: Array, v: Array, p: Array, mask: Array, hooks: Hooks = NO_HOOKS,
    names: Sequence[str] = (),
) -> tuple[Array, tuple]:
    """Numerical attention of ``H`` heads: ``out_i = sum_j Sm_ij v_j`` with the pattern
    ``Sm = mask * S``, ``S = (Q P) K^T`` (a sum, not an average; no BOS default, no softmax);
    head ``h``'s ``Sm[h]: (B, N, N)`` passes the hook point ``names[h]``.

    ``q, k: (H, B, N, d)``, ``v: (H, B, N)`` numerical values, ``p: (H, d, d)`` -> ``(H, B, N)``.
    """
    s_full, s_cache = scores_forward(q, k, p)
    sm = hooks.stack(names, s_full * mask.astype(q.dtype))
    return matmul(sm, v[..., None])[..., 0], (sm, v, s_cache, mask, hooks, names)


@kernel("program_model")
def num_attention_backward(dout: Array, cache: tuple) -> tuple[Array, Array, Array, Array]:
    """``dv_j = sum_i Sm_ij dout_i``; ``dS_ij = mask_ij dSm_ij`` with ``dSm_ij = dout_i v_j``;
    then the score backward. Returns ``(dq, dk, dv, dp)``."""
    sm, v, s_cache, mask, hooks, names = cache
    dv = matmul(sm.swapaxes(-1, -2), dout[..., None])[..., 0]
    ds = hooks.grad_stack(names, dout[..., :, None] * v[..., None, :]) * mask.astype(dout.dtype)
    dq, dk, dp = scores_backward(ds, s_cache)
    return dq, dk, dv, dp


@kernel("program_model")
def mlp_forward(
    x: Array, w1: Array, b1: Array, w2: Array, b2: Array, noise: Array | None, tau: float | None
) -> tuple[Array, tuple]:
    """``G`` MLPs side by side, each with a relaxed categorical output.

    ``x: (G, T, I)`` (``T`` tokens, ``I`` concatenated inputs), ``w1: (G, I, D)``,
    ``b1: (G, 1, D)``, ``w2: (G, D, k)``, ``b2: (G, 1, k)``: ``h = relu(x W1 + b1)``,
    ``z = h W2 + b2``,
    ``y = GumbelSoftmax(log_softmax(z); tau)``, computed as ``GumbelSoftmax(z; tau)`` since a
    softmax ignores the shift ``logsumexp(z)`` (argmax one-hot of ``z`` in the discrete mode).
    """
    hpre = matmul(x, w1) + b1
    h, hmask = relu_forward(hpre)
    z = matmul(h, w2) + b2
    y, y_cache = sample(z, noise, tau)
    return y, (x, w1, w2, h, hmask, y_cache)


@kernel("program_model")
def mlp_backward(dy: Array, cache: tuple) -> tuple[Array, Array, Array, Array, Array]:
    """``dz = GumbelSoftmax'(dy)``; ``dW2 = h^T dz``; ``dh = dz W2^T``; through the ReLU;
    ``dW1 = x^T dh``; ``dx = dh W1^T``; bias gradients sum over tokens. Returns
    ``(dx, dw1, db1, dw2, db2)``."""
    x, w1, w2, h, hmask, y_cache = cache
    dz = sample_backward(dy, y_cache)
    ones = xp_of(dz).ones((1, dz.shape[1]), dtype=dz.dtype)
    dw2 = matmul(h.swapaxes(-1, -2), dz)
    db2 = matmul(ones, dz)
    dh = relu_backward(matmul(dz, w2.swapaxes(-1, -2)), hmask)
    dw1 = matmul(x.swapaxes(-1, -2), dh)
    db1 = matmul(ones, dh)
    return matmul(dh, w1.swapaxes(-1, -2)), dw1, db1, dw2, db2

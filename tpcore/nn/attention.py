"""Scaled dot-product attention and multi-head attention with causal and padding masks.

Shapes: ``q, k, v: (B, H, N, Dh)``; ``x: (B, N, D)`` with ``D = H * Dh``; a mask is boolean,
broadcastable to ``(B, H, Nq, Nk)``, ``True`` where a query may attend to a key.
"""

from __future__ import annotations

import math
from typing import Any

from tpcore.backend import Array, matmul, xp_of
from tpcore.dispatch import kernel
from tpcore.nn.functional import linear_backward, linear_forward, softmax, softmax_backward
from tpcore.nn.hookpoints import NO_HOOKS, Hooks

MASKED_SCORE = -1e9
"""The score of a masked key before the softmax (finite, so a fully masked row gives a uniform
row, not NaN)."""


def attention_mask(
    n: int, causal: bool = False, key_padding: Array | None = None, xp: Any = None
) -> Array | None:
    """Boolean mask ``(B or 1, 1, N, N)``: causal keeps ``j <= i``; ``key_padding: (B, N)`` is
    ``True`` at padding keys, which nobody attends to. ``None`` when nothing is masked."""
    if not causal and key_padding is None:
        return None
    xp = xp or xp_of(key_padding)
    mask = xp.ones((1, 1, n, n), dtype=bool)
    if causal:
        mask = mask & xp.tril(xp.ones((n, n), dtype=bool))[None, None]
    if key_padding is not None:
        mask = mask & ~key_padding[:, None, None, :]
    return mask


@kernel(None, gpu=True)
def masked_softmax(scores: Array, mask: Array | None, scale: float,
                   masked_score: float = MASKED_SCORE) -> Array:
    """``softmax(where(mask, scale * S, masked_score))`` along the last axis: ``scores: (B, H,
    Nq, Nk)``, ``mask`` broadcastable to it (None: nothing masked)."""
    z = scores * scale
    if mask is not None:
        z = xp_of(z).where(mask, z, z.dtype.type(masked_score))
    return softmax(z, axis=-1)


def attention_forward(
    q: Array, k: Array, v: Array, mask: Array | None = None, hooks: Hooks = NO_HOOKS
) -> tuple[Array, tuple]:
    """``P = softmax(S + M)`` with scores ``S = q k^T / sqrt(Dh)`` and ``M = -1e9`` where
    masked; ``out = P v``. Hook points: ``hook_attn_scores`` (``S`` before the mask) and
    ``hook_pattern`` (``P``), both ``(B, H, Nq, Nk)``. The scale is applied with the mask and
    the softmax (:func:`masked_softmax`) unless ``S`` is hooked.

    Returns ``out: (B, H, N, Dh)`` and a cache whose first entry is the pattern ``P``.
    """
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = matmul(q, k.swapaxes(-1, -2))
    if hooks.wants("hook_attn_scores"):
        p = masked_softmax(hooks("hook_attn_scores", scores * scale), mask, 1.0)
    else:
        p = masked_softmax(scores, mask, scale)
    pattern = hooks("hook_pattern", p)
    return matmul(pattern, v), (pattern, p, q, k, v, scale, hooks)


def attention_backward(dout: Array, cache: tuple) -> tuple[Array, Array, Array]:
    """``dv = P^T dout``; ``dP = dout v^T``; ``dS = P * (dP - rowsum(dP * P))`` (masked entries
    have ``P = 0`` so get no gradient); ``dq = dS k * s``; ``dk = dS^T q * s``. An edited pattern
    ``P'`` takes ``P``'s place in ``dv``, the softmax's own ``P`` stays in ``dS``. Unless a hook
    edited the scores, the scale ``s`` is the softmax backward's temperature ``1 / s``, so that
    it costs no pass of its own."""
    pattern, p, q, k, v, scale, hooks = cache
    dv = matmul(pattern.swapaxes(-1, -2), dout)
    dp = hooks.grad("hook_pattern", matmul(dout, v.swapaxes(-1, -2)))
    if hooks.edited("hook_attn_scores"):
        ds = hooks.grad("hook_attn_scores", softmax_backward(dp, (p, 1.0, -1))) * scale
    else:
        ds = softmax_backward(dp, (p, 1.0 / scale, -1))
    return matmul(ds, k), matmul(ds.swapaxes(-1, -2), q), dv


QKV_HOOKS = ("hook_q", "hook_k", "hook_v")
"""The hook points of the heads' queries, keys and values, each ``(B, N, H, Dh)``."""


def _split_heads(qkv: Array, h: int, hooks: Hooks) -> Array:
    """The ``[q k v]`` product ``(B, N, 3D)`` as one C-order ``(3, B, H, N, Dh)`` array, through
    the hook points :data:`QKV_HOOKS`: the heads move to their layout once, so the products of
    the attention read them in place (a head view of ``(B, N, 3D)`` would be copied at each)."""
    b, n, d3 = qkv.shape
    parts = hooks.stack(QKV_HOOKS, qkv.reshape(b, n, 3, h, d3 // (3 * h)).transpose(2, 0, 1, 3, 4))
    return xp_of(qkv).ascontiguousarray(parts.transpose(0, 1, 3, 2, 4))


def _merge_heads(dq_dk_dv: tuple[Array, Array, Array], hooks: Hooks) -> Array:
    """The gradient of :func:`_split_heads`: ``dq, dk, dv: (B, H, N, Dh)`` written into one
    ``(B, N, 3, H, Dh)`` array, through the hook points' gradients, as ``(B, N, 3D)``."""
    b, h, n, dh = dq_dk_dv[0].shape
    dqkv = xp_of(dq_dk_dv[0]).empty((b, n, 3, h, dh), dtype=dq_dk_dv[0].dtype)
    for i, g in enumerate(dq_dk_dv):
        dqkv[:, :, i] = g.transpose(0, 2, 1, 3)
    parts = hooks.grad_stack(QKV_HOOKS, dqkv.transpose(2, 0, 1, 3, 4))
    return parts.transpose(1, 2, 0, 3, 4).reshape(b, n, 3 * h * dh)


def _split(x: Array, h: int, hook: Any, name: str) -> Array:
    """``(B, N, D) -> (B, H, N, Dh)``, C-order, through the hook point ``name`` (or its
    gradient: ``hook`` is ``hooks`` or ``hooks.grad``), which sees ``(B, N, H, Dh)``."""
    b, n, d = x.shape
    return xp_of(x).ascontiguousarray(hook(name, x.reshape(b, n, h, d // h)).transpose(0, 2, 1, 3))


def _merge(x: Array, hook: Any, name: str) -> Array:
    """``(B, H, N, Dh) -> (B, N, D)``, the inverse of :func:`_split`."""
    b, h, n, dh = x.shape
    return hook(name, x.transpose(0, 2, 1, 3)).reshape(b, n, h * dh)


@kernel("nn")
def mha_forward(
    x: Array, params: dict[str, Array], n_heads: int, mask: Array | None = None,
    hooks: Hooks = NO_HOOKS,
) -> tuple[Array, tuple]:
    """Multi-head self-attention ``y = concat_h(attn(x Wq_h, x Wk_h, x Wv_h)) Wo + bo``.

    ``params``: ``wq, wk, wv: (D, D)``, ``wo: (D, D)`` and optional biases ``bq, bk, bv, bo``.
    ``x: (B, N, D)`` -> ``y: (B, N, D)``; ``cache[0]`` is the pattern ``(B, H, N, N)``.
    The three projections run as one product with ``[Wq Wk Wv]: (D, 3D)``. Hook points:
    ``hook_q``, ``hook_k``, ``hook_v`` and ``hook_z`` (the heads' outputs before ``Wo``), all
    ``(B, N, H, Dh)``, ``hook_result`` (what each head writes, ``r_h = z_h Wo_h``, ``(B, N, H,
    D)``; ``y = sum_h r_h + bo``), computed only where it is hooked or recorded, and those of
    :func:`attention_forward`.
    """
    xp = xp_of(x)
    w = xp.concatenate([params[f"w{c}"] for c in "qkv"], axis=1)
    b = xp.concatenate([params[f"b{c}"] for c in "qkv"]) if params.get("bq") is not None else None
    qkv, qkv_cache = linear_forward(x, w, b)
    q, k, v = _split_heads(qkv, n_heads, hooks)
    heads, att_cache = attention_forward(q, k, v, mask, hooks)
    z = _merge(heads, hooks, "hook_z")
    y, out_cache = linear_forward(z, params["wo"], params.get("bo"))
    if hooks.wants("hook_result"):
        y, out_cache = _result_forward(z, params["wo"], params.get("bo"), n_heads, hooks,
                                       (y, out_cache))
    return y, (att_cache[0], qkv_cache, att_cache, out_cache, n_heads, hooks)


def _result_forward(z: Array, wo: Array, bo: Array | None, n_heads: int, hooks: Hooks,
                    unedited: tuple[Array, tuple]) -> tuple[Array, tuple]:
    """The hook point ``hook_result``: ``r_h = z_h Wo_h`` with ``z_h: (B, N, Dh)`` and ``Wo_h:
    (Dh, D)`` head ``h``'s rows of ``Wo``. A hook that edits it makes ``y = sum_h r_h + bo``;
    otherwise ``unedited`` (``y = z Wo + bo`` and its cache) stands, bit for bit."""
    xp = xp_of(z)
    b, n, d = z.shape
    zh, woh = z.reshape(b, n, n_heads, d // n_heads), wo.reshape(n_heads, d // n_heads, -1)
    result = xp.einsum("bnhe,hed->bnhd", zh, woh)
    edited = hooks("hook_result", result)
    if edited is result:
        return unedited
    y = edited.sum(axis=2)
    return (y if bo is None else y + bo), ("result", zh, woh, bo is not None)


def _result_backward(dy: Array, cache: tuple, hooks: Any) -> tuple[Array, Array, Array | None]:
    """``dz, dWo, dbo`` of :func:`_result_forward`: ``dr_h = dy`` for every head (then
    through the hook point), ``dz_h = dr_h Wo_h^T``, ``dWo_h = sum z_h^T dr_h``."""
    xp = xp_of(dy)
    _, zh, woh, has_bo = cache
    b, n, h, e = zh.shape
    dres = hooks.grad("hook_result", xp.broadcast_to(dy[:, :, None, :], (b, n, h, dy.shape[-1])))
    dwo = xp.einsum("bnhe,bnhd->hed", zh, dres).reshape(h * e, -1)
    dz = xp.einsum("bnhd,hed->bnhe", dres, woh).reshape(b, n, h * e)
    return dz, dwo, (dy.sum(axis=(0, 1)) if has_bo else None)


@kernel("nn")
def mha_backward(dy: Array, cache: tuple) -> tuple[Array, dict[str, Array]]:
    """Backward of :func:`mha_forward`: returns ``dx`` and the gradients keyed like ``params``
    (``dx`` sums the three paths through the query, key and value projections, in one product)."""
    _, qkv_cache, att_cache, out_cache, n_heads, hooks = cache
    xp = xp_of(dy)
    if isinstance(out_cache[0], str):  # the cache of _result_forward
        dheads, dwo, dbo = _result_backward(dy, out_cache, hooks)
    else:
        dheads, dwo, dbo = linear_backward(dy, out_cache)
    dq_dk_dv = attention_backward(_split(dheads, n_heads, hooks.grad, "hook_z"), att_cache)
    dx, dw, db = linear_backward(_merge_heads(dq_dk_dv, hooks), qkv_cache)
    grads = dict(zip(("wq", "wk", "wv"), xp.split(dw, 3, axis=1)), wo=dwo)
    if db is not None:
        grads |= dict(zip(("bq", "bk", "bv"), xp.split(db, 3)))
    if dbo is not None:
        grads["bo"] = dbo
    return dx, grads

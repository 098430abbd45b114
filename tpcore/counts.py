"""Token counts and the five counting experts of "Modular Counts, Smarter Programs" as plain
functions of the tokens, shared by the model (:mod:`tpcore.models.counting`) and the program IR
(:mod:`tpcore.programs`).

Notation: ``x: (B, N)`` token ids in ``0 .. V-1``, ``pad: (B, N)`` True at padding (padding is
never counted and its features are 0). With the sequence histogram ``h[v] = #{i : x_i = v}`` and
``n = sum_v h[v]``, the experts at position ``t`` are ``E1 = n``, ``E2 = h[x_t]``,
``E3 = [h[x_t] = max_v h[v]]``, ``E4 = [h[x_t] = 1]`` and ``E5 = h[x_t] / n``; a gate
``argmax(W h + b)`` picks one per sequence.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from tpcore.backend import Array, xp_of

EXPERTS = ("total_count", "token_count", "most_frequent", "seen_once", "relative_frequency")
"""Names of the five experts in gate order (``E1 .. E5``)."""


def token_counts(tokens: Array, vocab_size: int, pad: Array | None, dtype: Any) -> Array:
    """``onehot(x)`` with padding rows zeroed: ``(B, N, V)``."""
    xp = xp_of(tokens)
    oh = (tokens[..., None] == xp.arange(vocab_size)).astype(dtype)
    if pad is not None:
        oh *= (~pad)[..., None]
    return oh


def prefix_counts(tokens: Array, vocab_size: int, pad: Array | None = None,
                  dtype: Any = "float32") -> Array:
    """``P[b, t, v] = #{i < t : x[b, i] = v, i not padding}``, 0 at padding: ``(B, N, V)``."""
    oh = token_counts(tokens, vocab_size, pad, dtype)
    p = xp_of(tokens).cumsum(oh, axis=1) - oh
    if pad is not None:
        p *= (~pad)[..., None]
    return p


def running_counts(tokens: Array, vocab_size: int, pad: Array | None = None,
                   dtype: Any = "float32") -> Array:
    """``r[b, t] = #{i <= t : x[b, i] = x[b, t], i not padding}``, 0 at padding: ``(B, N)``.

    The running count of each position's own token, itself included: the PrefixSumCounts
    feature of the counting paper's released code (its text defines the per-token counts of
    :func:`prefix_counts` instead)."""
    xp = xp_of(tokens)
    c = xp.cumsum(token_counts(tokens, vocab_size, pad, dtype), axis=1)
    r = xp.take_along_axis(c, tokens[..., None], axis=2)[..., 0]
    return r if pad is None else r * ~pad


def expert_features(tokens: Array, vocab_size: int, pad: Array | None = None,
                    dtype: Any = "float32") -> tuple[Array, Array]:
    """The histogram ``h: (B, V)`` and the five experts ``E: (5, B, N)`` (0 at padding)."""
    xp = xp_of(tokens)
    oh = token_counts(tokens, vocab_size, pad, dtype)
    h = oh.sum(axis=1)
    n = h.sum(axis=1, keepdims=True)
    hx = xp.take_along_axis(h, tokens, axis=1)
    e = xp.stack([xp.broadcast_to(n, hx.shape), hx,
                  (hx == h.max(axis=1, keepdims=True)).astype(dtype),
                  (hx == 1).astype(dtype), hx / xp.maximum(n, 1)])
    if pad is not None:
        e *= ~pad
    return h, e.astype(dtype)


GATE_MARGIN = 1e-5
"""Relative margin a fixed gate choice must win by (see :func:`fixed_expert`)."""


def fixed_expert(w: np.ndarray, b: np.ndarray, framing: dict[int, int], content: list[int],
                 length: int) -> int | None:
    """The expert the discrete gate ``argmax(W h + b)`` (``w: (5, V)``, ``b: (5,)``) picks for
    *every* input with ``length`` content tokens (ids ``content``) and the fixed ``framing``
    counts (e.g. ``{BOS: 1}``), or None when the choice depends on the input.

    Expert ``i`` wins for all histograms ``h = f + c`` (``c >= 0``, ``sum c = L``) iff for each
    ``j != i``: ``low_ij = (w_i - w_j) f + b_i - b_j + L min_{k in content} (w_ik - w_jk) > 0``
    (a linear function on the scaled simplex is smallest at a vertex ``L e_k``, and every vertex
    is reachable: ``L`` copies of token ``k``). The comparison keeps a margin: ``low_ij`` must
    exceed ``GATE_MARGIN * (|b_i| + |b_j| + (sum f + L) max_k (|w_ik| + |w_jk|))``, far more than
    the rounding of the model's float32 logits or of a float64 program's, so that a fixed choice
    holds for both (exact ties are never fixed; they go to the first expert at run time).
    """
    f = np.zeros(w.shape[1])
    for tok, c in framing.items():
        f[tok] = c
    total = f.sum() + length
    for i in range(len(b)):
        dw, db = w[i] - w, b[i] - b
        low = dw @ f + db + (length * dw[:, content].min(axis=1) if content else 0.0)
        scale = np.abs(b[i]) + np.abs(b) + total * (np.abs(w[i]) + np.abs(w)).max(axis=1)
        if all(low[j] > GATE_MARGIN * scale[j] for j in range(len(b)) if j != i):
            return i
    return None


def length_rule(w: np.ndarray, b: np.ndarray, framing: dict[int, int], content: list[int],
                lengths: Iterable[int]) -> dict[int, str | None]:
    """Content length ``L`` -> the name of the expert :func:`fixed_expert` finds for every input
    of that length (None: it depends on the input), for each ``L`` in ``lengths``."""
    rule = {}
    for length in lengths:
        c = fixed_expert(w, b, framing, content, length)
        rule[length] = None if c is None else EXPERTS[c]
    return rule


def only_expert(rule: dict[int, str | None]) -> str | None:
    """The expert a :func:`length_rule` fixes at every length, or None."""
    choices = set(rule.values())
    return choices.pop() if len(choices) == 1 else None

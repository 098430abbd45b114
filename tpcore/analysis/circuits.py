"""QK and OV circuits of a transformer's first-layer heads, in the notation of "A Mathematical
Framework for Transformer Circuits" (the sorting models are one-layer, one-head examples).

With token embedding ``E: (V, D)``, positions ``P: (N, D)``, head ``h`` of layer 0 with its
slices ``W_Q, W_K, W_V: (D, d_head)``, ``W_O: (d_head, D)`` and biases (``model.W_Q[0, h]``,
...), the unembedding ``U: (D, C)``, ``b_U``, and ``x(t, p)`` what the layer reads for token
``t`` at position ``p`` (``E[t] + P[p]``, through the block's LayerNorm in a pre-LN model):

- QK circuit at query position ``p`` and key position ``p'``:
  ``QK[q, k] = (x(q, p) W_Q + b_Q) . (x(k, p') W_K + b_K)`` (unscaled; the attention logits
  divide it by ``sqrt(d_head)``), a ``(V, V)`` query-token x key-token table: exactly the
  head's scores for those tokens there;
- OV circuit (the direct path): the logits a source token writes when it is the only token
  the head attends to, ``OV[t] = ((x(t, 0) W_V + b_V) W_O + b_O) U + b_U`` with ``t`` taken
  at position 0 (``bos``) or without a position; a ``(V, C)`` table, exactly the model's logits
  for a one-layer, one-head, attention-only model without LayerNorm (and the direct path of
  that head otherwise, the later layers and the final LayerNorm left out).

Functions return arrays of the parameters' module; :func:`format_table` prints host tables.
"""

from __future__ import annotations

import math
from typing import Any

from tpcore.backend import Array, asarray, to_host, xp_of
from tpcore.errors import TpcoreError
from tpcore.nn.functional import layer_norm_forward

Head = tuple[int, int]
"""``(layer, head)``; the circuits are those of layer 0."""


def _check(model: Any, head: Head = (0, 0)) -> int:
    """The head index of ``head``, a head of the model's first layer."""
    c = model.config
    layer, h = head
    if layer != 0:
        raise TpcoreError(f"head {head}: the circuits read the embeddings, which only layer 0's "
                          "heads do; expected (0, h)")
    if not 0 <= h < c.n_heads:
        raise TpcoreError(f"head {head}: the model has heads 0..{c.n_heads - 1} per layer")
    return h


def _read(model: Any, tokens_at: Array) -> Array:
    """What layer 0's attention reads for the stream values ``tokens_at (..., D)``: through
    its LayerNorm in a pre-LN model."""
    block = model.blocks[0]
    if block.ln1 is not None and not block.post:
        return layer_norm_forward(tokens_at, block.ln1.gamma.data, block.ln1.beta.data)[0]
    return tokens_at


def qk_matrix(model: Any, query_pos: int, key_pos: int = 1, bos: int | None = None,
              head: Head = (0, 0)) -> Array:
    """``(V, V)`` QK scores of head ``head`` (of layer 0) of every query token at
    ``query_pos`` against every key token at ``key_pos``; with ``bos`` given, that key token is
    taken at position 0 instead."""
    h = _check(model, head)
    emb, pos = model.tok_emb.data, model.W_pos
    for name, p in (("query_pos", query_pos), ("key_pos", key_pos)):
        if not 0 <= p < len(pos):
            raise TpcoreError(f"{name} {p} outside the model's positions 0..{len(pos) - 1}")
    keys = emb + pos[key_pos]
    if bos is not None:
        keys[bos] = emb[bos] + pos[0]
    q = _read(model, emb + pos[query_pos]) @ model.W_Q[0, h] + model.b_Q[0, h]
    k = _read(model, keys) @ model.W_K[0, h] + model.b_K[0, h]
    return q @ k.T


def standardise_rows(m: Array, clip: float = -99.0) -> Array:
    """Shift each row so that its maximum is 0, then clip from below at ``clip`` (the post's
    presentation of QK tables)."""
    xp = xp_of(m)
    return xp.maximum(m - m.max(axis=1, keepdims=True), clip)


def ov_circuit(model: Any, bos: int | None = None, head: Head = (0, 0)) -> Array:
    """``(V, C)`` logits written through the direct path by each source token when head
    ``head`` (of layer 0) gives it all the attention (``bos``: the BOS token id, embedded with
    position 0; the others without a position)."""
    h = _check(model, head)
    emb = model.tok_emb.data.copy()
    if bos is not None:
        emb[bos] = emb[bos] + model.W_pos[0]
    values = _read(model, emb) @ model.W_V[0, h] + model.b_V[0, h]
    return (values @ model.W_O[0, h] + model.b_O[0]) @ model.W_U + model.b_U


def bos_attention(model: Any, query_positions: list[int], value_keys: list[int], bos: int,
                  query_tokens: list[int], key_pos: int = 1) -> dict[str, Array]:
    """Attention paid to ``BOS`` relative to value tokens, per query position.

    For each query position, averaging over ``query_tokens``: ``bos_score`` (QK against BOS at
    position 0), ``value_score`` (mean QK over ``value_keys`` at ``key_pos``) and
    ``ratio = exp((bos_score - value_score) / sqrt(d_head))``, the attention on BOS over the
    attention on an average value token. Arrays of length ``len(query_positions)``."""
    xp = xp_of(model.tok_emb.data)
    d_head = model.config.d_head
    bos_s, val_s = [], []
    for p in query_positions:
        qk = qk_matrix(model, p, key_pos, bos)[query_tokens]
        bos_s.append(float(qk[:, bos].mean()))
        val_s.append(float(qk[:, value_keys].mean()))
    bos_a, val_a = xp.asarray(bos_s), xp.asarray(val_s)
    return dict(bos_score=bos_a, value_score=val_a,
                ratio=xp.exp((bos_a - val_a) / math.sqrt(d_head)))


def attention_pattern(model: Any, tokens: Array, pad: Array | None = None,
                      head: Head = (0, 0)) -> Array:
    """``(N, N)`` attention pattern of head ``head`` (of layer 0) on the single sequence
    ``tokens: (N,)``."""
    h = _check(model, head)
    tokens = asarray(tokens)[None]
    model.forward(tokens, pad=None if pad is None else asarray(pad)[None])
    return model.cache["attn"][0][0, h]


def upper_triangularity(qk: Array) -> float:
    """Fraction of query tokens ``q`` whose largest QK score among keys ``k != q`` falls on a key
    ``k > q`` ("attend only to greater tokens", the min{>previous} filter); rows ``q`` with no
    greater key are skipped. ``qk: (V, V)`` over value tokens."""
    m = to_host(qk).copy()
    v = len(m)
    hits = 0
    for q in range(v - 1):
        row = m[q].copy()
        row[q] = -math.inf
        hits += int(row.argmax() > q)
    return hits / max(v - 1, 1)


def format_table(m: Array, row_labels: list[str], col_labels: list[str], prec: int = 1,
                 corner: str = "") -> str:
    """A Markdown table of the host copy of ``m: (R, C)``."""
    m = to_host(m)
    if m.shape != (len(row_labels), len(col_labels)):
        raise TpcoreError(f"table of shape {m.shape} does not match {len(row_labels)} row and "
                          f"{len(col_labels)} column labels")
    lines = ["| " + " | ".join([corner, *col_labels]) + " |",
             "|" + "---|" * (len(col_labels) + 1)]
    for label, row in zip(row_labels, m):
        lines.append("| " + " | ".join([label, *(f"{x:.{prec}f}" for x in row)]) + " |")
    return "\n".join(lines)

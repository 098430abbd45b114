"""QK and OV circuits of one-layer, attention-only, LayerNorm-free transformers (the sorting
models), in the notation of "A Mathematical Framework for Transformer Circuits".

With token embedding ``E: (V, D)``, positions ``P: (N, D)``, the head's ``W_Q, W_K, W_V, W_O``
(``(D, D)`` for one head, biases ``b_*``) and the unembedding ``U: (D, C)``, ``b_U``:

- QK circuit at query position ``p`` and key position ``p'``:
  ``QK[q, k] = ((E[q] + P[p]) W_Q + b_Q) . ((E[k] + P[p']) W_K + b_K)`` (unscaled; the attention
  logits divide it by ``sqrt(d_head)``), a ``(V, V)`` query-token x key-token table;
- OV circuit: the logits a source token writes when it is the only token attended to,
  ``OV[t] = ((E[t] W_V + b_V) W_O + b_O) U + b_U``, a ``(V, C)`` table (``BOS`` gets its position
  0 embedding added, as it only ever sits there).

Functions return arrays of the parameters' module; :func:`format_table` prints host tables.
"""

from __future__ import annotations

import math
from typing import Any

from tpcore.backend import Array, asarray, to_host, xp_of
from tpcore.errors import TpcoreError


def _check(model: Any) -> Any:
    c = model.config
    if c.n_layers != 1 or c.n_heads != 1 or not c.attn_only or c.layer_norm != "none":
        raise TpcoreError("circuit analysis needs a one-layer, one-head, attention-only model "
                          f"without LayerNorm; got n_layers={c.n_layers}, n_heads={c.n_heads}, "
                          f"attn_only={c.attn_only}, layer_norm={c.layer_norm!r}")
    if c.positions != "learned":
        raise TpcoreError(f"circuit analysis needs learned positions, got {c.positions!r}")
    return model.blocks[0].attn


def _project(x: Array, w: Any, b: Any) -> Array:
    return x @ w.data + (0 if b is None else b.data)


def qk_matrix(model: Any, query_pos: int, key_pos: int = 1, bos: int | None = None) -> Array:
    """``(V, V)`` QK scores of every query token at ``query_pos`` against every key token at
    ``key_pos``; with ``bos`` given, that key token is taken at position 0 instead."""
    attn = _check(model)
    emb, pos = model.tok_emb.data, model.pos_emb.data
    for name, p in (("query_pos", query_pos), ("key_pos", key_pos)):
        if not 0 <= p < len(pos):
            raise TpcoreError(f"{name} {p} outside the model's positions 0..{len(pos) - 1}")
    keys = emb + pos[key_pos]
    if bos is not None:
        keys[bos] = emb[bos] + pos[0]
    q = _project(emb + pos[query_pos], attn.wq, attn.bq)
    k = _project(keys, attn.wk, attn.bk)
    return q @ k.T


def standardise_rows(m: Array, clip: float = -99.0) -> Array:
    """Shift each row so that its maximum is 0, then clip from below at ``clip`` (the post's
    presentation of QK tables)."""
    xp = xp_of(m)
    return xp.maximum(m - m.max(axis=1, keepdims=True), clip)


def ov_circuit(model: Any, bos: int | None = None) -> Array:
    """``(V, C)`` logits written by each source token when it takes all the attention (``bos``:
    the BOS token id, embedded with position 0)."""
    attn = _check(model)
    emb = model.tok_emb.data.copy()
    if bos is not None:
        emb[bos] = emb[bos] + model.pos_emb.data[0]
    out = _project(_project(emb, attn.wv, attn.bv), attn.wo, attn.bo)
    return _project(out, model.unembed.w, model.unembed.b)


def bos_attention(model: Any, query_positions: list[int], value_keys: list[int], bos: int,
                  query_tokens: list[int], key_pos: int = 1) -> dict[str, Array]:
    """Attention paid to ``BOS`` relative to value tokens, per query position.

    For each query position, averaging over ``query_tokens``: ``bos_score`` (QK against BOS at
    position 0), ``value_score`` (mean QK over ``value_keys`` at ``key_pos``) and
    ``ratio = exp((bos_score - value_score) / sqrt(d_head))``, the attention on BOS over the
    attention on an average value token. Arrays of length ``len(query_positions)``."""
    xp = xp_of(model.tok_emb.data)
    d_head = model.config.d_model // model.config.n_heads
    bos_s, val_s = [], []
    for p in query_positions:
        qk = qk_matrix(model, p, key_pos, bos)[query_tokens]
        bos_s.append(float(qk[:, bos].mean()))
        val_s.append(float(qk[:, value_keys].mean()))
    bos_a, val_a = xp.asarray(bos_s), xp.asarray(val_s)
    return dict(bos_score=bos_a, value_score=val_a,
                ratio=xp.exp((bos_a - val_a) / math.sqrt(d_head)))


def attention_pattern(model: Any, tokens: Array, pad: Array | None = None) -> Array:
    """``(N, N)`` attention pattern of the single sequence ``tokens: (N,)``."""
    _check(model)
    tokens = asarray(tokens)[None]
    model.forward(tokens, pad=None if pad is None else asarray(pad)[None])
    return model.cache["attn"][0][0, 0]


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

"""The standard transformer, with every backward written out.

``tokens: (B, N)`` -> embeddings (token + position) -> ``n_layers`` blocks of multi-head attention
and MLP -> unembedding. Options: LayerNorm ``none`` / ``pre`` / ``post``, attention only (no MLP),
causal or bidirectional, learned or sinusoidal positions, dropout, and a readout that predicts per
token (``(B, N, C)`` logits), from the flattened stream or from its mean over non-pad tokens
(``(B, C)`` logits).

Block, with ``LN`` the identity when ``layer_norm == "none"``:

- pre:  ``x = x + Attn(LN(x))``, ``x = x + MLP(LN(x))``, and a final ``LN`` before the readout;
- post: ``x = LN(x + Attn(x))``, ``x = LN(x + MLP(x))``;
- none: ``x = x + Attn(x)``, ``x = x + MLP(x)``.

After a forward, ``model.cache`` exposes ``resid`` (the stream before each block and after the
last, ``(B, N, D)`` each) and ``attn`` (each layer's pattern ``(B, H, N, N)``) for analysis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tpcore.backend import float_dtype, get_xp, xp_of
from tpcore.backend import rng as make_rng
from tpcore.errors import TpcoreError
from tpcore.nn import functional as F
from tpcore.nn.attention import attention_mask
from tpcore.nn.layers import MLP, LayerNorm, Linear, MultiHeadAttention, init_normal
from tpcore.nn.module import Module

Array = Any
LAYER_NORMS = ("none", "pre", "post")
POSITIONS = ("learned", "sinusoidal")
READOUTS = ("token", "flatten", "mean")


@dataclass
class TransformerConfig:
    """Hyper-parameters. ``n_classes`` defaults to ``vocab_size``."""

    vocab_size: int
    max_len: int
    n_classes: int | None = None
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_mlp: int = 256
    layer_norm: str = "pre"
    attn_only: bool = False
    causal: bool = False
    positions: str = "learned"
    readout: str = "token"
    dropout: float = 0.0
    activation: str = "gelu"
    dtype: str = "float32"
    seed: int = 0

    def __post_init__(self) -> None:
        for name, value, allowed in (("layer_norm", self.layer_norm, LAYER_NORMS),
                                     ("positions", self.positions, POSITIONS),
                                     ("readout", self.readout, READOUTS)):
            if value not in allowed:
                raise TpcoreError(f"{name} {value!r} unknown; expected one of {allowed}")
        for name in ("vocab_size", "max_len", "d_model", "n_layers", "n_heads"):
            if getattr(self, name) < 1:
                raise TpcoreError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise TpcoreError(f"d_model {self.d_model} not divisible by n_heads {self.n_heads}")
        if not 0 <= self.dropout < 1:
            raise TpcoreError(f"dropout {self.dropout} must be in [0, 1)")


    def n_parameters(self) -> int:
        """An upper bound on the number of parameters: embeddings, per block the four ``d x d``
        attention maps, the MLP and the layer norms, the readout."""
        d, D, L = self.d_model, self.d_mlp, self.n_layers
        classes = self.n_classes or self.vocab_size
        block = 4 * d * d + 4 * d + 4 * d + (0 if self.attn_only else 2 * d * D + D + d)
        return (self.vocab_size + self.max_len) * d + L * block + 2 * d + (d + 1) * classes


def sinusoidal_positions(n: int, d: int, xp: Any, dtype: Any) -> Array:
    """``P[p, 2i] = sin(p / 10000^(2i/d))``, ``P[p, 2i+1] = cos(...)``; shape ``(n, d)``."""
    pos = xp.arange(n, dtype="float64")[:, None]
    freq = xp.exp(-math.log(10000.0) * xp.arange(0, d, 2, dtype="float64") / d)
    table = xp.zeros((n, d), dtype="float64")
    table[:, 0::2] = xp.sin(pos * freq)
    table[:, 1::2] = xp.cos(pos * freq[: d // 2])
    return table.astype(dtype)


class Block(Module):
    """One transformer block (attention, then MLP unless attention-only)."""

    def __init__(self, c: TransformerConfig, rng: Any, dtype: Any):
        self.attn = MultiHeadAttention(c.d_model, c.n_heads, rng, dtype)
        self.mlp = None if c.attn_only else MLP(c.d_model, c.d_mlp, rng, dtype, c.activation)
        norm = c.layer_norm != "none"
        self.ln1 = LayerNorm(c.d_model, dtype) if norm else None
        self.ln2 = LayerNorm(c.d_model, dtype) if norm and not c.attn_only else None
        self.post = c.layer_norm == "post"
        self.p_drop = c.dropout

    def _sub(self, x: Array, layer: Module, ln: LayerNorm | None, rng: Any, *args: Any) -> Array:
        """One residual sub-layer, pre- or post-normed; stores what its backward needs."""
        h = ln.forward(x) if ln is not None and not self.post else x
        y, drop = F.dropout_forward(layer.forward(h, *args), self.p_drop, rng)
        out = x + y
        if ln is not None and self.post:
            out = ln.forward(out)
        return out, drop

    def _sub_backward(self, d: Array, layer: Module, ln: LayerNorm | None, drop: Any) -> Array:
        if ln is not None and self.post:
            d = ln.backward(d)
        dh = layer.backward(F.dropout_backward(d, drop))
        if ln is not None and not self.post:
            dh = ln.backward(dh)
        return d + dh

    def forward(self, x: Array, mask: Array | None, rng: Any) -> Array:
        x, self._drop1 = self._sub(x, self.attn, self.ln1, rng, mask)
        if self.mlp is not None:
            x, self._drop2 = self._sub(x, self.mlp, self.ln2, rng)
        return x

    def backward(self, d: Array) -> Array:
        if self.mlp is not None:
            d = self._sub_backward(d, self.mlp, self.ln2, self._drop2)
        return self._sub_backward(d, self.attn, self.ln1, self._drop1)


class Transformer(Module):
    """The standard transformer; see the module docstring for its options."""

    config_class = TransformerConfig

    def __init__(self, config: TransformerConfig):
        c = self.config = config
        dtype = float_dtype(c.dtype)
        rng = make_rng(c.seed)
        n_classes = c.n_classes or c.vocab_size
        self.tok_emb = init_normal(rng, (c.vocab_size, c.d_model), 1.0, dtype)
        if c.positions == "learned":
            self.pos_emb = init_normal(rng, (c.max_len, c.d_model), 1.0, dtype)
        else:
            self._pos_table = sinusoidal_positions(c.max_len, c.d_model, get_xp(), dtype)
        self.blocks = [Block(c, rng, dtype) for _ in range(c.n_layers)]
        self.ln_f = LayerNorm(c.d_model, dtype) if c.layer_norm == "pre" else None
        d_read = c.d_model * c.max_len if c.readout == "flatten" else c.d_model
        self.unembed = Linear(d_read, n_classes, rng, dtype)
        self.cache: dict[str, list[Array]] = {}

    def _positions(self) -> Array:
        return self.pos_emb.data if self.config.positions == "learned" else self._pos_table

    def forward(self, tokens: Array, pad: Array | None = None, rng: Any = None) -> Array:
        """Logits for ``tokens: (B, N)``; ``pad: (B, N)`` True at padding (never attended to).

        ``rng`` (a Generator) turns dropout on; None evaluates deterministically.
        Returns ``(B, N, C)`` for the ``token`` readout, ``(B, C)`` otherwise.
        """
        c = self.config
        b, n = tokens.shape
        if n > c.max_len:
            raise TpcoreError(f"sequence length {n} exceeds the model's max_len {c.max_len}")
        if c.readout == "flatten" and n != c.max_len:
            raise TpcoreError(f"flatten readout needs sequences of length {c.max_len}, got {n}")
        xp = xp_of(tokens)
        x, self._emb_cache = F.embedding_forward(tokens, self.tok_emb.data)
        x = x + self._positions()[:n]
        mask = attention_mask(n, c.causal, pad, xp=xp)
        resid, attn = [x], []
        for block in self.blocks:
            x = block.forward(x, mask, rng)
            resid.append(x)
            attn.append(block.attn.pattern)
        if self.ln_f is not None:
            x = self.ln_f.forward(x)
        self.cache = {"resid": resid, "attn": attn}
        self._shape, self._pad = x.shape, pad
        if c.readout == "flatten":
            x = x.reshape(b, -1)
        elif c.readout == "mean":
            keep = xp.ones((b, n, 1), x.dtype) if pad is None else (~pad)[..., None].astype(x.dtype)
            self._keep = keep / xp.maximum(keep.sum(axis=1, keepdims=True), 1.0)
            x = (x * self._keep).sum(axis=1)
        return self.unembed.forward(x)

    def backward(self, dlogits: Array) -> None:
        """Accumulate every parameter's gradient from ``dlogits`` (shaped like the logits)."""
        d = self.unembed.backward(dlogits)
        if self.config.readout == "flatten":
            d = d.reshape(self._shape)
        elif self.config.readout == "mean":
            d = d[:, None, :] * self._keep
        if self.ln_f is not None:
            d = self.ln_f.backward(d)
        for block in reversed(self.blocks):
            d = block.backward(d)
        if self.config.positions == "learned":
            n = d.shape[1]
            grad = xp_of(d).zeros_like(self.pos_emb.data)
            grad[:n] = d.sum(axis=0)
            self.pos_emb.accumulate(grad)
        self.tok_emb.accumulate(F.embedding_backward(d, self._emb_cache))

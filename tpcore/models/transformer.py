"""The standard transformer, with every backward written out.

``tokens: (B, N)`` -> embeddings (token + position) -> ``n_layers`` blocks of multi-head attention
and MLP -> unembedding. Options: LayerNorm ``none`` / ``pre`` / ``post``, attention only (no MLP),
causal or bidirectional, learned or sinusoidal positions, dropout, and a readout that predicts per
token (``(B, N, C)`` logits), from the flattened stream or from its mean over non-pad tokens
(``(B, C)`` logits). ``query="constant"`` gives every attention layer one learned query vector
for all positions, ``q_i = b_Q`` instead of ``q_i = x_i W_Q + b_Q`` (no ``W_Q`` parameter;
:class:`tpcore.nn.layers.MultiHeadAttention`): attention then depends on the keys alone, never
on the token or the position that asks.

Block, with ``LN`` the identity when ``layer_norm == "none"``:

- pre:  ``x = x + Attn(LN(x))``, ``x = x + MLP(LN(x))``, and a final ``LN`` before the readout;
- post: ``x = LN(x + Attn(x))``, ``x = LN(x + MLP(x))``;
- none: ``x = x + Attn(x)``, ``x = x + MLP(x)``.

After a forward, ``model.cache`` exposes ``resid`` (the stream before each block and after the
last, ``(B, N, D)`` each) and ``attn`` (each layer's pattern ``(B, H, N, N)``) for analysis.
Every activation is a named hook point (:data:`HOOK_AXES`, TransformerLens' names) that
``run_with_cache`` records and ``run_with_hooks`` edits (:mod:`tpcore.models.hooks`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tpcore.backend import Array, float_dtype, get_xp, xp_of
from tpcore.backend import rng as make_rng
from tpcore.errors import TpcoreError
from tpcore.models.hooks import Hooked, LensNames
from tpcore.nn import functional as F
from tpcore.nn.attention import attention_mask
from tpcore.nn.hookpoints import NO_HOOKS, Hooks
from tpcore.nn.layers import MLP, QUERIES, LayerNorm, Linear, MultiHeadAttention, init_normal
from tpcore.nn.module import Module

LAYER_NORMS = ("none", "pre", "post")
POSITIONS = ("learned", "sinusoidal")
READOUTS = ("token", "flatten", "mean")
HOOK_AXES: dict[str, str] = {
    "hook_embed": "batch pos d_model",
    "hook_pos_embed": "batch pos d_model",
    "hook_resid_pre": "batch pos d_model",
    "ln1.hook_normalized": "batch pos d_model",
    "attn.hook_q": "batch pos head d_head",
    "attn.hook_k": "batch pos head d_head",
    "attn.hook_v": "batch pos head d_head",
    "attn.hook_attn_scores": "batch head query_pos key_pos",
    "attn.hook_pattern": "batch head query_pos key_pos",
    "attn.hook_z": "batch pos head d_head",
    "attn.hook_result": "batch pos head d_model",
    "hook_attn_out": "batch pos d_model",
    "hook_resid_mid": "batch pos d_model",
    "ln2.hook_normalized": "batch pos d_model",
    "mlp.hook_pre": "batch pos d_mlp",
    "mlp.hook_post": "batch pos d_mlp",
    "hook_mlp_out": "batch pos d_model",
    "hook_resid_post": "batch pos d_model",
    "ln_final.hook_normalized": "batch pos d_model",
}
"""The axes of every hook point, by its name without the ``blocks.{l}.`` of a block's points, in
forward order (pre-LN; a post-LN block normalises after the sub-layer's ``hook_*_out``).
``hook_attn_scores`` are the scaled scores before the mask; ``hook_result`` each head's
``z_h W_O[h]`` (computed only where hooked or recorded); ``hook_attn_out`` and
``hook_mlp_out`` what a sub-layer adds to the stream (after dropout)."""


@dataclass
class TransformerConfig(LensNames):
    """Hyper-parameters. ``n_classes`` defaults to ``vocab_size``. ``pad_token``: the id that
    marks padding, so that ``forward`` without a ``pad`` mask derives it (positions holding that
    id); None: no id does, and a padded batch needs its ``pad`` mask. ``query``: ``"stream"``
    (``q_i = x_i W_Q + b_Q``) or ``"constant"`` (``q_i = b_Q`` at every position; see the module
    docstring)."""

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
    pad_token: int | None = None
    query: str = "stream"

    def __post_init__(self) -> None:
        for name, value, allowed in (("layer_norm", self.layer_norm, LAYER_NORMS),
                                     ("positions", self.positions, POSITIONS),
                                     ("readout", self.readout, READOUTS),
                                     ("query", self.query, QUERIES)):
            if value not in allowed:
                raise TpcoreError(f"{name} {value!r} unknown; expected one of {allowed}")
        for name in ("vocab_size", "max_len", "d_model", "n_layers", "n_heads"):
            if getattr(self, name) < 1:
                raise TpcoreError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise TpcoreError(f"d_model {self.d_model} not divisible by n_heads {self.n_heads}")
        if not 0 <= self.dropout < 1:
            raise TpcoreError(f"dropout {self.dropout} must be in [0, 1)")
        if self.pad_token is not None and not 0 <= self.pad_token < self.vocab_size:
            raise TpcoreError(f"pad_token {self.pad_token} outside the vocabulary "
                              f"0..{self.vocab_size - 1}")


    @property
    def d_head(self) -> int:
        """Width of one head (``d_model / n_heads``)."""
        return self.d_model // self.n_heads

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
    """One transformer block (attention, then MLP unless attention-only); its hook points are
    those of :data:`HOOK_AXES` from ``hook_resid_pre`` to ``hook_resid_post``."""

    def __init__(self, c: TransformerConfig, rng: Any, dtype: Any):
        self.attn = MultiHeadAttention(c.d_model, c.n_heads, rng, dtype, query=c.query)
        self.mlp = None if c.attn_only else MLP(c.d_model, c.d_mlp, rng, dtype, c.activation)
        norm = c.layer_norm != "none"
        self.ln1 = LayerNorm(c.d_model, dtype) if norm else None
        self.ln2 = LayerNorm(c.d_model, dtype) if norm and not c.attn_only else None
        self.post = c.layer_norm == "post"
        self.p_drop = c.dropout

    def _parts(self, kind: str) -> tuple[Module, LayerNorm | None, str]:
        return (self.attn, self.ln1, "ln1") if kind == "attn" else (self.mlp, self.ln2, "ln2")

    def _sub(self, x: Array, kind: str, rng: Any, *args: Any) -> Array:
        """One residual sub-layer (``kind``: ``attn`` or ``mlp``), pre- or post-normed; stores
        what its backward needs."""
        layer, ln, norm = self._parts(kind)
        hooks = self._hooks
        h = x
        if ln is not None and not self.post:
            h = hooks(f"{norm}.hook_normalized", ln.forward(x))
        y, drop = F.dropout_forward(layer.forward(h, *args, hooks=hooks.scope(f"{kind}.")),
                                    self.p_drop, rng)
        out = x + hooks(f"hook_{kind}_out", y)
        if ln is not None and self.post:
            out = hooks(f"{norm}.hook_normalized", ln.forward(out))
        return out, drop

    def _sub_backward(self, d: Array, kind: str, drop: Any) -> Array:
        layer, ln, norm = self._parts(kind)
        hooks = self._hooks
        if ln is not None and self.post:
            d = ln.backward(hooks.grad(f"{norm}.hook_normalized", d))
        dh = layer.backward(F.dropout_backward(hooks.grad(f"hook_{kind}_out", d), drop))
        if ln is not None and not self.post:
            dh = ln.backward(hooks.grad(f"{norm}.hook_normalized", dh))
        return d + dh

    def forward(self, x: Array, mask: Array | None, rng: Any, hooks: Hooks = NO_HOOKS) -> Array:
        self._hooks = hooks
        x, self._drop1 = self._sub(hooks("hook_resid_pre", x), "attn", rng, mask)
        if self.mlp is not None:
            x, self._drop2 = self._sub(hooks("hook_resid_mid", x), "mlp", rng)
        return hooks("hook_resid_post", x)

    def backward(self, d: Array) -> Array:
        d = self._hooks.grad("hook_resid_post", d)
        if self.mlp is not None:
            d = self._hooks.grad("hook_resid_mid", self._sub_backward(d, "mlp", self._drop2))
        return self._hooks.grad("hook_resid_pre", self._sub_backward(d, "attn", self._drop1))


def _head_view(name: str, doc: str) -> property:
    """A read-only property: the attention parameter ``name`` split by head
    (:meth:`Transformer._by_head`)."""
    return property(lambda self: self._by_head(name), doc=doc)


class Transformer(Hooked, Module):
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

    def forward(self, tokens: Array, pad: Array | None = None, rng: Any = None,
                hooks: Hooks | None = None) -> Array:
        """Logits for ``tokens: (B, N)``; ``pad: (B, N)`` True at padding (never attended to;
        None: the positions holding ``config.pad_token``, if the model has one).

        ``rng`` (a Generator) turns dropout on; None evaluates deterministically. ``hooks``
        reads or edits the activations (:data:`HOOK_AXES`); the backward follows its edits.
        Returns ``(B, N, C)`` for the ``token`` readout, ``(B, C)`` otherwise.
        """
        c = self.config
        b, n = tokens.shape
        if n > c.max_len:
            raise TpcoreError(f"sequence length {n} exceeds the model's max_len {c.max_len}")
        if c.readout == "flatten" and n != c.max_len:
            raise TpcoreError(f"flatten readout needs sequences of length {c.max_len}, got {n}")
        xp = xp_of(self.tok_emb.data)
        tokens, pad = xp.asarray(tokens), None if pad is None else xp.asarray(pad)
        if pad is None and c.pad_token is not None:
            pad = tokens == c.pad_token
        hooks = self._hooks = NO_HOOKS if hooks is None else hooks
        x, self._emb_cache = F.embedding_forward(tokens, self.tok_emb.data)
        pos = xp.broadcast_to(self._positions()[:n], x.shape)
        x = hooks("hook_embed", x) + hooks("hook_pos_embed", pos)
        mask = attention_mask(n, c.causal, pad, xp=xp)
        resid, attn = [x], []
        for layer, block in enumerate(self.blocks):
            x = block.forward(x, mask, rng, hooks.scope(f"blocks.{layer}."))
            resid.append(x)
            attn.append(block.attn.pattern)
        if self.ln_f is not None:
            x = hooks("ln_final.hook_normalized", self.ln_f.forward(x))
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
            d = self.ln_f.backward(self._hooks.grad("ln_final.hook_normalized", d))
        for block in reversed(self.blocks):
            d = block.backward(d)
        if self.config.positions == "learned":
            n = d.shape[1]
            grad = xp_of(d).zeros_like(self.pos_emb.data)
            grad[:n] = self._hooks.grad("hook_pos_embed", d).sum(axis=0)
            self.pos_emb.accumulate(grad)
        self.tok_emb.accumulate(F.embedding_backward(self._hooks.grad("hook_embed", d),
                                                     self._emb_cache))

    # ------------------------------------------------------------------ weights by head
    # TransformerLens's names; each a copy stacked over the layers (writing to it changes
    # nothing): head h of layer l reads columns h*d_head .. (h+1)*d_head of Wq, Wk, Wv and
    # writes through the same rows of Wo.
    def _by_head(self, name: str) -> Array:
        """Parameter ``name`` of every layer's attention (``wq``, ..., ``bv``), split by head."""
        c = self.config
        xp = xp_of(self.tok_emb.data)
        d, h, dh = c.d_model, c.n_heads, c.d_head
        arrays = [b.attn.arrays()[name] for b in self.blocks]
        if name == "wo":
            return xp.stack([a.reshape(h, dh, d) for a in arrays])
        if name.startswith("w"):
            return xp.stack([a.reshape(d, h, dh).transpose(1, 0, 2) for a in arrays])
        return xp.stack([a.reshape(h, dh) for a in arrays])

    W_Q = _head_view("wq", "Query weights by head ``(n_layers, n_heads, d_model, d_head)`` "
                     "(zeros for a constant query).")
    W_K = _head_view("wk", "Key weights by head ``(n_layers, n_heads, d_model, d_head)``.")
    W_V = _head_view("wv", "Value weights by head ``(n_layers, n_heads, d_model, d_head)``.")
    W_O = _head_view("wo", "Output weights by head ``(n_layers, n_heads, d_head, d_model)``.")
    b_Q = _head_view("bq", "Query biases by head ``(n_layers, n_heads, d_head)``.")
    b_K = _head_view("bk", "Key biases by head ``(n_layers, n_heads, d_head)``.")
    b_V = _head_view("bv", "Value biases by head ``(n_layers, n_heads, d_head)``.")

    @property
    def b_O(self) -> Array:
        """Output biases ``(n_layers, d_model)``."""
        return xp_of(self.tok_emb.data).stack([b.attn.bo.data for b in self.blocks])

    @property
    def W_E(self) -> Array:
        """Token embeddings ``(d_vocab, d_model)``."""
        return self.tok_emb.data.copy()

    @property
    def W_pos(self) -> Array:
        """Position embeddings ``(n_ctx, d_model)`` (learned, or the sinusoidal table)."""
        return self._positions().copy()

    @property
    def W_U(self) -> Array:
        """Unembedding ``(d_model, d_vocab_out)`` (the ``token`` and ``mean`` readouts)."""
        return self.unembed.w.data.copy()

    @property
    def b_U(self) -> Array:
        """Unembedding bias ``(d_vocab_out,)``."""
        return self.unembed.b.data.copy()

    # ------------------------------------------------------------------ hook vocabulary
    def hook_names(self) -> list[str]:
        """Every hook point's name, in forward order."""
        c = self.config

        def sub(norm: str, parts: list[str]) -> list[str]:
            if c.layer_norm == "none":
                return parts
            normed = [f"{norm}.hook_normalized"]
            return normed + parts if c.layer_norm == "pre" else parts + normed

        attn = [n for n in HOOK_AXES if n.startswith("attn.")] + ["hook_attn_out"]
        block = ["hook_resid_pre", *sub("ln1", attn)]
        if not c.attn_only:
            block += ["hook_resid_mid", *sub("ln2", ["mlp.hook_pre", "mlp.hook_post",
                                                      "hook_mlp_out"])]
        names = ["hook_embed", "hook_pos_embed"] + [
            f"blocks.{layer}.{name}" for layer in range(c.n_layers)
            for name in [*block, "hook_resid_post"]]
        return names + (["ln_final.hook_normalized"] if c.layer_norm == "pre" else [])

    def hook_axes(self, name: str) -> tuple[str, ...]:
        """The axes of hook point ``name`` (e.g. ``("batch", "pos", "head", "d_head")``)."""
        self.check_hook_names([name])
        return tuple(HOOK_AXES[name.split(".", 2)[2] if name.startswith("blocks.")
                               else name].split())

    def hook_name(self, kind: str, layer: int | None = None) -> str:
        """The full name of a short one, as TransformerLens' ``get_act_name``: ``("pattern",
        0)`` -> ``blocks.0.attn.hook_pattern``; ``("resid_pre", 1)``, ``("mlp_out", 0)``,
        ``("q", 0)``, ``("pre", 0)``, ``("ln1", 0)``; ``"embed"``, ``"pos_embed"``,
        ``"ln_final"`` without a layer."""
        if layer is None:
            name = "ln_final.hook_normalized" if kind == "ln_final" else f"hook_{kind}"
        elif kind in ("ln1", "ln2"):
            name = f"blocks.{layer}.{kind}.hook_normalized"
        else:
            part = {"q": "attn.", "k": "attn.", "v": "attn.", "z": "attn.", "pattern": "attn.",
                    "attn_scores": "attn.", "result": "attn.", "pre": "mlp.",
                    "post": "mlp."}.get(kind, "")
            name = f"blocks.{layer}.{part}hook_{kind}"
        self.check_hook_names([name])
        return name

    def heads(self) -> list[list[tuple[tuple[int, int], str]]]:
        """Every head by layer: ``((layer, h), "head {h}")``."""
        c = self.config
        return [[((layer, h), f"head {h}") for h in range(c.n_heads)]
                for layer in range(c.n_layers)]

    def head_output(self, head: tuple[int, int]) -> tuple[str, dict[str, int]]:
        """Head ``(layer, h)``'s output before ``Wo``: hook point and selection
        (``blocks.{layer}.attn.hook_z`` at ``heads=h``)."""
        layer, h = head
        if not (0 <= layer < self.config.n_layers and 0 <= h < self.config.n_heads):
            raise TpcoreError(f"head {head!r} does not exist; expected (layer, head) with layer "
                              f"< {self.config.n_layers} and head < {self.config.n_heads}")
        return f"blocks.{layer}.attn.hook_z", {"heads": h}

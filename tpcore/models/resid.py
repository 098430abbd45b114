"""The standard transformer's residual stream read from a cache, under TransformerLens's names
(:class:`tpcore.models.hooks.Cache` has each as a method: ``cache.accumulated_resid()``).

With ``r_l`` the stream into block ``l`` (``hook_resid_pre``) and ``r_L`` the stream out of the
last one, a pre-LayerNorm (or LayerNorm-free) transformer adds every part to the stream:

    r_L = embed + pos_embed + sum_l (attn_out_l + mlp_out_l),
    attn_out_l = sum_h z_{l,h} W_O[l, h] + b_O[l],

and its logits are ``LN(r_L) W_U + b_U`` with ``LN(r) = gamma (r - mean r) inv + beta``; for
the ``inv`` of this input (read from the cache) that is linear in the parts, so each part ``c``
contributes ``(gamma (c - mean c) inv) W_U[:, k]`` to logit ``k`` (:func:`logit_attribution`)
and the contributions plus ``(beta W_U + b_U)[k]`` sum to the logit exactly. A post-LayerNorm
model normalises the stream after every part, so it has no such sum and is refused.

Stacks put the parts first: ``(parts, batch, pos, d_model)``; ``return_labels`` adds their
names (``"0_pre"``, ``"1_attn_out"``, ``"L1H0"``, ...).
"""

from __future__ import annotations

from typing import Any, Protocol

from tpcore.backend import Array, xp_of
from tpcore.errors import TpcoreError
from tpcore.nn.functional import LAYER_NORM_EPS


class Cache(Protocol):
    """What these functions read: activations by name (or short name) and the model that
    computed them (:class:`tpcore.models.hooks.Cache`)."""

    @property
    def model(self) -> Any: ...

    def __getitem__(self, key: str | tuple) -> Array: ...

    def __contains__(self, key: object) -> bool: ...


def _transformer(cache: Cache, what: str, additive: bool = False) -> Any:
    """The cache's model, when it is a standard transformer (of a stream that adds up, when
    ``additive``); else a :class:`TpcoreError` naming ``what`` cannot be read."""
    model = cache.model
    cfg = getattr(model, "config", None)
    if not hasattr(model, "W_O") or cfg is None:
        raise TpcoreError(f"{what} reads a standard transformer's residual stream; this cache "
                          f"is of a {type(model).__name__}")
    if additive and cfg.layer_norm == "post":
        raise TpcoreError(f"{what}: a post-LayerNorm transformer normalises the stream after "
                          "every part, so its parts do not add up to it")
    return model


def _get(cache: Cache, name: str, what: str) -> Array:
    if name not in cache:
        raise TpcoreError(f"{what} needs {name!r}, which this cache does not hold (run "
                          "run_with_cache without names)")
    return cache[name]


def _out(stack: list[Array], labels: list[str], return_labels: bool) -> Any:
    values = xp_of(stack[0]).stack(stack)
    return (values, labels) if return_labels else values


def stack_activation(cache: Cache, kind: str) -> Array:
    """``cache[kind, l]`` for every layer ``l``, stacked: ``(n_layers, ...)``
    (``kind``: a short name such as ``"resid_pre"``, ``"pattern"``, ``"z"``)."""
    layers = cache.model.config.n_layers
    return xp_of(cache[kind, 0]).stack([cache[kind, layer] for layer in range(layers)])


def accumulated_resid(cache: Cache, return_labels: bool = False) -> Any:
    """The stream into every block and out of the last: ``(n_layers + 1, batch, pos,
    d_model)``, labels ``"0_pre" .. "{L-1}_pre", "final_post"``."""
    model = _transformer(cache, "accumulated_resid")
    layers = model.config.n_layers
    stack = [_get(cache, f"blocks.{layer}.hook_resid_pre", "accumulated_resid")
             for layer in range(layers)]
    stack.append(_get(cache, f"blocks.{layers - 1}.hook_resid_post", "accumulated_resid"))
    return _out(stack, [f"{layer}_pre" for layer in range(layers)] + ["final_post"],
                return_labels)


def decompose_resid(cache: Cache, return_labels: bool = False) -> Any:
    """The parts that add up to the stream out of the last block: ``embed``, ``pos_embed``,
    then each layer's ``attn_out`` and ``mlp_out`` (attention-only models: no ``mlp_out``):
    ``(parts, batch, pos, d_model)``."""
    model = _transformer(cache, "decompose_resid", additive=True)
    stack = [_get(cache, "hook_embed", "decompose_resid"),
             _get(cache, "hook_pos_embed", "decompose_resid")]
    labels = ["embed", "pos_embed"]
    for layer in range(model.config.n_layers):
        for part in ("attn_out",) + (() if model.config.attn_only else ("mlp_out",)):
            stack.append(_get(cache, f"blocks.{layer}.hook_{part}", "decompose_resid"))
            labels.append(f"{layer}_{part}")
    return _out(stack, labels, return_labels)


def stack_head_results(cache: Cache, return_labels: bool = False) -> Any:
    """Each head's write into the stream, ``z_{l,h} W_O[l, h]`` (the layer's ``b_O`` left
    out): ``(n_layers * n_heads, batch, pos, d_model)``, labels ``"L{l}H{h}"``."""
    model = _transformer(cache, "stack_head_results")
    w_o = model.W_O
    stack, labels = [], []
    for layer in range(model.config.n_layers):
        z = _get(cache, f"blocks.{layer}.attn.hook_z", "stack_head_results")
        for h in range(model.config.n_heads):
            stack.append(z[:, :, h] @ w_o[layer, h])
            labels.append(f"L{layer}H{h}")
    return _out(stack, labels, return_labels)


def logit_attribution(cache: Cache, stack: Array, classes: Array | None = None) -> Array:
    """What each part of ``stack (parts, batch, pos, d_model)`` contributes to the logits
    (module docstring): ``(parts, batch, pos, d_vocab_out)``, or with ``classes (batch, pos)``
    the contribution to those classes' logits only, ``(parts, batch, pos)``. Over
    :func:`decompose_resid`'s parts they sum, with :func:`logit_bias`, to the logits."""
    model = _transformer(cache, "logit_attribution", additive=True)
    if model.config.readout != "token":
        raise TpcoreError(f"logit_attribution reads per-position logits; this model's readout "
                          f"is {model.config.readout!r}")
    xp = xp_of(stack)
    scaled = stack
    if model.ln_f is not None:
        final = _get(cache, f"blocks.{model.config.n_layers - 1}.hook_resid_post",
                     "logit_attribution")
        centred = final - final.mean(axis=-1, keepdims=True)
        inv = 1.0 / xp.sqrt((centred * centred).mean(axis=-1, keepdims=True) + LAYER_NORM_EPS)
        scaled = (stack - stack.mean(axis=-1, keepdims=True)) * inv * model.ln_f.gamma.data
    w_u = model.W_U
    if classes is None:
        return scaled @ w_u
    classes = xp.asarray(classes)
    if classes.shape != stack.shape[1:3]:
        raise TpcoreError(f"classes of shape {classes.shape}; expected (batch, pos) = "
                          f"{stack.shape[1:3]}")
    return (scaled * w_u.T[classes]).sum(axis=-1)


def logit_bias(cache: Cache) -> Array:
    """The part of every logit no stream part contributes: ``beta W_U + b_U`` (``b_U`` without
    a final LayerNorm), ``(d_vocab_out,)``."""
    model = _transformer(cache, "logit_bias", additive=True)
    beta = model.ln_f.beta.data @ model.W_U if model.ln_f is not None else 0.0
    return beta + model.b_U

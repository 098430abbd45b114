"""A bridge to TransformerLens: a tpcore :class:`~tpcore.models.transformer.Transformer` as a
TransformerLens model, and such a model back as a tpcore one.

TransformerLens 4 wraps every model in a ``TransformerBridge``; its native source
(``transformer_lens.model_bridge.sources.native``) builds the model from a config alone, with
no HuggingFace checkpoint. :func:`to_lens` builds that model for a tpcore model's configuration
and loads its weights, so TransformerLens's caches, hooks, activation patching, ``FactoredMatrix``
and circuitsvis work on it; :func:`from_lens` reads a native TransformerLens model back into a
tpcore ``Transformer`` where tpcore's architecture can express it.

The two architectures correspond so (tpcore -> TransformerLens config):

==============================  =====================================================
``layer_norm="pre"`` / ``none``  ``normalization_type="LN"`` / ``None`` (eps 1e-5)
``activation="gelu"`` (tanh)     ``act_fn="gelu_new"``; ``relu`` -> ``"relu"``
``causal``                       ``attention_dir="causal"``, else ``"bidirectional"``
positions, learned or sinusoidal ``W_pos`` (the table), ``n_ctx = max_len``
``readout="token"``              the unembedding ``W_U``, ``b_U``; ``d_vocab_out = n_classes``
==============================  =====================================================

Weights are TransformerLens's per-head views of the same numbers
(:attr:`Transformer.W_Q` ``(n_layers, n_heads, d_model, d_head)``, ...), as
:func:`lens_weights` lists them. What either side has and the other cannot express (post-LN
blocks, the ``flatten`` and ``mean`` readouts; TransformerLens's exact-erf GELU, RMS norms,
rotary positions, grouped or gated layers, soft caps, other attention scales) is refused in one
line naming the component. Needs the ``lens`` extra (torch and transformer-lens >= 4.3).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tpcore.backend import asarray, to_host
from tpcore.errors import TpcoreError
from tpcore.models.transformer import Transformer, TransformerConfig
from tpcore.nn.functional import LAYER_NORM_EPS

ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu"}
"""tpcore's MLP activations by TransformerLens's names for the same functions."""
INSTALL = "pip install 'tpcore[lens]'"


def _modules() -> tuple[Any, Any, Any]:
    """``torch``, TransformerLens's config class and its native ``boot``; a missing package
    raises a :class:`TpcoreError` naming the install."""
    try:
        import torch
        from transformer_lens.config import TransformerBridgeConfig
        from transformer_lens.model_bridge.sources.native import boot
    except ImportError as exc:
        raise TpcoreError(f"the TransformerLens bridge needs torch and transformer-lens >= 4.3 "
                          f"({exc.name or exc} is missing): {INSTALL}") from None
    return torch, TransformerBridgeConfig, boot


def lens_config(config: TransformerConfig) -> dict[str, Any]:
    """The TransformerLens config fields of a tpcore model's configuration (see the module's
    table); a configuration TransformerLens cannot express raises a :class:`TpcoreError`
    naming the component."""
    refused = {"layer_norm": (config.layer_norm == "post", "post-LayerNorm blocks"),
               "readout": (config.readout != "token",
                           f"the {config.readout!r} readout (TransformerLens predicts per token)")}
    for key, (bad, what) in refused.items():
        if bad:
            raise TpcoreError(f"{key} {getattr(config, key)!r}: TransformerLens has no {what}; "
                              "expected a per-token model with pre-LayerNorm or no LayerNorm")
    return {"d_model": config.d_model, "n_layers": config.n_layers,
            "n_heads": config.n_heads, "d_head": config.d_head, "d_mlp": config.d_mlp,
            "n_ctx": config.max_len, "d_vocab": config.vocab_size,
            "d_vocab_out": config.n_classes or config.vocab_size,
            "act_fn": ACTIVATIONS[config.activation], "attn_only": config.attn_only,
            "normalization_type": "LN" if config.layer_norm == "pre" else None,
            "attention_dir": "causal" if config.causal else "bidirectional",
            "positional_embedding_type": "standard", "eps": LAYER_NORM_EPS,
            "architecture": "TransformerLensNative", "init_weights": False}


def lens_weights(model: Transformer) -> dict[str, np.ndarray]:
    """A tpcore model's weights under TransformerLens's names and shapes (float, on the host):
    ``embed.W_E (d_vocab, d_model)``, ``pos_embed.W_pos (n_ctx, d_model)``, per layer
    ``blocks.{l}.attn.W_Q/W_K/W_V (n_heads, d_model, d_head)``, ``W_O (n_heads, d_head,
    d_model)``, ``b_Q/b_K/b_V (n_heads, d_head)``, ``b_O (d_model,)``, ``mlp.W_in (d_model,
    d_mlp)``, ``b_in``, ``W_out (d_mlp, d_model)``, ``b_out``, ``ln1.w/.b``, ``ln2.w/.b``, then
    ``ln_final.w/.b`` and ``unembed.W_U (d_model, d_vocab_out)``, ``b_U``."""
    lens_config(model.config)
    out = {"embed.W_E": model.W_E, "pos_embed.W_pos": model.W_pos}
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"):
        for layer, value in enumerate(getattr(model, name)):
            out[f"blocks.{layer}.attn.{name}"] = value
    for layer, block in enumerate(model.blocks):
        pre = f"blocks.{layer}."
        for ln in ("ln1", "ln2"):
            if getattr(block, ln) is not None:
                out[pre + ln + ".w"] = getattr(block, ln).gamma.data
                out[pre + ln + ".b"] = getattr(block, ln).beta.data
        if block.mlp is not None:
            out |= {pre + "mlp.W_in": block.mlp.fc1.w.data, pre + "mlp.b_in": block.mlp.fc1.b.data,
                    pre + "mlp.W_out": block.mlp.fc2.w.data,
                    pre + "mlp.b_out": block.mlp.fc2.b.data}
    if model.ln_f is not None:
        out |= {"ln_final.w": model.ln_f.gamma.data, "ln_final.b": model.ln_f.beta.data}
    out |= {"unembed.W_U": model.W_U, "unembed.b_U": model.b_U}
    return {k: np.array(to_host(v)) for k, v in out.items()}


def to_lens(model: Transformer, device: str | None = None) -> Any:
    """A TransformerLens ``TransformerBridge`` computing what ``model`` computes (in its dtype,
    on ``device``, default the CPU): its logits and every hook point both name agree with
    ``model.run_with_cache`` up to float rounding."""
    torch, config_class, boot = _modules()
    from transformer_lens.utilities.tl_checkpoint_conversion import convert_tl_checkpoint

    cfg = config_class(**lens_config(model.config))
    weights = {k: torch.from_numpy(v) for k, v in lens_weights(model).items()}
    bridge = boot(cfg, device=device, dtype=weights["embed.W_E"].dtype)
    bridge.load_state_dict(convert_tl_checkpoint(weights, cfg), strict=True)
    return bridge.train(False)  # inference mode: no dropout


def _refusals(cfg: Any) -> list[tuple[str, bool, str]]:
    act = (cfg.act_fn or "").lower()
    return [
        ("normalization_type", cfg.normalization_type not in ("LN", None),
         "LayerNorm or none"),
        ("act_fn", act not in ACTIVATIONS.values(),
         "'gelu_new' (tanh GELU) or 'relu'" + (" (tpcore's GELU is the tanh one)"
                                               if act == "gelu" else "")),
        ("positional_embedding_type", (cfg.positional_embedding_type or "standard") != "standard",
         "'standard' (a table of positions)"),
        ("d_head", cfg.d_head * cfg.n_heads != cfg.d_model, "d_model / n_heads"),
        ("n_key_value_heads", cfg.n_key_value_heads not in (None, cfg.n_heads),
         "one key and value per head"),
        ("gated_mlp", bool(cfg.gated_mlp), "False"),
        ("final_rms", bool(cfg.final_rms), "False"),
        ("attn_scores_soft_cap", cfg.attn_scores_soft_cap > 0, "no soft cap"),
        ("output_logits_soft_cap", cfg.output_logits_soft_cap > 0, "no soft cap"),
        ("attn_scale", cfg.use_attn_scale and cfg.attn_scale > 0
         and not math.isclose(cfg.attn_scale, math.sqrt(cfg.d_head)), "sqrt(d_head)"),
        ("eps", cfg.normalization_type == "LN" and not math.isclose(cfg.eps, LAYER_NORM_EPS),
         f"{LAYER_NORM_EPS}"),
    ]


def from_lens(bridge: Any) -> Transformer:
    """A tpcore ``Transformer`` computing what a native TransformerLens model computes (one
    built by ``TransformerBridge.boot_native`` or :func:`to_lens`), in float32 or float64 as
    the model is; a component tpcore cannot express raises a :class:`TpcoreError` naming it."""
    torch, _, _ = _modules()
    cfg = bridge.cfg
    if getattr(cfg, "architecture", None) != "TransformerLensNative":
        raise TpcoreError(f"architecture {getattr(cfg, 'architecture', None)!r}: only native "
                          "TransformerLens models (TransformerBridge.boot_native) are read")
    for key, bad, expected in _refusals(cfg):
        if bad:
            raise TpcoreError(f"{key} {getattr(cfg, key)!r}: tpcore's Transformer cannot "
                              f"express it; expected {expected}")
    state = {k: v.detach().cpu().numpy() for k, v in bridge.state_dict().items()
             if isinstance(v, torch.Tensor)}
    dtype = str(state["embed.weight"].dtype)
    if dtype not in ("float32", "float64"):
        raise TpcoreError(f"dtype {dtype}: expected float32 or float64 weights")
    d_vocab_out = cfg.d_vocab_out if cfg.d_vocab_out > 0 else cfg.d_vocab
    model = Transformer(TransformerConfig(
        vocab_size=cfg.d_vocab, max_len=cfg.n_ctx, n_classes=d_vocab_out, d_model=cfg.d_model,
        n_layers=cfg.n_layers, n_heads=cfg.n_heads, d_mlp=cfg.d_mlp or 4 * cfg.d_model,
        layer_norm="pre" if cfg.normalization_type == "LN" else "none",
        attn_only=bool(cfg.attn_only), causal=cfg.attention_dir == "causal",
        activation={v: k for k, v in ACTIVATIONS.items()}[cfg.act_fn.lower()], dtype=dtype))
    pairs = _tpcore_params(model)
    unused = sorted(set(state) - {key for _, key in pairs})
    if unused:
        raise TpcoreError(f"weight {unused[0]!r}: tpcore's Transformer has no place for it")
    for param, key in pairs:
        value = state[key]
        flip = value.ndim == 2 and key not in ("embed.weight", "pos_embed.weight")
        param.data[...] = asarray(np.ascontiguousarray(value.T if flip else value))
    return model


def _tpcore_params(model: Transformer) -> list[tuple[Any, str]]:
    """Each tpcore parameter with the native TransformerLens weight it takes (whose
    ``nn.Linear`` matrices are ``(out, in)``, the transpose of tpcore's)."""
    pairs = [(model.tok_emb, "embed.weight"), (model.pos_emb, "pos_embed.weight"),
             (model.unembed.w, "unembed.weight"), (model.unembed.b, "unembed.bias")]
    for layer, block in enumerate(model.blocks):
        pre = f"blocks.{layer}."
        for c in "qkvo":
            pairs += [(getattr(block.attn, f"w{c}"), f"{pre}attn.{c}.weight"),
                      (getattr(block.attn, f"b{c}"), f"{pre}attn.{c}.bias")]
        if block.mlp is not None:
            pairs += [(block.mlp.fc1.w, f"{pre}mlp.in.weight"),
                      (block.mlp.fc1.b, f"{pre}mlp.in.bias"),
                      (block.mlp.fc2.w, f"{pre}mlp.out.weight"),
                      (block.mlp.fc2.b, f"{pre}mlp.out.bias")]
        for ln in ("ln1", "ln2"):
            if getattr(block, ln) is not None:
                pairs += [(getattr(block, ln).gamma, f"{pre}{ln}.weight"),
                          (getattr(block, ln).beta, f"{pre}{ln}.bias")]
    if model.ln_f is not None:
        pairs += [(model.ln_f.gamma, "ln_final.weight"), (model.ln_f.beta, "ln_final.bias")]
    return pairs

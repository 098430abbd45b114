"""TransformerLens's conventions on tpcore's models: ``model(tokens)``, ``cfg`` with its size
names, ``fwd_hooks`` with ``fn(activation, hook)``, ``names_filter``, and the per-head weight
views, each checked against the activations the forward computes."""

import numpy as np
import pytest

from tpcore.backend import asarray, to_host
from tpcore.errors import TpcoreError
from tpcore.models import resid
from tpcore.models.hooks import patch_head, patch_head_sweep
from tpcore.models.program import ProgramConfig, ProgramModel
from tpcore.models.transformer import Transformer, TransformerConfig


def _model(**kw):
    cfg = TransformerConfig(vocab_size=7, max_len=6, n_classes=5, d_model=12, n_layers=2,
                            n_heads=3, d_mlp=16, seed=1, dtype="float64", **kw)
    tokens = asarray(np.random.default_rng(0).integers(0, 7, (4, 6)))
    return Transformer(cfg), tokens


def test_call_and_cfg_names():
    model, tokens = _model()
    np.testing.assert_array_equal(to_host(model(tokens)), to_host(model.forward(tokens)))
    assert (model.cfg.d_vocab, model.cfg.n_ctx, model.cfg.d_vocab_out, model.cfg.d_head) == \
        (7, 6, 5, 4)
    program = ProgramModel(ProgramConfig(vocab_size=5, max_len=4, n_classes=3, n_layers=1))
    assert (program.cfg.d_vocab, program.cfg.n_ctx, program.cfg.d_vocab_out) == (5, 4, 3)
    ids = asarray(np.array([[1, 2, 3, 4]]))
    np.testing.assert_array_equal(to_host(program(ids)), to_host(program.forward(ids)))


def test_weights_by_head_compute_the_cached_activations():
    model, tokens = _model()
    logits, cache = model.run_with_cache(tokens)
    c = {k: to_host(v) for k, v in cache.items()}
    W = {k: to_host(getattr(model, k)) for k in
         ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_pos", "W_U", "b_U")}
    assert W["W_Q"].shape == (2, 3, 12, 4) and W["W_O"].shape == (2, 3, 4, 12)
    np.testing.assert_allclose(W["W_E"][to_host(tokens)], c["hook_embed"])
    np.testing.assert_allclose(np.broadcast_to(W["W_pos"], c["hook_pos_embed"].shape),
                               c["hook_pos_embed"])
    for layer in range(2):
        x = c[f"blocks.{layer}.ln1.hook_normalized"]
        for name in "QKV":
            got = np.einsum("bnd,hde->bnhe", x, W[f"W_{name}"][layer]) + W[f"b_{name}"][layer]
            np.testing.assert_allclose(got, c[f"blocks.{layer}.attn.hook_{name.lower()}"],
                                       atol=1e-12)
        z = c[f"blocks.{layer}.attn.hook_z"]
        out = np.einsum("bnhe,hed->bnd", z, W["W_O"][layer]) + W["b_O"][layer]
        np.testing.assert_allclose(out, c[f"blocks.{layer}.hook_attn_out"], atol=1e-12)
    np.testing.assert_allclose(c["ln_final.hook_normalized"] @ W["W_U"] + W["b_U"],
                               to_host(logits), atol=1e-12)
    model.W_Q[0, 0, 0, 0] = 99.0              # a copy: the model does not change
    assert to_host(model.W_Q)[0, 0, 0, 0] != 99.0


def test_fwd_hooks_take_transformerlens_functions_and_filters():
    model, tokens = _model()
    seen = []

    def zero_head_1(activation, hook):        # written as for TransformerLens
        seen.append(hook.name)
        activation = activation.copy()
        activation[:, :, 1] = 0.0
        return activation

    name = "blocks.0.attn.hook_z"
    a = model.run_with_hooks(tokens, fwd_hooks=[(name, zero_head_1)])
    b = model.run_with_hooks(tokens, {name: zero_head_1})
    np.testing.assert_array_equal(to_host(a), to_host(b))
    assert seen == [name, name] and not np.allclose(to_host(a), to_host(model(tokens)))
    model.run_with_hooks(tokens, fwd_hooks=[(lambda n: n.endswith("hook_z"), zero_head_1)])
    assert seen[2:] == ["blocks.0.attn.hook_z", "blocks.1.attn.hook_z"]
    with pytest.raises(TpcoreError, match="two hook functions at 'blocks.0.attn.hook_z'"):
        model.run_with_hooks(tokens, {name: zero_head_1}, fwd_hooks=[(name, zero_head_1)])


def test_names_filter_picks_what_the_cache_keeps():
    model, tokens = _model()
    _, by_predicate = model.run_with_cache(tokens, names_filter=lambda n: "pattern" in n)
    assert by_predicate.names() == ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]
    _, by_name = model.run_with_cache(tokens, names_filter="hook_embed")
    assert by_name.names() == ["hook_embed"]
    _, by_list = model.run_with_cache(tokens, names_filter=["hook_embed", "hook_pos_embed"])
    assert by_list.names() == ["hook_embed", "hook_pos_embed"]
    with pytest.raises(TpcoreError, match="'hook_embd' is not a hook point"):
        model.run_with_cache(tokens, names_filter=["hook_embd"])
    with pytest.raises(TpcoreError, match="names or names_filter, not both"):
        model.run_with_cache(tokens, names=["hook_embed"], names_filter="hook_embed")


@pytest.mark.parametrize("kw", [dict(), dict(layer_norm="none"), dict(attn_only=True)])
def test_the_residual_stream_adds_up_to_the_logits(kw):
    model, tokens = _model(**kw)
    logits, cache = model.run_with_cache(tokens)
    layers = model.config.n_layers
    acc, labels = cache.accumulated_resid(return_labels=True)
    assert labels == ["0_pre", "1_pre", "final_post"] and acc.shape == (3, 4, 6, 12)
    np.testing.assert_array_equal(to_host(acc[1]), to_host(cache["resid_pre", 1]))
    parts, names = cache.decompose_resid(return_labels=True)
    assert names[:3] == ["embed", "pos_embed", "0_attn_out"]
    np.testing.assert_allclose(to_host(parts.sum(axis=0)), to_host(acc[-1]), atol=1e-12)
    heads, head_names = cache.stack_head_results(return_labels=True)
    assert head_names[:4] == ["L0H0", "L0H1", "L0H2", "L1H0"]
    per_layer = to_host(heads[:3].sum(axis=0)) + to_host(model.b_O[0])
    np.testing.assert_allclose(per_layer, to_host(cache["attn_out", 0]), atol=1e-12)
    attrs = cache.logit_attrs(parts)                       # (parts, batch, pos, classes)
    total = to_host(attrs.sum(axis=0)) + to_host(resid.logit_bias(cache))
    np.testing.assert_allclose(total, to_host(logits), atol=1e-10)
    classes = to_host(logits).argmax(axis=-1)
    picked = to_host(cache.logit_attrs(parts, asarray(classes)))
    np.testing.assert_allclose(picked, np.take_along_axis(to_host(attrs), classes[None, ..., None],
                                                          axis=-1)[..., 0], atol=1e-12)
    assert cache.stack_activation("pattern").shape == (layers, 4, 3, 6, 6)


def test_what_the_stream_cannot_say_is_refused():
    model, tokens = _model(layer_norm="post")
    _, cache = model.run_with_cache(tokens)
    with pytest.raises(TpcoreError, match="post-LayerNorm .* do not add up"):
        cache.decompose_resid()
    _, partial = _model()[0].run_with_cache(tokens, names_filter="hook_embed")
    with pytest.raises(TpcoreError, match="needs 'blocks.0.hook_resid_pre'"):
        partial.accumulated_resid()
    program = ProgramModel(ProgramConfig(vocab_size=5, max_len=4, n_classes=3, n_layers=1))
    _, pcache = program.run_with_cache(asarray(np.array([[1, 2, 3, 4]])))
    with pytest.raises(TpcoreError, match="this cache is of a ProgramModel"):
        pcache.stack_head_results()


def test_a_head_sweep_is_patch_head_by_layer_and_head():
    model, tokens = _model()
    clean, corrupted = tokens[:1], tokens[1:2]

    def metric(logits):
        return float(to_host(logits)[0, -1, 0])

    sweep = patch_head_sweep(model, clean, corrupted, metric)
    assert sweep.values.shape == (2, 3) and sweep.columns == ["head 0", "head 1", "head 2"]
    for layer, h in ((0, 0), (1, 2)):
        assert sweep.values[layer, h] == metric(patch_head(model, clean, corrupted, (layer, h)))
    table = sweep.table(prec=2).splitlines()
    assert table[0] == "| | head 0 | head 1 | head 2 |" and table[3].startswith("| layer 1 | ")
    by_pos = patch_head_sweep(model, clean, corrupted, metric, by_position=True)
    assert by_pos.values.shape == (2, 3, 6)
    assert by_pos.values[1, 2, 4] == metric(patch_head(model, clean, corrupted, (1, 2), 4))
    assert by_pos.table().splitlines()[2].startswith("| layer 0, head 0 | ")
    program = ProgramModel(ProgramConfig(vocab_size=5, max_len=4, n_classes=3, n_layers=2,
                                         n_cat_heads=1, n_num_heads=1))
    assert [[c for _, c in layer] for layer in program.heads()] == \
        [["cat head 0", "num head 0"], ["cat head 0", "num head 0"]]

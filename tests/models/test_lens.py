"""The TransformerLens bridge: a tpcore Transformer as a TransformerLens model computes the same
logits and activations at every hook point the two share (to 1e-5 in float32), a native
TransformerLens model read back computes what it did, and what either side cannot express is
refused in one line naming the component. The checks against TransformerLens run where the
``lens`` extra is installed; the weight layout and the refusals are checked everywhere."""

import importlib.util
import re

import numpy as np
import pytest

from tpcore.backend import asarray, to_host
from tpcore.errors import TpcoreError
from tpcore.models.lens import from_lens, lens_config, lens_weights, to_lens
from tpcore.models.transformer import Transformer, TransformerConfig

HAS_LENS = importlib.util.find_spec("transformer_lens") is not None
needs_lens = pytest.mark.skipif(not HAS_LENS, reason="needs the lens extra "
                                "(pip install 'tpcore[lens]': torch and transformer-lens)")
CONFIGS = {"pre-LN GELU": {}, "causal ReLU": {"causal": True, "activation": "relu"},
           "attention only, no LN": {"attn_only": True, "layer_norm": "none"},
           "sinusoidal, 5 classes": {"positions": "sinusoidal", "n_classes": 5}}
NOT_IN_BRIDGE = {"hook_result"}
"""Recorded by tpcore only: TransformerLens 4.3's native bridge computes no per-head results."""
BRIDGE_NAMES = {"hook_normalized": "hook_out"}
"""TransformerLens 4.3's bridge records a LayerNorm's ``hook_normalized`` before its gain and
bias (HookedTransformer after them, as tpcore does); the normalised output is its ``hook_out``."""


def _model(dtype="float32", **kw):
    """A small model whose LayerNorm gains and biases (ones and zeros at first) and other biases
    (zeros) are not at their initial values."""
    model = Transformer(TransformerConfig(vocab_size=7, max_len=6, d_model=16, n_layers=2,
                                          n_heads=4, d_mlp=32, seed=1, dtype=dtype, **kw))
    rng = np.random.default_rng(0)
    for param in model.parameters():
        if param.data.ndim == 1:
            param.data[...] = asarray(to_host(param.data) + rng.normal(0, 0.3, param.data.shape)
                                      .astype(dtype))
    return model


def test_weights_in_transformer_lens_layout():
    model = _model()
    w = lens_weights(model)
    assert w["blocks.1.attn.W_Q"].shape == (4, 16, 4) and w["blocks.0.attn.W_O"].shape == (4, 4, 16)
    assert w["blocks.0.mlp.W_in"].shape == (16, 32) and w["unembed.W_U"].shape == (16, 7)
    np.testing.assert_array_equal(w["blocks.1.attn.W_K"], to_host(model.W_K)[1])
    np.testing.assert_array_equal(w["ln_final.w"], to_host(model.ln_f.gamma.data))
    assert len(w) == 2 + 2 * (8 + 4 + 4) + 2 + 2
    cfg = lens_config(model.config)
    assert (cfg["act_fn"], cfg["normalization_type"], cfg["attention_dir"], cfg["n_ctx"]) == \
        ("gelu_new", "LN", "bidirectional", 6)


@pytest.mark.parametrize("kw, component", [({"layer_norm": "post"}, "layer_norm 'post'"),
                                           ({"readout": "mean"}, "readout 'mean'")])
def test_a_model_transformer_lens_cannot_express_is_refused(kw, component):
    with pytest.raises(TpcoreError, match=component) as err:
        lens_weights(_model(**kw))
    assert "\n" not in str(err.value)


@pytest.mark.skipif(HAS_LENS, reason="transformer-lens is installed here")
def test_without_the_extra_the_error_names_the_install():
    with pytest.raises(TpcoreError, match=r"pip install 'tpcore\[lens\]'"):
        to_lens(_model())


@needs_lens
@pytest.mark.parametrize("kw", CONFIGS.values(), ids=CONFIGS)
def test_every_shared_hook_point_agrees(kw):
    import torch

    model = _model(**kw)
    tokens = np.random.default_rng(1).integers(0, 7, (3, 6))
    logits, cache = model.run_with_cache(asarray(tokens))
    bridge = to_lens(model)
    with torch.no_grad():
        lens_logits, lens_cache = bridge.run_with_cache(torch.from_numpy(tokens))
    np.testing.assert_allclose(lens_logits.numpy(), to_host(logits), atol=1e-5, rtol=1e-5)
    compared = 0
    for name in cache:
        part, _, leaf = name.rpartition(".")
        theirs = f"{part}.{BRIDGE_NAMES.get(leaf, leaf)}" if part else name
        if leaf in NOT_IN_BRIDGE:
            assert name not in lens_cache
            continue
        if leaf == "hook_attn_scores":
            # the bridge records the pattern there (its native attention returns no scores)
            np.testing.assert_allclose(lens_cache[name].numpy(),
                                       to_host(cache[f"{part}.hook_pattern"]), atol=1e-5)
            continue
        assert theirs in lens_cache, name
        np.testing.assert_allclose(lens_cache[theirs].numpy(), to_host(cache[name]), atol=1e-5,
                                   rtol=1e-5, err_msg=name)
        compared += 1
    assert compared == len(cache) - 2 * model.config.n_layers >= 12


@needs_lens
def test_float64_and_back():
    import torch

    model = _model("float64", causal=True)
    tokens = np.random.default_rng(2).integers(0, 7, (2, 6))
    bridge = to_lens(model)
    with torch.no_grad():
        theirs = bridge(torch.from_numpy(tokens)).numpy()
    np.testing.assert_allclose(theirs, to_host(model(asarray(tokens))), atol=1e-12, rtol=0)
    back = from_lens(bridge)
    assert back.config.causal and back.config.dtype == "float64"
    for a, b in zip(back.parameters(), model.parameters()):
        np.testing.assert_array_equal(to_host(a.data), to_host(b.data))


@needs_lens
def test_a_native_transformer_lens_model_is_read():
    import torch
    from transformer_lens.model_bridge.sources.native import boot

    base = {"d_model": 16, "n_layers": 2, "n_heads": 2, "d_head": 8, "d_mlp": 24, "n_ctx": 5,
            "d_vocab": 9, "d_vocab_out": 4, "act_fn": "relu", "normalization_type": "LN",
            "attention_dir": "causal", "seed": 3}
    bridge = boot(base)
    tokens = np.random.default_rng(3).integers(0, 9, (4, 5))
    with torch.no_grad():
        theirs = bridge(torch.from_numpy(tokens)).numpy()
    model = from_lens(bridge)
    np.testing.assert_allclose(to_host(model(asarray(tokens))), theirs, atol=1e-5, rtol=1e-5)
    for change, component in (({"act_fn": "gelu"}, "act_fn 'gelu'"),
                              ({"normalization_type": "RMS"}, "normalization_type 'RMS'"),
                              ({"d_head": 4}, "d_head 4")):
        with pytest.raises(TpcoreError, match=component) as err:
            from_lens(boot({**base, **change}))
        assert "\n" not in str(err.value)


@needs_lens
def test_the_docs_example_runs(monkeypatch):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "interpretability.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", page, flags=re.M | re.S)
    block = next(b for b in blocks if "to_lens" in b)
    monkeypatch.chdir(root)
    lists = np.random.default_rng(4).integers(0, 10, (3, 10))
    scope = {"lists": lists, "lengths": np.array([10, 4, 7])}
    exec(compile(block, "interpretability.md", "exec"), scope)
    ours = to_host(scope["model"](asarray(scope["batch"]["tokens"]),
                                  pad=asarray(scope["batch"]["pad"])))
    keep = ~scope["batch"]["pad"]
    gap = np.abs(scope["logits"].detach().numpy() - ours)[keep].max() / np.abs(ours).max()
    assert gap < 1e-5 and tuple(scope["ov"].shape) == (56, 56)
    assert type(scope["again"]).__name__ == "Transformer"

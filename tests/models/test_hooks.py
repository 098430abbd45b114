"""Caches, hooks, patching and ablation on the standard transformer and the Transformer Program
model: stable names, cached values equal to the forward's, identity hooks that change nothing,
ablation and patching that change what they should, float64 gradchecks with hooks active."""

import copy
import re
from pathlib import Path

import numpy as np
import pytest

from tpcore import dispatch
from tpcore.backend import asarray, to_host
from tpcore.backend import rng as make_rng
from tpcore.errors import TpcoreError
from tpcore.models.counting import CountingConfig, CountingProgramModel
from tpcore.models.hooks import (
    Edit,
    ablate_head,
    edit_hook,
    patch,
    patch_head,
    patch_sweep,
    replace,
    scale,
)
from tpcore.models.program import ProgramConfig, ProgramModel
from tpcore.models.transformer import HOOK_AXES, Transformer, TransformerConfig
from tpcore.nn.gradcheck import assert_gradients, random_like

B, N = 3, 5
VARIANTS = [
    dict(layer_norm="pre", causal=True),
    dict(layer_norm="post", positions="sinusoidal"),
    dict(layer_norm="none", attn_only=True),
]


@pytest.fixture(autouse=True)
def _reference_path(monkeypatch):
    """The NumPy references throughout: a hooked run always takes them, so the exact equalities
    below compare like with like (the fused kernels of an unhooked run agree to rounding:
    tests/kernels/test_kernels_nn.py)."""
    monkeypatch.setattr(dispatch, "_kernels", False)


def _transformer(dtype="float64", **options):
    return Transformer(TransformerConfig(**(dict(vocab_size=6, max_len=N, d_model=8, n_layers=2,
                                                 n_heads=2, d_mlp=12, n_classes=4, seed=2,
                                                 dtype=dtype) | options)))


def _program(**kw):
    base = dict(vocab_size=5, max_len=N, n_classes=4, n_layers=2, n_cat_heads=2, n_num_heads=1,
                n_cat_mlps=1, n_num_mlps=1, d_mlp=7, seed=3)
    return ProgramModel(ProgramConfig(**(base | kw))).astype(np.float64)


def _tokens(seed, v=5):
    return asarray(np.random.default_rng(seed).integers(0, v, (B, N)))


def _pad():
    pad = np.zeros((B, N), bool)
    pad[1, 3:] = True
    return asarray(pad)


def _eq(a, b):
    return np.array_equal(to_host(a), to_host(b))


def _close(a, b, **tolerances):
    return np.allclose(to_host(a), to_host(b), **tolerances)


def _grads(model, logits, g):
    model.zero_grad()
    model.backward(g)
    return {name: p.grad for name, p in model.named_parameters()}


def _gradcheck(model, run, tol=1e-6, max_entries=30):
    """Finite differences of ``sum(run() * g)`` against ``backward(g)`` for every parameter."""
    g = random_like(run())
    grads = _grads(model, run(), g)
    for name, p in model.named_parameters():
        def f(a, p=p):
            p.data = a
            return float((run() * g).sum())
        try:
            assert_gradients(f, [p.data], [grads[name]], tol=tol, max_entries=max_entries)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


# ---------------------------------------------------------------------- names

def test_transformer_names_are_transformerlens_names():
    model = _transformer(n_layers=1)
    block = ["hook_resid_pre", "ln1.hook_normalized", "attn.hook_q", "attn.hook_k",
             "attn.hook_v", "attn.hook_attn_scores", "attn.hook_pattern", "attn.hook_z",
             "attn.hook_result", "hook_attn_out", "hook_resid_mid", "ln2.hook_normalized",
             "mlp.hook_pre", "mlp.hook_post", "hook_mlp_out", "hook_resid_post"]
    assert model.hook_names() == (["hook_embed", "hook_pos_embed"]
                                  + [f"blocks.0.{n}" for n in block]
                                  + ["ln_final.hook_normalized"])
    assert model.hook_name("pattern", 0) == "blocks.0.attn.hook_pattern"
    assert model.hook_name("result", 0) == "blocks.0.attn.hook_result"
    assert model.hook_name("resid_post", 0) == "blocks.0.hook_resid_post"
    assert model.hook_name("pre", 0) == "blocks.0.mlp.hook_pre"
    assert model.hook_name("ln2", 0) == "blocks.0.ln2.hook_normalized"
    assert model.hook_name("embed") == "hook_embed"
    assert model.hook_name("ln_final") == "ln_final.hook_normalized"
    with pytest.raises(TpcoreError, match="blocks.1.attn.hook_pattern"):
        model.hook_name("pattern", 1)


@pytest.mark.parametrize("options", VARIANTS)
def test_transformer_cache_is_complete_and_shaped_by_its_axes(options):
    model = _transformer(**options)
    _, cache = model.run_with_cache(_tokens(0))
    assert cache.names() == model.hook_names()
    sizes = dict(batch=B, pos=N, query_pos=N, key_pos=N, head=2, d_head=4, d_model=8, d_mlp=12)
    for name in cache:
        assert cache[name].shape == tuple(sizes[a] for a in model.hook_axes(name)), name


def test_program_names_are_the_program_names():
    model = _program(n_layers=1, n_cat_heads=2, n_num_heads=1)
    assert model.hook_names() == [
        "tokens", "positions", "ones", "attn_0_0.pattern", "attn_0_1.pattern",
        "num_attn_0_0.pattern", "attn_0_0_outputs", "attn_0_1_outputs", "num_attn_0_0_outputs",
        "mlp_0_0_outputs", "num_mlp_0_0_outputs"]
    assert model.hook_name("pattern", "attn_0_1") == "attn_0_1.pattern"
    assert model.head_output("num_attn_0_0") == ("num_attn_0_0_outputs", {})
    with pytest.raises(TpcoreError, match="head 'mlp_0_0' does not exist"):
        model.head_output("mlp_0_0")


@pytest.mark.parametrize("model", [
    _program(), _program(causal=True, n_embed_vars=2, k=3),
    CountingProgramModel(CountingConfig(vocab_size=5, max_len=N, n_classes=4, n_layers=2,
                                        n_cat_heads=1, n_num_heads=1, prefix_counts=True,
                                        experts=True)).astype(np.float64)])
def test_program_cache_is_complete_and_equals_the_stream(model):
    logits, cache = model.run_with_cache(_tokens(0), pad=_pad())
    assert cache.names() == model.hook_names()
    assert _eq(logits, model.forward(_tokens(0), pad=_pad()))
    x, xn = model.cache["x"], model.cache["xn"]
    d = model.config.width
    for v in model.variables:
        stream = x if v.kind == "categorical" else xn
        assert _eq(cache[v.name], stream[v.slot]), v.name
    sizes = dict(batch=B, pos=N, query_pos=N, key_pos=N, value=d)
    for name in cache:
        assert cache[name].shape == tuple(sizes[a] for a in model.hook_axes(name)), name


def test_program_patterns_compute_the_head_outputs():
    """Discretely, each head's output is its pattern applied to its value variable."""
    model = _program()
    _, cache = model.run_with_cache(_tokens(1), pad=_pad())
    for head in model.discrete().modules:
        if not hasattr(head, "predicate"):
            continue
        pattern, value = cache[head.name + ".pattern"], cache[head.value]
        if head.kind == "categorical":
            assert _eq(pattern.sum(-1), np.ones((B, N)))
            assert _close(cache[head.output], pattern @ value)
        else:
            assert _close(cache[head.output], (pattern @ value[..., None])[..., 0])


def test_unknown_names_are_refused_with_suggestions():
    model = _transformer()
    with pytest.raises(TpcoreError, match="did you mean blocks.0.attn.hook_pattern"):
        model.run_with_hooks(_tokens(0), {"blocks.0.attn.hook_patern": lambda v, n: None})
    with pytest.raises(TpcoreError, match="'attn_9_0.pattern' is not a hook point"):
        _program().run_with_cache(_tokens(0), names=["attn_9_0.pattern"])
    _, cache = model.run_with_cache(_tokens(0), names=["hook_embed"])
    assert cache.names() == ["hook_embed"]
    with pytest.raises(KeyError, match="not in this cache"):
        cache["pattern", 0]


# ---------------------------------------------------------------------- values

def test_transformer_cache_values_are_the_forward_values():
    model = _transformer(dtype="float32", n_layers=2)
    tokens = _tokens(3)
    logits, cache = model.run_with_cache(tokens, pad=_pad())
    assert _eq(logits, model.forward(tokens, pad=_pad()))
    for layer in range(2):
        assert _eq(cache["pattern", layer], model.cache["attn"][layer])
        assert _eq(cache["resid_pre", layer], model.cache["resid"][layer])
        assert _eq(cache["resid_post", layer], model.cache["resid"][layer + 1])
        attn = model.blocks[layer].attn
        z = cache["z", layer].reshape(B, N, -1)
        assert _close(cache["attn_out", layer], z @ attn.wo.data + attn.bo.data, atol=1e-5)
        assert _close(cache["resid_mid", layer],
                           cache["resid_pre", layer] + cache["attn_out", layer])
    assert _eq(cache["hook_embed"], model.tok_emb.data[tokens])
    assert _eq(cache["resid_pre", 0], cache["embed", None] + cache["pos_embed", None])


@pytest.mark.parametrize("options", VARIANTS + [dict(dropout=0.3)])
def test_transformer_identity_hooks_change_nothing(options):
    """Hooks returning their input (or None), with a cache, give bit-identical logits and
    gradients."""
    model = _transformer(**options)
    tokens, pad = _tokens(4), _pad()
    run = dict(pad=pad, rng=make_rng(5) if options.get("dropout") else None)
    logits = model.forward(tokens, **run)
    g = random_like(logits)
    plain = _grads(model, logits, g)
    names = model.hook_names()
    fns = {n: (lambda v, name: v) if i % 2 else (lambda v, name: None)
           for i, n in enumerate(names)}
    if options.get("dropout"):
        run["rng"] = make_rng(5)
    hooked, _ = model.run_with_cache(tokens, hooks=fns, **run)
    assert _eq(hooked, logits)
    grads = _grads(model, hooked, g)
    assert all(_eq(grads[k], plain[k]) for k in plain)


def test_program_identity_hooks_change_nothing():
    model = _program(n_embed_vars=2, k=3)
    tokens, pad = _tokens(4), _pad()
    logits = model.forward(tokens, pad, rng=make_rng(7), tau=1.5)
    g = random_like(logits)
    plain = _grads(model, logits, g)
    fns = {n: lambda v, name: v for n in model.hook_names()}
    hooked, _ = model.run_with_cache(tokens, hooks=fns, pad=pad, rng=make_rng(7),
                                     tau=1.5)
    assert _eq(hooked, logits)
    grads = _grads(model, hooked, g)
    assert all(_eq(grads[k], plain[k]) for k in plain)


# ---------------------------------------------------------------------- ablation

@pytest.mark.parametrize("layer,head", [(0, 1), (1, 0)])
def test_head_ablation_is_zeroing_its_rows_of_wo(layer, head):
    model = _transformer(causal=True)
    tokens = _tokens(5)
    ablated = ablate_head(model, tokens, (layer, head))
    g = random_like(ablated)
    grads = _grads(model, ablated, g)
    other = copy.deepcopy(model)
    other.blocks[layer].attn.wo.data[4 * head:4 * head + 4] = 0.0
    expected = other.forward(tokens)
    assert _close(ablated, expected, rtol=0, atol=1e-12)
    assert not _close(ablated, model.forward(tokens))
    other_grads = _grads(other, expected, g)
    wo = f"blocks.{layer}.attn.wo"
    for name in grads:
        if name != wo:
            assert _close(grads[name], other_grads[name], rtol=0, atol=1e-12), name
    assert not grads[wo][4 * head:4 * head + 4].any()
    cols = slice(4 * head, 4 * head + 4)
    assert not grads[f"blocks.{layer}.attn.wq"][:, cols].any()


def test_program_head_ablation_is_zeroing_its_classifier_rows():
    """Without MLPs, a last-layer head's output is read by the classifier alone: ablating it
    equals zeroing its classifier weights."""
    model = _program(n_cat_mlps=0, n_num_mlps=0)
    tokens, pad = _tokens(6), _pad()
    ablated, cache = model.run_with_cache(tokens, pad=pad,
                                          hooks={"attn_1_1_outputs": replace(0.0)})
    assert _eq(ablated, ablate_head(model, tokens, "attn_1_1", pad=pad))
    assert not cache["attn_1_1_outputs"].any()
    slot = next(v.slot for v in model.variables if v.name == "attn_1_1_outputs")
    d = model.config.width
    other = copy.deepcopy(model)
    other.w_out.data[slot * d:(slot + 1) * d] = 0.0
    assert _close(ablated, other.forward(tokens, pad), rtol=0, atol=1e-12)
    assert not _close(ablated, model.forward(tokens, pad))
    logits = model.run_with_hooks(tokens, {"attn_1_1_outputs": replace(0.0)}, pad=pad,
                                  rng=make_rng(0), tau=1.0)
    grads = _grads(model, logits, random_like(logits))
    assert not grads["layers.1.cat_pred"][1].any() and grads["layers.1.cat_pred"][0].any()


def test_ablation_at_some_positions_leaves_earlier_ones_of_a_causal_model():
    model = _transformer(causal=True)
    tokens = _tokens(7)
    clean = model.forward(tokens)
    ablated = ablate_head(model, tokens, (0, 0), positions=[2, 4])
    assert _eq(ablated[:, :2], clean[:, :2])
    assert not _close(ablated[:, 2], clean[:, 2])


# ---------------------------------------------------------------------- patching

@pytest.mark.parametrize("options", VARIANTS)
def test_patching_every_layer_at_every_position_recovers_the_clean_logits(options):
    model = _transformer(**options)
    clean, corrupted = _tokens(8, 6), _tokens(9, 6)
    want = model.forward(clean)
    assert not _close(want, model.forward(corrupted))
    for layer in range(2):
        for kind in ("resid_pre", "resid_post"):
            got = patch(model, clean, corrupted, model.hook_name(kind, layer))
            assert _eq(got, want), (kind, layer)


def test_program_patching_the_stream_after_each_layer_recovers_the_clean_logits():
    model = _program()
    clean, corrupted = _tokens(8), _tokens(9)
    want = model.forward(clean)
    _, cache = model.run_with_cache(clean)
    stream = [v.name for v in model.variables if v.source is None]
    for li in range(model.config.n_layers):
        stream += [v.name for v in model.variables
                   if v.source and v.source.split("_")[-2] == str(li)]
        hooks = {name: replace(cache[name]) for name in stream}
        assert _eq(model.run_with_hooks(corrupted, hooks), want), li
    assert not _close(model.forward(corrupted), want)


def test_patch_head_takes_that_head_and_position_from_the_clean_run():
    model = _transformer(causal=True)
    clean, corrupted = _tokens(10, 6), _tokens(11, 6)
    _, c_clean = model.run_with_cache(clean)
    _, c_bad = model.run_with_cache(corrupted)
    logits = patch_head(model, clean, corrupted, (1, 0), positions=3)
    _, c_patched = model.run_with_cache(
        corrupted, hooks={"blocks.1.attn.hook_z": edit_hook(model, "blocks.1.attn.hook_z", 3, 0,
                                                            values=c_clean["z", 1])})
    z = c_patched["z", 1]
    assert _eq(z[:, 3, 0], c_clean["z", 1][:, 3, 0])
    assert _eq(np.delete(to_host(z), 3, axis=1), np.delete(to_host(c_bad["z", 1]), 3, axis=1))
    assert _eq(z[:, 3, 1], c_bad["z", 1][:, 3, 1])
    bad = model.forward(corrupted)
    assert _eq(logits[:, :3], bad[:, :3]) and not _close(logits[:, 3], bad[:, 3])


def test_program_patch_head_takes_its_output_variable_from_the_clean_run():
    model = _program()
    clean, corrupted = _tokens(1), _tokens(2)
    _, c_clean = model.run_with_cache(clean)
    logits = patch_head(model, clean, corrupted, "attn_0_1")
    hooks = {"attn_0_1_outputs": replace(c_clean["attn_0_1_outputs"])}
    patched, cache = model.run_with_cache(corrupted, hooks=hooks)
    assert _eq(logits, patched)
    assert _eq(cache["attn_0_1_outputs"], c_clean["attn_0_1_outputs"])
    assert not _eq(c_clean["attn_0_1_outputs"],
                              model.run_with_cache(corrupted)[1]["attn_0_1_outputs"])


def test_patch_sweep_finds_where_the_information_flows():
    """Causal model: patching the input stream at position ``p`` moves the logits at ``p`` and
    after it, never before; patching the last layer's output moves those at ``p`` alone."""
    model = _transformer(causal=True)
    clean, corrupted = _tokens(12, 6), _tokens(13, 6)
    bad = model.forward(corrupted)
    names = ["blocks.0.hook_resid_pre", "blocks.1.hook_resid_post"]
    for t in range(N):
        grid = patch_sweep(model, clean, corrupted, names,
                           lambda logits, t=t: float(abs(logits[:, t] - bad[:, t]).max()))
        assert grid.shape == (2, N)
        assert (grid[:, t + 1:] == 0).all() and (grid[0, :t + 1] > 0).all()
        assert (grid[1, :t] == 0).all() and grid[1, t] > 0    # after the last layer


def test_patching_refuses_bad_selections():
    model = _transformer()
    with pytest.raises(TpcoreError, match="same shape"):
        patch(model, _tokens(0), _tokens(0)[:, :3], "hook_embed")
    with pytest.raises(TpcoreError, match="no axis for heads"):
        patch(model, _tokens(0), _tokens(1), "hook_embed", heads=0)
    with pytest.raises(TpcoreError, match="positions 9"):
        patch(model, _tokens(0), _tokens(1), "hook_embed", positions=9)
    with pytest.raises(TpcoreError, match=r"head \(2, 0\) does not exist"):
        ablate_head(model, _tokens(0), (2, 0))


# ---------------------------------------------------------------------- gradients

@pytest.mark.parametrize("options", VARIANTS)
def test_transformer_gradients_with_hooks(options):
    """Ablation, patching from another input, scaling and an affine edit at once: every
    parameter's gradient matches finite differences of the edited model."""
    model = _transformer(**options)
    tokens, pad = _tokens(14, 6), _pad()
    _, other = model.run_with_cache(_tokens(15, 6), pad=pad)
    last = "blocks.1.hook_resid_post"
    hooks = {
        "blocks.0.attn.hook_z": edit_hook(model, "blocks.0.attn.hook_z", heads=1),
        "blocks.1.attn.hook_pattern": edit_hook(model, "blocks.1.attn.hook_pattern", [1, 3], 0,
                                                factor=0.5),
        "blocks.0.attn.hook_q": replace(other["q", 0], (slice(None), 2)),
        "blocks.1.attn.hook_attn_scores": lambda s, name: Edit(1.5, 0.1),
        "hook_pos_embed": scale(2.0, (slice(None), 0)),
        last: edit_hook(model, last, positions=[0, 4], values=other[last]),
    }
    if not options.get("attn_only"):
        hooks["blocks.1.mlp.hook_pre"] = scale(-0.5, (slice(None), slice(None), slice(0, 6)))
        hooks["blocks.0.hook_mlp_out"] = replace(other["mlp_out", 0], (slice(None), 1))
    _gradcheck(model, lambda: model.run_with_hooks(tokens, hooks, pad=pad))


def test_head_results_sum_to_the_attention_output_and_pass_gradients():
    """``hook_result`` is each head's ``z_h W_O[h]``, summing with ``b_O`` to ``hook_attn_out``;
    computed only when asked for; edited, every gradient matches finite differences."""
    model = _transformer()
    tokens, pad = _tokens(16, 6), _pad()
    logits, cache = model.run_with_cache(tokens, pad=pad)
    result, z = to_host(cache["result", 1]), to_host(cache["z", 1])
    assert result.shape == (B, N, 2, 8)
    np.testing.assert_allclose(result, np.einsum("bnhe,hed->bnhd", z, to_host(model.W_O)[1]),
                               atol=1e-12)
    np.testing.assert_allclose(result.sum(2) + to_host(model.b_O)[1],
                               to_host(cache["attn_out", 1]), atol=1e-12)
    _, some = model.run_with_cache(tokens, names=["blocks.0.attn.hook_z"], pad=pad)
    assert list(some) == ["blocks.0.attn.hook_z"]
    assert _close(model.forward(tokens, pad=pad), logits, rtol=0, atol=1e-12)
    hooks = {"blocks.0.attn.hook_result": edit_hook(model, "blocks.0.attn.hook_result", heads=1,
                                                    factor=0.5),
             "blocks.1.attn.hook_result": lambda r, name: Edit(1.0, 0.1)}
    _gradcheck(model, lambda: model.run_with_hooks(tokens, hooks, pad=pad))


@pytest.mark.parametrize("kw", [{}, {"causal": True, "n_embed_vars": 2, "k": 3}])
def test_program_gradients_with_hooks(kw):
    model = _program(**kw)
    tokens, pad = _tokens(16), _pad()
    train = dict(pad=pad, tau=1.5)
    _, other = model.run_with_cache(_tokens(17), rng=make_rng(8), **train)
    hooks = {
        "attn_0_0_outputs": edit_hook(model, "attn_0_0_outputs", positions=[1, 2]),
        "attn_1_0.pattern": replace(other["attn_1_0.pattern"]),
        "num_attn_0_0.pattern": scale(0.5, (slice(None), slice(2, None))),
        "num_attn_0_0_outputs": edit_hook(model, "num_attn_0_0_outputs", positions=3,
                                          values=other["num_attn_0_0_outputs"]),
        "mlp_0_0_outputs": lambda v, name: Edit(2.0, 0.0),
        "positions": scale(0.5),
    }
    _gradcheck(model, lambda: model.run_with_hooks(tokens, hooks, rng=make_rng(7),
                                                   **train), tol=1e-5, max_entries=20)


def test_counting_model_gradients_with_hooks():
    model = CountingProgramModel(CountingConfig(
        vocab_size=5, max_len=N, n_classes=4, n_layers=2, n_cat_heads=1, n_num_heads=1,
        n_cat_mlps=1, n_num_mlps=1, d_mlp=6, prefix_counts=True, experts=True, seed=1)
    ).astype(np.float64)
    hooks = {"expert_count": scale(3.0, (slice(None), slice(0, 2))),
             "prefix_count_1": replace(0.0), "attn_1_0_outputs": scale(0.5)}
    _gradcheck(model, lambda: model.run_with_hooks(_tokens(18), hooks, pad=_pad(),
                                                   rng=make_rng(3), tau=1.5),
               tol=1e-5, max_entries=20)


# ---------------------------------------------------------------------- docs

DOCS = Path(__file__).resolve().parents[2] / "docs" / "interpretability.md"


def _docs_blocks():
    return re.findall(r"^```python\n(.*?)^```", DOCS.read_text(encoding="utf-8"),
                      flags=re.M | re.S)


def test_docs_example_trains_reads_runs_and_patches_in_under_15_lines(capsys):
    """The first example of docs/interpretability.md, on a one-epoch budget."""
    block = _docs_blocks()[0]
    assert len([line for line in block.splitlines() if line.strip()]) < 15
    small = block.replace("epochs=100, n_samples=5000", "epochs=1, n_samples=2000")
    assert small != block
    scope = {}
    exec(compile(small, str(DOCS), "exec"), scope)
    assert "def run(tokens)" in capsys.readouterr().out
    assert scope["patched"].shape == scope["logits"].shape
    assert "num_attn_0_2.pattern" in scope["cache"]


def test_docs_transformer_example_runs():
    model = _transformer()
    scope = {"model": model, "tokens": _tokens(0), "corrupted": _tokens(1)}
    exec(compile(_docs_blocks()[1], str(DOCS), "exec"), scope)
    assert _eq(scope["patched"], model.forward(_tokens(0)))


def test_docs_name_table_is_the_transformers():
    section = DOCS.read_text(encoding="utf-8").split("### Standard transformer")[1]
    section = section.split("###")[0]
    rows = dict(re.findall(r"^\| `([^`]+)` \| ([a-z_ ]+) \|", section, flags=re.M))
    model_level = ("hook_embed", "hook_pos_embed", "ln_final.hook_normalized")
    assert rows == {(name if name in model_level else f"blocks.{{l}}.{name}"): axes
                    for name, axes in HOOK_AXES.items()}

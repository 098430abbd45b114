"""The fused kernels of ``tpcore.kernels.nn`` against their NumPy references (``tpcore.nn``):
outputs and caches equal in float64 (and close in float32), either backward on either forward's
cache, a transformer gradcheck with the kernels running (spied on), and the dispatch rules (off
switch, hooks, other dtypes). Helpers: ``tests/kernels/conftest.py``."""

import numpy as np
import pytest
from tpcore.kernels import nn as K

from tpcore.dispatch import use_kernels
from tpcore.models.transformer import Transformer, TransformerConfig
from tpcore.nn import attention as A
from tpcore.nn import functional as F
from tpcore.nn import optim as O
from tpcore.nn import relax as R
from tpcore.nn.gradcheck import assert_gradients, random_like
from tpcore.nn.hookpoints import NO_HOOKS, Hooks

pytestmark = pytest.mark.host_only("numba kernels run on host NumPy arrays")

DTYPES = [np.float64, np.float32]


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm(dtype, check_pair, rng):
    x = rng.standard_normal((3, 5, 16)).astype(dtype) * 3 + 1
    gamma, beta = (rng.standard_normal(16).astype(dtype) for _ in range(2))
    check_pair(F.layer_norm_forward, F.layer_norm_backward, K.layer_norm_forward,
               K.layer_norm_backward, (x, gamma, beta, 1e-5), dtype, rng)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu(dtype, reference, assert_same, rng):
    x = (rng.standard_normal((7, 300)) * 4).astype(dtype)
    y_r, d_r = reference(F.gelu_forward, x)
    y_k, d_k = K.gelu_forward(x)
    assert_same(y_r, y_k, dtype)
    assert_same(d_r, d_k, dtype)


MASKS = ["none", "causal", "padded"]


def _mask(kind, b, n, rng):
    if kind == "none":
        return None
    pad = rng.random((b, n)) < 0.3 if kind == "padded" else None
    return A.attention_mask(n, kind != "none", pad, xp=np)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", MASKS)
def test_multi_head_attention(dtype, kind, check_pair, rng):
    b, n, d, h = 3, 7, 12, 3
    x = rng.standard_normal((b, n, d)).astype(dtype)
    params = {f"{w}{c}": rng.standard_normal((d, d) if w == "w" else d).astype(dtype)
              for w in "wb" for c in "qkvo"}
    check_pair(A.mha_forward, A.mha_backward, K.mha_forward, K.mha_backward,
               (x, params, h, _mask(kind, b, n, rng), NO_HOOKS), dtype, rng)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("noise", [True, False])
def test_gumbel_softmax_and_softmax_backward(dtype, noise, check_pair, rng):
    logits = rng.standard_normal((4, 6, 9)).astype(dtype) * 3
    g = rng.gumbel(size=logits.shape).astype(dtype) if noise else None
    check_pair(R.gumbel_softmax_forward, R.gumbel_softmax_backward, K.gumbel_softmax_forward,
               lambda dy, cache: K.softmax_backward(dy, cache), (logits, g, 0.3), dtype, rng)


@pytest.mark.parametrize("dtype", DTYPES)
def test_log_softmax(dtype, check_pair, rng):
    x = (rng.standard_normal((4, 6, 9)) * 5).astype(dtype)
    x[0, 0, :3] = -1e30  # masked classes, as the program model's
    check_pair(F.log_softmax_forward, F.log_softmax_backward, K.log_softmax_forward,
               K.log_softmax_backward, (x, -1), dtype, rng)


@pytest.mark.parametrize("dtype", DTYPES)
def test_adam_update(dtype, reference, assert_same, rng):
    w, g, m = (rng.standard_normal((5, 7)).astype(dtype) for _ in range(3))
    v = rng.random((5, 7)).astype(dtype)
    ref = [a.copy() for a in (w, m, v)]
    reference(O.adam_update, ref[0], g, ref[1], ref[2], 0.9, 0.999, 0.01, 1e-8)
    out = [a.copy() for a in (w, m, v)]
    K.adam_update(out[0], g[:, ::1], out[1], out[2], 0.9, 0.999, 0.01, 1e-8)
    assert_same(ref, out, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gumbel_noise(dtype, reference, assert_same, rng):
    u = rng.random(1000).astype(dtype)
    u[:2] = 0.0, 1.0
    assert_same(reference(R.gumbel_from_uniform, u.copy()), K.gumbel_from_uniform(u.copy()),
                dtype)


@pytest.mark.parametrize("size", [0, 1, 2, 7, 1000])
@pytest.mark.parametrize("held", [False, True])
def test_gumbel_fill_keeps_the_generators_stream(size, held, reference, assert_same):
    """The float32 kernel makes the generator's own uniforms from its 64-bit outputs: the same
    noise as the kernel's on ``rng.random``'s uniforms, the generator in the same state after,
    with and without a half draw held from an odd count before."""
    want_rng, got_rng = np.random.default_rng(5), np.random.default_rng(5)
    if held:
        for g in (want_rng, got_rng):
            g.random(3, dtype=np.float32)
    want = K.gumbel_from_uniform(want_rng.random(size, dtype=np.float32))
    np.testing.assert_array_equal(K.gumbel_fill(np.empty(size, np.float32), got_rng), want)
    np.testing.assert_array_equal(got_rng.random(5, dtype=np.float32),
                                  want_rng.random(5, dtype=np.float32))
    assert_same(reference(R.gumbel_noise, (size,), np.random.default_rng(5)),
                R.gumbel_noise((size,), np.random.default_rng(5)), np.float32)


def test_transformer_gradcheck_through_kernels(spies):
    cfg = TransformerConfig(vocab_size=5, max_len=5, d_model=8, n_layers=2, n_heads=2, d_mlp=12,
                            n_classes=3, layer_norm="pre", causal=True, dtype="float64")
    model = Transformer(cfg)
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 5, (3, 5))
    pad = np.zeros((3, 5), bool)
    pad[2, 3:] = True
    g = random_like(model.forward(tokens, pad))
    model.zero_grad()
    model.backward(g)
    names, params = zip(*model.named_parameters())

    def f(*arrays):
        for p, a in zip(params, arrays):
            p.data = a
        return float((model.forward(tokens, pad) * g).sum())

    assert_gradients(f, [p.data for p in params], [p.grad for p in params], max_entries=40)
    for name in ("mha_forward", "mha_backward", "layer_norm_forward", "layer_norm_backward",
                 "gelu_forward"):
        assert spies.get(name, 0) >= 2, name


def test_dispatch_rules(spies):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 8))
    gamma, beta = np.ones(8), np.zeros(8)
    F.layer_norm_forward(x, gamma, beta)
    assert spies["layer_norm_forward"] == 1
    use_kernels(False)
    F.layer_norm_forward(x, gamma, beta)
    use_kernels(True)
    F.layer_norm_forward(x.astype(np.float16), gamma, beta)
    assert spies["layer_norm_forward"] == 1  # off, then float16: the reference both times
    # an active hook needs the reference path, which exposes every activation
    params = {f"w{c}": rng.standard_normal((8, 8)) for c in "qkvo"}
    cache: dict = {}
    A.mha_forward(x, params, 2, None, Hooks(cache=cache))
    assert "hook_pattern" in cache and "mha_forward" not in spies
    A.mha_forward(x, params, 2, None, NO_HOOKS)
    assert spies["mha_forward"] == 1


def test_hooked_run_agrees_with_the_kernels_to_rounding(spies):
    """A run with hooks takes the references; without, the kernels: same logits to rounding."""
    cfg = TransformerConfig(vocab_size=6, max_len=5, d_model=8, n_layers=2, n_heads=2, d_mlp=12,
                            causal=True, dtype="float32")
    model = Transformer(cfg)
    tokens = np.random.default_rng(0).integers(0, 6, (3, 5))
    plain = model.forward(tokens)
    hooked, cache = model.run_with_cache(tokens)
    assert spies["mha_forward"] == 2 and len(cache.names()) > 10
    np.testing.assert_allclose(hooked, plain, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear(dtype, check_pair, rng):
    x = rng.standard_normal((3, 5, 7)).astype(dtype)
    w, b = rng.standard_normal((7, 4)).astype(dtype), rng.standard_normal(4).astype(dtype)
    for bias in (b, None):
        check_pair(F.linear_forward, F.linear_backward, K.linear_forward, K.linear_backward,
                   (x, w, bias), dtype, rng)

"""The fused kernels (tpcore.kernels.nn, tpcore.kernels.program_model) against their NumPy
references: outputs and caches equal in float64 (and close in float32), either backward on
either forward's cache, the float32 elementary functions against NumPy, whole-model gradchecks
with the kernels running (spied on), and the dispatch rules (off switch, hooks, other dtypes)."""

import numpy as np
import pytest
from tpcore.kernels import nn as K
from tpcore.kernels import program_model as KP

from tpcore import backend
from tpcore.backend import use_kernels
from tpcore.models.program import ProgramConfig, ProgramModel
from tpcore.models.program import ops as P
from tpcore.models.transformer import Transformer, TransformerConfig
from tpcore.nn import attention as A
from tpcore.nn import functional as F
from tpcore.nn import optim as O
from tpcore.nn import relax as R
from tpcore.nn.gradcheck import assert_gradients, assert_parameter_gradients, random_like
from tpcore.nn.hookpoints import NO_HOOKS, Hooks
from tpcore.nn.losses import cross_entropy_backward, cross_entropy_forward

pytestmark = pytest.mark.host_only("numba kernels run on host NumPy arrays")

TOL = {np.float64: 1e-11, np.float32: 2e-4}
"""Relative tolerance (to the largest entry) of kernel against reference, per dtype."""


def reference(fn, *args):
    """``fn`` with the kernels switched off (its NumPy path, and that of everything it calls)."""
    before = use_kernels()
    use_kernels(False)
    try:
        return fn(*args)
    finally:
        use_kernels(before)


def assert_same(a, b, dtype, what=""):
    """Equal trees of arrays (tuples, dicts) up to the dtype's tolerance; other leaves equal."""
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b), what
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, dtype, f"{what}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), what
        for k in a:
            assert_same(a[k], b[k], dtype, f"{what}[{k}]")
    elif isinstance(a, np.ndarray):
        assert a.shape == b.shape and a.dtype == b.dtype, what
        scale = max(1.0, float(np.abs(a.astype(np.float64)).max(initial=0)))
        err = float(np.abs(a.astype(np.float64) - b).max(initial=0)) / scale
        assert err <= TOL[dtype], f"{what}: relative error {err:.2e}"
    elif isinstance(a, float):
        assert abs(a - b) <= TOL[dtype] * max(1.0, abs(a)), what
    else:
        assert a is b or a == b, what


def check_pair(forward, backward, kernel_fwd, kernel_bwd, args, dtype, rng):
    """Forward outputs and caches equal; each backward equal on both caches."""
    out_r, cache_r = reference(forward, *args)
    out_k, cache_k = kernel_fwd(*args)
    assert_same(out_r, out_k, dtype, "forward")
    assert_same(cache_r, cache_k, dtype, "cache")
    first = out_r[0] if isinstance(out_r, tuple) else out_r
    dy = rng.standard_normal(first.shape).astype(dtype)
    grads_r = reference(backward, dy, cache_r)
    for cache in (cache_r, cache_k):
        assert_same(grads_r, kernel_bwd(dy, cache), dtype, "backward")
        assert_same(grads_r, reference(backward, dy, cache), dtype, "reference backward")


DTYPES = [np.float64, np.float32]


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm(dtype, rng):
    x = rng.standard_normal((3, 5, 16)).astype(dtype) * 3 + 1
    gamma, beta = (rng.standard_normal(16).astype(dtype) for _ in range(2))
    check_pair(F.layer_norm_forward, F.layer_norm_backward, K.layer_norm_forward,
               K.layer_norm_backward, (x, gamma, beta, 1e-5), dtype, rng)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu(dtype, rng):
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
def test_multi_head_attention(dtype, kind, rng):
    b, n, d, h = 3, 7, 12, 3
    x = rng.standard_normal((b, n, d)).astype(dtype)
    params = {f"{w}{c}": rng.standard_normal((d, d) if w == "w" else d).astype(dtype)
              for w in "wb" for c in "qkvo"}
    check_pair(A.mha_forward, A.mha_backward, K.mha_forward, K.mha_backward,
               (x, params, h, _mask(kind, b, n, rng), NO_HOOKS), dtype, rng)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("noise", [True, False])
def test_gumbel_softmax_and_softmax_backward(dtype, noise, rng):
    logits = rng.standard_normal((4, 6, 9)).astype(dtype) * 3
    g = rng.gumbel(size=logits.shape).astype(dtype) if noise else None
    check_pair(R.gumbel_softmax_forward, R.gumbel_softmax_backward, K.gumbel_softmax_forward,
               lambda dy, cache: K.softmax_backward(dy, cache), (logits, g, 0.3), dtype, rng)


@pytest.mark.parametrize("dtype", DTYPES)
def test_log_softmax(dtype, rng):
    x = (rng.standard_normal((4, 6, 9)) * 5).astype(dtype)
    x[0, 0, :3] = -1e30  # masked classes, as the program model's
    check_pair(F.log_softmax_forward, F.log_softmax_backward, K.log_softmax_forward,
               K.log_softmax_backward, (x, -1), dtype, rng)


@pytest.mark.parametrize("dtype", DTYPES)
def test_adam_update(dtype, rng):
    w, g, m = (rng.standard_normal((5, 7)).astype(dtype) for _ in range(3))
    v = rng.random((5, 7)).astype(dtype)
    ref = [a.copy() for a in (w, m, v)]
    reference(O.adam_update, ref[0], g, ref[1], ref[2], 0.9, 0.999, 0.01, 1e-8)
    out = [a.copy() for a in (w, m, v)]
    K.adam_update(out[0], g[:, ::1], out[1], out[2], 0.9, 0.999, 0.01, 1e-8)
    assert_same(ref, out, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gumbel_noise(dtype, rng):
    u = rng.random(1000).astype(dtype)
    u[:2] = 0.0, 1.0
    assert_same(reference(R.gumbel_from_uniform, u.copy()), K.gumbel_from_uniform(u.copy()),
                dtype)


@pytest.mark.parametrize("size", [0, 1, 2, 7, 1000])
@pytest.mark.parametrize("held", [False, True])
def test_gumbel_fill_keeps_the_generators_stream(size, held):
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


def _program_inputs(dtype, causal, padded, rng):
    h, b, n, d = 3, 4, 6, 6
    q, k, v = (rng.dirichlet(np.ones(d), (h, b, n)).astype(dtype) for _ in range(3))
    p = rng.dirichlet(np.ones(d), (h, d)).astype(dtype)
    keys = rng.random((b, n)) > 0.3 if padded else np.ones((1, n), bool)
    mask = keys[:, None, :]
    if causal:
        mask = mask & np.tril(np.ones((n, n), bool))[None]
    bias = P.masked_bias(P.closest_bias(n, dtype, np), mask)
    return q, k, v, p, mask, bias


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("causal", "padded", "noise"),
                         [(False, False, True), (True, True, True), (True, False, False)])
def test_categorical_attention(dtype, causal, padded, noise, rng):
    q, k, v, p, mask, bias = _program_inputs(dtype, causal, padded, rng)
    g = rng.gumbel(size=q.shape[:3] + (q.shape[2],)).astype(dtype) if noise else None
    check_pair(P.cat_attention_forward, P.cat_attention_backward, KP.cat_attention_forward,
               KP.cat_attention_backward, (q, k, v, p, mask, bias, g, 0.7, NO_HOOKS, ()),
               dtype, rng)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("i", [7, 2])
def test_program_mlp(dtype, i, rng):
    """Both kernel paths: the first layer through BLAS (7 inputs) and in one pass each way
    (2)."""
    g, t, d, k = 2, 30, 9, 5
    args = [rng.standard_normal(s).astype(dtype) for s in
            ((g, t, i), (g, i, d), (g, 1, d), (g, d, k), (g, 1, k), (g, t, k))]
    check_pair(P.mlp_forward, P.mlp_backward, KP.mlp_forward, KP.mlp_backward,
               (*args, 0.5), dtype, rng)


def test_elementary_float32_functions_match_numpy():
    numba = pytest.importorskip("numba")
    from tpcore.kernels.elementary import exp, log, tanh

    def apply(fn):
        @numba.njit
        def run(x, out):
            for i in range(x.shape[0]):
                out[i] = fn(x[i])
        return run

    rng = np.random.default_rng(0)
    cases = [(exp, np.exp, rng.uniform(-87, 88, 100_000)),
             (log, np.log, np.exp(rng.uniform(-80, 80, 100_000))),
             (tanh, np.tanh, rng.uniform(-12, 12, 100_000))]
    for fn, ref, x in cases:
        x32 = x.astype(np.float32)
        out = np.empty_like(x32)
        apply(fn)(x32, out)
        exact = ref(x32.astype(np.float64))
        ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
        assert np.max(np.abs(out - exact) / np.maximum(ulp, 1e-45)) <= 4, fn.__name__


@pytest.fixture
def spies(monkeypatch):
    """Count the kernel calls made through the dispatcher."""
    counts: dict[str, int] = {}
    for module in (K, KP):
        for name in ("mha_forward", "mha_backward", "layer_norm_forward", "layer_norm_backward",
                     "gelu_forward", "cat_attention_forward", "cat_attention_backward",
                     "mlp_forward", "mlp_backward", "gumbel_softmax_forward", "softmax_backward",
                     "num_attention_forward", "num_attention_backward", "log_softmax_forward",
                     "log_softmax_backward"):
            fn = getattr(module, name, None)
            if fn is None:
                continue

            def spy(*args, _fn=fn, _name=name):
                out = _fn(*args)
                if out is not NotImplemented:
                    counts[_name] = counts.get(_name, 0) + 1
                return out

            monkeypatch.setattr(module, name, spy)
    monkeypatch.setattr(backend, "_kernels", True)
    return counts


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


@pytest.mark.parametrize("causal", [True, False])
def test_program_model_gradcheck_through_kernels(spies, causal):
    cfg = ProgramConfig(vocab_size=5, max_len=6, n_classes=4, n_layers=2, n_cat_heads=2,
                        n_num_heads=1, n_cat_mlps=1, n_num_mlps=1, d_mlp=7, causal=causal,
                        seed=3)
    model = ProgramModel(cfg).astype(np.float64)
    rng = np.random.default_rng(2)
    tokens, targets = rng.integers(0, 5, (3, 6)), rng.integers(0, 3, (3, 6))
    pad = np.zeros((3, 6), bool)
    pad[1, 4:] = True

    def loss_fn():
        logits = model.forward(tokens, pad, rng=np.random.default_rng(7), tau=1.5)
        return cross_entropy_forward(logits, targets, ~pad)

    model.zero_grad()
    model.backward(cross_entropy_backward(loss_fn()[1]))
    assert_parameter_gradients(model, lambda: loss_fn()[0])
    for name in ("cat_attention_forward", "cat_attention_backward", "mlp_forward",
                 "mlp_backward", "gumbel_softmax_forward", "softmax_backward",
                 "num_attention_forward", "num_attention_backward"):
        assert spies.get(name, 0) >= 2, name
    for name in ("log_softmax_forward", "log_softmax_backward"):
        assert spies.get(name, 0) >= 1, name


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
def test_linear(dtype, rng):
    x = rng.standard_normal((3, 5, 7)).astype(dtype)
    w, b = rng.standard_normal((7, 4)).astype(dtype), rng.standard_normal(4).astype(dtype)
    for bias in (b, None):
        check_pair(F.linear_forward, F.linear_backward, K.linear_forward, K.linear_backward,
                   (x, w, bias), dtype, rng)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("causal", "padded"), [(False, False), (False, True), (True, True)])
def test_numerical_attention(dtype, causal, padded, rng):
    """Both kernel backwards: the factored one (masks on the keys alone) and the general."""
    q, k, _, p, mask, _ = _program_inputs(dtype, causal, padded, rng)
    v = rng.random(q.shape[:3]).astype(dtype) * 3
    check_pair(P.num_attention_forward, P.num_attention_backward, KP.num_attention_forward,
               KP.num_attention_backward, (q, k, v, p, mask, NO_HOOKS, ()), dtype, rng)

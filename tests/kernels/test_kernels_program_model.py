"""The fused kernels of the Transformer Program model (``tpcore.kernels.program_model``, which
gathers those of ``program_attention``, ``program_mlp`` and ``program_read``) against their NumPy
references (``tpcore.models.program.ops``): outputs and caches equal in float64 (and close in
float32), either backward on either forward's cache, a whole-model gradcheck with the kernels
running (spied on), and a late training step (gates one-hot to float32's resolution) the same
with the read kernels as without. Helpers: ``tests/kernels/conftest.py``."""

import numpy as np
import pytest
from tpcore.kernels import program_mlp as KPM
from tpcore.kernels import program_model as KP

from tpcore.models.program import ProgramConfig, ProgramModel
from tpcore.models.program import ops as P
from tpcore.nn.gradcheck import assert_parameter_gradients
from tpcore.nn.hookpoints import NO_HOOKS
from tpcore.nn.losses import cross_entropy_backward, cross_entropy_forward

pytestmark = pytest.mark.host_only("numba kernels run on host NumPy arrays")

DTYPES = [np.float64, np.float32]


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
def test_categorical_attention(dtype, causal, padded, noise, check_pair, rng):
    q, k, v, p, mask, bias = _program_inputs(dtype, causal, padded, rng)
    g = rng.gumbel(size=q.shape[:3] + (q.shape[2],)).astype(dtype) if noise else None
    check_pair(P.cat_attention_forward, P.cat_attention_backward, KP.cat_attention_forward,
               KP.cat_attention_backward, (q, k, v, p, mask, bias, g, 0.7, NO_HOOKS, ()),
               dtype, rng)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("i", [7, 2])
def test_program_mlp(dtype, i, check_pair, rng):
    """Both kernel paths: the first layer through BLAS (7 inputs) and in one pass each way
    (2)."""
    g, t, d, k = 2, 30, 9, 5
    args = [rng.standard_normal(s).astype(dtype) for s in
            ((g, t, i), (g, i, d), (g, 1, d), (g, d, k), (g, 1, k), (g, t, k))]
    check_pair(P.mlp_forward, P.mlp_backward, KP.mlp_forward, KP.mlp_backward,
               (*args, 0.5), dtype, rng)


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


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("causal", "padded"), [(False, False), (False, True), (True, True)])
def test_numerical_attention(dtype, causal, padded, check_pair, rng):
    """Both kernel backwards: the factored one (masks on the keys alone) and the general."""
    q, k, _, p, mask, _ = _program_inputs(dtype, causal, padded, rng)
    v = rng.random(q.shape[:3]).astype(dtype) * 3
    check_pair(P.num_attention_forward, P.num_attention_backward, KP.num_attention_forward,
               KP.num_attention_backward, (q, k, v, p, mask, NO_HOOKS, ()), dtype, rng)


def _late_mlps(dtype, i, rng, settled_rows):
    """Two MLPs at temperature 0.01 whose first has ``settled_rows`` of its 40 rows one-hot to
    float32's resolution and whose second has all of them; ``(y, cache, live)``."""
    g, t, d, k = 2, 40, 9, 5
    x, w1, b1, w2 = (rng.standard_normal(s).astype(dtype)
                     for s in ((g, t, i), (g, i, d), (g, 1, d), (g, d, k)))
    w2[0] *= 1e-6  # the first MLP's outputs nearly uniform: live, unless the noise settles them
    b2 = np.zeros((g, 1, k), dtype)
    b2[1, 0, 0] = 1e4  # every row of the second MLP settles on its first value
    noise = np.zeros((g, t, k), dtype)
    noise[0, :settled_rows, 1] = 1e4  # the first MLP's first rows settle, the rest stay live
    y, cache = KP.mlp_forward(x, w1, b1, w2, b2, noise, 0.01)
    settled = ((y == 1).sum(axis=-1) == 1) & ((y < 2.0**-64).sum(axis=-1) == k - 1)
    return y, cache, ~settled


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("i", [7, 2])
@pytest.mark.parametrize("settled_rows", [40, 25, 10])
def test_mlp_backward_over_live_rows(dtype, i, settled_rows, reference, assert_same, rng):
    """Mostly settled MLPs take their backward over the live rows alone: the gradients equal the
    reference's, a settled row's input gradient is exactly zero (the reference's is within the
    bound), and an MLP with more live rows than :data:`LIVE_SHARE` of them keeps every row."""
    y, cache, live = _late_mlps(dtype, i, rng, settled_rows)
    assert live[0].sum() == 40 - settled_rows and not live[1].any()
    dy = rng.standard_normal(y.shape).astype(dtype)
    grads, ref = KP.mlp_backward(dy, cache), reference(P.mlp_backward, dy, cache)
    assert_same(ref, grads, dtype, "backward")
    dx, ref_dx = grads[0], ref[0]
    if 40 - settled_rows <= 40 * KPM.LIVE_SHARE:
        assert not dx[~live].any()
    else:  # the first MLP keeps every row: its settled rows carry the reference's tiny values
        assert not dx[1].any()
    _, w1, w2 = cache[:3]  # each dz of a settled row is within the bound; dx = relu'(dz W2^T) W1^T
    bound = 2 * 5 * 2.0**-64 * np.abs(dy).max() / 0.01
    assert np.abs(ref_dx[~live]).max() <= bound * 5 * np.abs(w2).max() * 9 * np.abs(w1).max()


def test_mlp_backward_keeps_every_row_early_in_training(rng):
    """A soft MLP output (early in training) runs the dense backward, bit for bit."""
    args = [rng.standard_normal(s).astype(np.float32) for s in
            ((2, 30, 7), (2, 7, 9), (2, 1, 9), (2, 9, 5), (2, 1, 5), (2, 30, 5))]
    y, cache = KP.mlp_forward(*args, 0.5)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    for a, b in zip(KP.mlp_backward(dy, cache), KPM._dense_backward(dy, cache)):
        assert np.array_equal(a, b)


def _late_gates(dtype, rng, g=6, m=5):
    """Gates as a Gumbel softmax leaves them at a low temperature, ``(pi, cache)``: each row one
    weight of 1 and the rest at the smallest normal float; variable ``m - 1`` is read by no
    gate."""
    logits = 40 * rng.standard_normal((g, m))
    logits[np.arange(g), rng.integers(0, m - 1, g)] = 200
    pi, cache = P.sample(logits.astype(dtype), None, 0.01)
    pi[:, -1] = np.finfo(np.float32).tiny
    return pi, (pi, *cache[1:])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("stream", [(5, 3, 4, 6), (5, 3, 4)])
def test_gated_read_of_late_gates(dtype, stream, reference, assert_same, rng):
    """Categorical ``(m, B, N, d)`` and numerical ``(p, B, N)`` streams: the kernels equal the
    references (the gates' gradient zero to within the tolerance), and the variable no gate
    reads gets a zero gradient."""
    x = rng.standard_normal(stream).astype(dtype)
    pi, cache = _late_gates(dtype, rng)
    assert ((pi == 1).sum(axis=1) == 1).all()
    out = KP.read_forward(x, pi, False)
    assert_same(reference(P.read_forward, x, pi), out, dtype, "forward")
    dr = rng.standard_normal(out.shape).astype(dtype)
    dx, dgates = KP.gated_read_backward(dr, x, pi, cache)
    ref_dx, ref_dgates = reference(P.gated_read_backward, dr, x, pi, cache)
    assert_same(ref_dx, dx, dtype, "dx")
    assert not dx[-1].any() and not dgates.any()
    dpi = reference(P.read_backward, dr, x, pi)[1]
    assert np.abs(ref_dgates).max() <= 2 * 5 * 2.0**-64 * np.abs(dpi).max() / 0.01


def test_gated_read_leaves_other_gates_and_the_discrete_mode_to_blas(rng):
    x = rng.standard_normal((5, 3, 4)).astype(np.float32)
    dr = rng.standard_normal((6, 3, 4)).astype(np.float32)
    dense, cache = P.sample(rng.standard_normal((6, 5)).astype(np.float32), None, 1.0)
    assert KP.read_forward(x, dense, False) is NotImplemented  # early in training
    assert KP.gated_read_backward(dr, x, dense, cache) is NotImplemented
    late, cache = _late_gates(np.float32, rng)
    two = late.copy()
    two[1, :2] = 0.5  # one gate still between two variables
    assert KP.read_forward(x, two, False) is NotImplemented
    half = late.copy()
    half[2] = 0
    half[2, 1] = 0.5  # one weight, but not a softmax's
    assert KP.read_forward(x, half, False) is NotImplemented
    assert KP.read_forward(x, late, True) is NotImplemented  # the discrete mode
    assert KP.gated_read_backward(dr, x, late, None) is NotImplemented
    assert KP.read_forward(x, np.zeros((0, 5), np.float32), False) is NotImplemented


def _late_step():
    """A float32 training step at temperature 0.01 of a model whose gates have been trained to
    one-hot; it returns the loss and every gradient."""
    cfg = ProgramConfig(vocab_size=6, max_len=8, n_classes=6, n_layers=2, n_cat_heads=2,
                        n_num_heads=1, n_cat_mlps=1, n_num_mlps=1, d_mlp=8, seed=5)
    model = ProgramModel(cfg)
    for name, param in model.named_parameters():
        if "gate" in name:  # gate logits far apart, as training leaves them
            param.data[...] = 40 * np.random.default_rng(1).standard_normal(param.data.shape)
    rng = np.random.default_rng(3)
    tokens, targets = rng.integers(0, 6, (16, 8)), rng.integers(0, 6, (16, 8))
    keep = np.ones((16, 8), bool)

    def step():
        model.zero_grad()
        logits = model.forward(tokens, ~keep, rng=np.random.default_rng(7), tau=0.01)
        loss, cache = cross_entropy_forward(logits, targets, keep)
        model.backward(cross_entropy_backward(cache))
        return loss, {n: p.grad.copy() for n, p in model.named_parameters()}

    return step


def _assert_same_step(got, expected):
    loss, grads = got
    assert loss == pytest.approx(expected[0], rel=1e-6)
    for name, grad in grads.items():
        scale = max(1.0, float(np.abs(expected[1][name]).max()))
        assert np.abs(grad - expected[1][name]).max() <= 1e-5 * scale, name


def test_late_training_step_is_the_same_with_the_read_kernels(spies, monkeypatch):
    """The read kernels run, and loss and every gradient equal those of the BLAS reads."""
    step = _late_step()
    kernels = step()
    assert spies.get("read_forward", 0) >= 4 and spies.get("gated_read_backward", 0) >= 4
    monkeypatch.setattr(KP, "read_forward", lambda *a: NotImplemented)
    monkeypatch.setattr(KP, "gated_read_backward", lambda *a: NotImplemented)
    _assert_same_step(kernels, step())


def test_late_training_step_is_the_same_over_live_mlp_rows(monkeypatch):
    """The settled MLPs take their backward over their live rows, and loss and every gradient
    equal those of the backward over every row."""
    step, counts, live_rows = _late_step(), [], KPM._live_rows

    def counted(y, small, live):
        live_rows(y, small, live)
        counts.append(live.sum(axis=1))

    monkeypatch.setattr(KPM, "_live_rows", counted)
    live = step()
    assert any((c <= KPM.LIVE_SHARE * 128).any() for c in counts)
    monkeypatch.setattr(KPM, "LIVE_SHARE", -1.0)
    _assert_same_step(live, step())

"""Finite-difference checks (float64) of every forward/backward pair in tpcore.nn, on arrays of
the active backend."""

import numpy as np
import pytest

from tpcore.backend import asarray, get_xp, to_host
from tpcore.backend import rng as device_rng
from tpcore.nn import attention as A
from tpcore.nn import functional as F
from tpcore.nn import losses as L
from tpcore.nn import relax as R
from tpcore.nn.gradcheck import assert_gradients, assert_parameter_gradients, random_like
from tpcore.nn.module import Module, Parameter


def _check_unary(fwd, bwd, x, **kw):
    """Gradcheck ``x -> sum(g * fwd(x))`` for a pair whose backward returns dx."""
    y, _ = fwd(x, **kw)
    g = random_like(y, seed=1)
    _, cache = fwd(x, **kw)
    dx = bwd(g, cache)
    assert_gradients(lambda x: float((fwd(x, **kw)[0] * g).sum()), [x], [dx])


def _device(*arrays):
    return tuple(asarray(a) for a in arrays)


def test_linear(rng):
    x, w, b = _device(rng.standard_normal((3, 4, 5)), rng.standard_normal((5, 6)),
                      rng.standard_normal(6))
    y, cache = F.linear_forward(x, w, b)
    g = random_like(y)
    grads = F.linear_backward(g, cache)
    assert_gradients(lambda x, w, b: float((F.linear_forward(x, w, b)[0] * g).sum()),
                     [x, w, b], grads)


def test_linear_gelu(rng):
    """``gelu(x W + b)`` in one call: the two layers' forwards bit for bit, and their backwards
    through its caches pass a finite-difference check."""
    x, w, b = _device(rng.standard_normal((3, 4, 5)), rng.standard_normal((5, 6)),
                      rng.standard_normal(6))
    y, (linear_cache, deriv) = F.linear_gelu_forward(x, w, b)
    u, _ = F.linear_forward(x, w, b)
    y_two, deriv_two = F.gelu_forward(u)
    np.testing.assert_array_equal(to_host(y), to_host(y_two))
    np.testing.assert_array_equal(to_host(deriv), to_host(deriv_two))
    g = random_like(y)
    grads = F.linear_backward(F.gelu_backward(g, deriv), linear_cache)
    assert_gradients(lambda x, w, b: float((F.linear_gelu_forward(x, w, b)[0] * g).sum()),
                     [x, w, b], grads)


def test_embedding_scatter_add_with_repeats(rng):
    ids, table = _device(np.array([[0, 2, 2], [1, 2, 0]]), rng.standard_normal((4, 3)))
    y, cache = F.embedding_forward(ids, table)
    g = random_like(y)
    dtable = F.embedding_backward(g, cache)
    assert_gradients(lambda t: float((F.embedding_forward(ids, t)[0] * g).sum()), [table], [dtable])
    assert np.allclose(to_host(dtable)[3], 0)  # never looked up


@pytest.mark.parametrize("name", ["relu", "gelu"])
def test_activations(rng, name):
    x = rng.standard_normal((4, 7))
    x[np.abs(x) < 1e-3] = 0.5  # keep away from relu's kink
    _check_unary(getattr(F, f"{name}_forward"), getattr(F, f"{name}_backward"), asarray(x))


@pytest.mark.parametrize("tau", [1.0, 0.3])
def test_softmax_with_temperature(rng, tau):
    x = asarray(rng.standard_normal((3, 5)))
    _check_unary(F.softmax_forward, F.softmax_backward, x, tau=tau)
    y, _ = F.softmax_forward(x, tau=tau)
    assert np.allclose(to_host(y.sum(-1)), 1)


def test_log_softmax(rng):
    _check_unary(F.log_softmax_forward, F.log_softmax_backward,
                 asarray(rng.standard_normal((3, 5))))


def test_layer_norm(rng):
    x, gamma, beta = _device(rng.standard_normal((2, 3, 6)), rng.standard_normal(6),
                             rng.standard_normal(6))
    y, cache = F.layer_norm_forward(x, gamma, beta)
    g = random_like(y)
    grads = F.layer_norm_backward(g, cache)
    assert_gradients(lambda x, a, b: float((F.layer_norm_forward(x, a, b)[0] * g).sum()),
                     [x, gamma, beta], grads)


@pytest.mark.parametrize("causal,padded", [(False, False), (True, False), (True, True)])
def test_attention_with_masks(rng, causal, padded):
    q, k, v = _device(*(rng.standard_normal((2, 3, 5, 4)) for _ in range(3)))
    pad = np.zeros((2, 5), bool)
    if padded:
        pad[1, 3:] = True
    mask = A.attention_mask(5, causal, asarray(pad) if padded else None, xp=get_xp())
    out, cache = A.attention_forward(q, k, v, mask)
    p = to_host(cache[0])
    if causal:
        assert np.allclose(np.triu(p[0, 0], 1), 0)
    if padded:
        assert np.allclose(p[1, :, :, 3:], 0)
    g = random_like(out)
    grads = A.attention_backward(g, cache)
    assert_gradients(lambda q, k, v: float((A.attention_forward(q, k, v, mask)[0] * g).sum()),
                     [q, k, v], grads)


def test_multi_head_attention(rng):
    d, h = 8, 2
    x = asarray(rng.standard_normal((2, 4, d)))
    params = {f"w{c}": asarray(rng.standard_normal((d, d)) / 3) for c in "qkvo"}
    params |= {f"b{c}": asarray(rng.standard_normal(d)) for c in "qkvo"}
    mask = A.attention_mask(4, True, xp=get_xp())
    y, cache = A.mha_forward(x, params, h, mask)
    g = random_like(y)
    dx, grads = A.mha_backward(g, cache)
    names = sorted(params)

    def f(x, *ps):
        return float((A.mha_forward(x, dict(zip(names, ps)), h, mask)[0] * g).sum())

    assert_gradients(f, [x, *(params[n] for n in names)], [dx, *(grads[n] for n in names)])


@pytest.mark.parametrize("reduction", L.REDUCTIONS)
@pytest.mark.parametrize("clip", [None, 0.8])
def test_cross_entropy(rng, reduction, clip):
    host_mask = rng.random((3, 4)) > 0.3
    logits, targets, mask = _device(rng.standard_normal((3, 4, 5)), rng.integers(0, 5, (3, 4)),
                                    host_mask)
    loss, cache = L.cross_entropy_forward(logits, targets, mask, reduction, clip)
    d = L.cross_entropy_backward(cache)
    assert_gradients(
        lambda z: L.cross_entropy_forward(z, targets, mask, reduction, clip)[0], [logits], [d])
    assert np.allclose(to_host(d)[~host_mask], 0)


def test_cross_entropy_reductions_by_hand():
    logits = asarray(np.zeros((2, 2, 2)))  # every token loss is log 2
    targets = asarray(np.zeros((2, 2), int))
    mask = asarray(np.array([[True, True], [True, False]]))
    ln2 = np.log(2)
    token_mean = L.cross_entropy_forward(logits, targets, mask, "token_mean")[0]
    sequence_sum = L.cross_entropy_forward(logits, targets, mask, "sequence_sum")[0]
    assert np.isclose(float(token_mean), ln2) and np.isclose(float(sequence_sum), 1.5 * ln2)
    # clipping above log 2 freezes every token: loss is the clip, gradient zero
    loss, cache = L.cross_entropy_forward(logits, targets, mask, clip=1.0)
    assert np.isclose(float(loss), 1.0) and np.allclose(to_host(L.cross_entropy_backward(cache)), 0)


def test_cross_entropy_unknown_reduction_names_it(rng):
    with pytest.raises(ValueError, match="'mean'"):
        L.cross_entropy_forward(np.zeros((1, 2)), np.zeros(1, int), reduction="mean")


@pytest.mark.parametrize("hard", [False, True])
def test_gumbel_softmax(rng, hard):
    logits = asarray(rng.standard_normal((4, 6)))
    noise = R.gumbel_noise((4, 6), device_rng(0), dtype="float64")
    y, cache = R.gumbel_softmax_forward(logits, noise, 0.7, hard=hard)
    if hard:
        y_host = to_host(y)
        assert np.array_equal(y_host.sum(-1), np.ones(4)) and set(np.unique(y_host)) <= {0, 1}
        assert np.array_equal(y_host.argmax(-1), to_host((logits + noise).argmax(-1)))
    g = random_like(y)
    d = R.gumbel_softmax_backward(g, cache)
    # the straight-through gradient is the soft one, whichever forward was used
    assert_gradients(
        lambda z: float((R.gumbel_softmax_forward(z, noise, 0.7)[0] * g).sum()), [logits], [d])


def test_argmax_onehot_any_axis():
    x = asarray(np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]]))
    assert np.array_equal(to_host(R.argmax_onehot(x)), [[0, 1, 0], [1, 0, 0]])
    assert np.array_equal(to_host(R.argmax_onehot(x, axis=0)), [[0, 1, 1], [1, 0, 0]])


def test_gradcheck_catches_a_wrong_gradient(rng):
    x = asarray(rng.standard_normal(5))
    with pytest.raises(AssertionError, match="input 0"):
        assert_gradients(lambda x: float((x**2).sum()), [x], [3 * x])


@pytest.mark.parametrize("vocab", [5, 300])
def test_embedding_backward_both_forms(rng, vocab):
    """The one-hot product (small tables) and the scatter-add (large ones) agree with a loop."""
    ids = rng.integers(0, vocab, (4, 7))
    dy = rng.standard_normal((4, 7, 3))
    expected = np.zeros((vocab, 3))
    for i, v in enumerate(ids.ravel()):
        expected[v] += dy.reshape(-1, 3)[i]
    got = F.embedding_backward(asarray(dy), (asarray(ids), (vocab, 3)))
    assert np.allclose(to_host(got), expected)


@pytest.mark.parametrize("k", [1, 2, 3, 7, 8, 9, 100])
def test_softmax_short_and_long_axes(rng, k):
    """The pairwise-max / matmul-sum path of short axes equals the plain formula, even with
    large logits (stability)."""
    x = rng.standard_normal((3, 4, k)) * 50
    e = np.exp(x - x.max(-1, keepdims=True))
    assert np.allclose(to_host(F.softmax(asarray(x))), e / e.sum(-1, keepdims=True))
    assert np.allclose(to_host(F.softmax(asarray(x), axis=1)),
                       np.exp(x) / np.exp(x).sum(1, keepdims=True))


def test_assert_parameter_gradients_names_a_wrong_parameter():
    class Square(Module):
        def __init__(self):
            self.w = Parameter(np.array([1.0, 2.0]))

    m = Square()
    m.w.grad = 2 * m.w.data  # d/dw sum(w^2)
    assert_parameter_gradients(m, lambda: float((m.w.data ** 2).sum()))
    m.w.grad = m.w.grad + 1.0
    with pytest.raises(AssertionError, match="^w: gradient of input 0 is off"):
        assert_parameter_gradients(m, lambda: float((m.w.data ** 2).sum()))

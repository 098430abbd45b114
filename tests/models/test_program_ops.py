"""Float64 gradchecks and discrete semantics of the Transformer Program modules, on arrays of
the active backend."""

import numpy as np
import pytest

from tpcore.backend import asarray, get_xp, to_host
from tpcore.models.program import ops
from tpcore.nn.gradcheck import assert_gradients, random_like
from tpcore.nn.relax import gumbel_from_uniform


def _noise(rng, *shape):
    """Gumbel noise drawn on the host, on the device."""
    return asarray(gumbel_from_uniform(rng.random(shape)))


def _soft(rng, *shape, tau=0.7):
    y, _ = ops.sample(asarray(rng.standard_normal(shape)), _noise(rng, *shape), tau)
    return y


def _bias(n, mask):
    return ops.masked_bias(ops.closest_bias(n, "float64", get_xp()), mask)


@pytest.fixture
def heads(rng):
    h, b, n, d = 2, 3, 5, 4
    q, k, v = (_soft(rng, h, b, n, d) for _ in range(3))
    p = _soft(rng, h, d, d)
    pad = np.zeros((b, n), bool)
    pad[0, 3:] = True
    mask = (~pad)[:, None, :] & np.tril(np.ones((n, n), bool))[None]
    return q, k, v, p, asarray(mask)


def test_read_gradients(rng):
    x, pi = asarray(rng.standard_normal((5, 2, 3, 4))), asarray(rng.standard_normal((3, 5)))
    g = random_like(ops.read_forward(x, pi))
    dx, dpi = ops.read_backward(g, x, pi)
    assert_gradients(lambda x, pi: float((ops.read_forward(x, pi) * g).sum()), [x, pi], [dx, dpi])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_hard_read_gathers_what_the_one_hot_product_gives(rng, dtype):
    x = asarray(rng.standard_normal((6, 2, 3, 4)).astype(dtype))
    pi = asarray(np.eye(6, dtype=dtype)[[4, 0, 4, 2]])
    hard, product = ops.read_forward(x, pi, hard=True), ops.read_forward(x, pi)
    assert hard.shape == product.shape == (4, 2, 3, 4)
    assert np.array_equal(to_host(hard), to_host(product))
    assert np.array_equal(to_host(hard[0]), to_host(x[4]))
    xn = asarray(rng.standard_normal((6, 2, 3)).astype(dtype))
    assert np.array_equal(to_host(ops.read_forward(xn, pi, hard=True)),
                          to_host(ops.read_forward(xn, pi)))


def test_cat_attention_gradients(rng, heads):
    q, k, v, p, mask = heads
    bias = _bias(5, mask)
    noise = _noise(rng, 2, 3, 5, 5)

    def f(q, k, v, p):
        out, _ = ops.cat_attention_forward(q, k, v, p, mask, bias, noise, 1.3)
        return float((out * g).sum())

    out, cache = ops.cat_attention_forward(q, k, v, p, mask, bias, noise, 1.3)
    g = random_like(out)
    grads = ops.cat_attention_backward(g, cache)
    assert_gradients(f, [q, k, v, p], list(grads), tol=1e-5)


def test_num_attention_gradients(rng, heads):
    q, k, _, p, mask = heads
    v = asarray(rng.standard_normal((2, 3, 5)))
    out, cache = ops.num_attention_forward(q, k, v, p, mask)
    g = random_like(out)
    grads = ops.num_attention_backward(g, cache)
    assert_gradients(lambda q, k, v, p: float((ops.num_attention_forward(q, k, v, p, mask)[0]
                                               * g).sum()), [q, k, v, p], list(grads))


def test_mlp_gradients(rng):
    x, w1, b1, w2, b2 = (asarray(rng.standard_normal(s))
                         for s in ((2, 7, 6), (2, 6, 5), (2, 1, 5), (2, 5, 4), (2, 1, 4)))
    noise = _noise(rng, 2, 7, 4)
    y, cache = ops.mlp_forward(x, w1, b1, w2, b2, noise, 0.9)
    g = random_like(y)
    grads = ops.mlp_backward(g, cache)
    assert_gradients(lambda *a: float((ops.mlp_forward(*a, noise, 0.9)[0] * g).sum()),
                     [x, w1, b1, w2, b2], list(grads))


def test_discrete_attention_picks_closest_match_then_bos():
    # one head, one sequence of 6 positions; query value 0 matches key value 1
    n, d = 6, 2
    keys = np.array([0, 1, 0, 1, 0, 0])
    k = asarray(np.eye(d)[keys][None, None])
    q = np.eye(d)[np.zeros(n, int)][None, None]
    q[0, 0, 5] = [0, 1]  # position 5 queries value 1, which matches key value 0 below
    q = asarray(q)
    p = asarray(np.array([[[0.0, 1.0], [1.0, 0.0]]]))
    v = asarray(np.eye(n)[None, None])  # value = position one-hot, so the output names the key
    mask = asarray(np.ones((1, n, n), bool))
    bias = _bias(n, mask)
    out, _ = ops.cat_attention_forward(q, k, v, p, mask, bias, None, None)
    picked = out[0, 0].argmax(-1)
    # keys with value 1 sit at 1 and 3: position 2 is equidistant -> the earlier (1);
    # position 1 sees itself only as a last resort -> 3; position 3 -> 1 (distance 2 both sides
    # none closer); position 5 (value 1 query matches keys of value 0: 0, 2, 4) -> 4.
    assert picked.tolist() == [1, 3, 1, 1, 3, 4]
    p_none = np.zeros((1, d, d))
    p_none[0, :, 1] = 1.0
    p_none, k_none = asarray(p_none), asarray(np.eye(d)[np.zeros(n, int)][None, None])
    out, _ = ops.cat_attention_forward(q, k_none, v, p_none, mask, bias, None, None)
    assert out[0, 0].argmax(-1).tolist() == [0] * n


def test_numerical_attention_counts_matches():
    n, d = 5, 3
    toks = np.array([0, 2, 2, 1, 2])
    x = asarray(np.eye(d)[toks][None, None])
    p = asarray(np.eye(d)[None])  # predicate: equal values
    out, _ = ops.num_attention_forward(x, x, asarray(np.ones((1, 1, n))), p,
                                       asarray(np.ones((1, n, n), bool)))
    assert to_host(out[0, 0]).tolist() == [1, 3, 3, 1, 3]

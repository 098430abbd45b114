"""Eq. 1 layer: forward against a per-column loop, float64 gradchecks, hardmax ties, sparse path."""

from dataclasses import replace

import numpy as np
import pytest

from tpcore.backend import asarray, to_host
from tpcore.looped.layer import (
    SCOPE_GLOBAL,
    SCOPE_LOCAL,
    AttentionHead,
    Layer,
    hardmax_columns,
    layer_backward,
    layer_forward,
    layer_forward_sparse,
)
from tpcore.nn.gradcheck import assert_gradients, random_like


def _layer(rng, d=5, k=3, h=7, n_heads=2, lam=1.3):
    heads = tuple(AttentionHead(rng.standard_normal((k, d)) * 0.5,
                                rng.standard_normal((k, d)) * 0.5,
                                rng.standard_normal((d, d)) * 0.5, lam + 0.4 * i)
                  for i in range(n_heads))
    return Layer(heads, rng.standard_normal((h, d)), rng.standard_normal(h),
                 rng.standard_normal((d, h)), rng.standard_normal(d))


def _device(layer):
    """``layer`` with its arrays on the active backend."""
    heads = tuple(AttentionHead(asarray(h.K), asarray(h.Q), asarray(h.V), h.lam)
                  for h in layer.heads)
    return Layer(heads, *(asarray(a) for a in (layer.W1, layer.b1, layer.W2, layer.b2)),
                 scope=None if layer.scope is None else asarray(layer.scope))


def test_forward_matches_column_loop():
    rng = np.random.default_rng(0)
    layer = _layer(rng)
    X = rng.standard_normal((5, 6))
    Y = to_host(layer_forward(asarray(X), _device(layer))[0])
    for k in range(6):
        a = X[:, k].copy()
        for h in layer.heads:
            s = np.array([(h.K @ X[:, j]) @ (h.Q @ X[:, k]) for j in range(6)]) * h.lam
            p = np.exp(s - s.max())
            p /= p.sum()
            a += sum(p[j] * (h.V @ X[:, j]) for j in range(6))
        y = a + layer.W2 @ np.maximum(layer.W1 @ a + layer.b1, 0) + layer.b2
        np.testing.assert_allclose(Y[:, k], y, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("batched", [False, True])
def test_gradients_all_inputs(batched):
    rng = np.random.default_rng(1)
    layer = _device(_layer(rng))
    X = asarray(rng.standard_normal((3, 5, 6) if batched else (5, 6)))
    Y, cache = layer_forward(X, layer)
    G = random_like(Y, seed=2)
    dX, g = layer_backward(G, cache)

    def loss_x(x):
        return float((layer_forward(x, layer)[0] * G).sum())

    assert_gradients(loss_x, [X], [dX], tol=1e-6)
    for name in ("W1", "b1", "W2", "b2"):
        w = getattr(layer, name)

        def loss_w(wv, name=name):
            return float((layer_forward(X, _with(layer, name, wv))[0] * G).sum())

        assert_gradients(loss_w, [w.copy()], [getattr(g, name)], tol=1e-6)
    for i, h in enumerate(layer.heads):
        for name in ("K", "Q", "V"):
            def loss_h(wv, i=i, name=name):
                heads = list(layer.heads)
                heads[i] = _with(heads[i], name, wv)
                return float((layer_forward(X, _with(layer, "heads", tuple(heads)))[0] * G).sum())

            assert_gradients(loss_h, [getattr(h, name).copy()], [getattr(g.heads[i], name)],
                             tol=1e-6)

        def loss_lam(lam, i=i):
            heads = list(layer.heads)
            heads[i] = _with(heads[i], "lam", float(lam[0]))
            return float((layer_forward(X, _with(layer, "heads", tuple(heads)))[0] * G).sum())

        assert_gradients(loss_lam, [np.array([h.lam])], [np.array([float(g.heads[i].lam)])],
                         tol=1e-6)


def _with(obj, name, value):
    return replace(obj, **{name: value})


def test_hardmax_splits_ties_evenly():
    S = asarray(np.array([[2.0, 0.0], [2.0, 0.0], [1.0, 0.0]]))
    P = to_host(hardmax_columns(S))
    np.testing.assert_array_equal(P, [[0.5, 1 / 3], [0.5, 1 / 3], [0.0, 1 / 3]])


def test_hard_backward_passes_values_only():
    rng = np.random.default_rng(3)
    layer = _device(_layer(rng))
    X = asarray(np.round(rng.standard_normal((5, 6))))
    Y, cache = layer_forward(X, layer, hard=True)
    G = random_like(Y, seed=4)
    dX, g = layer_backward(G, cache)
    # away from ties and ReLU kinks the hardmax layer is linear in X through V and the FF
    assert_gradients(lambda x: float((layer_forward(x, layer, hard=True)[0] * G).sum()),
                     [X], [dX], tol=1e-6, h=1e-7)
    assert g.heads[0].lam == 0.0 and not g.heads[0].K.any()


@pytest.mark.parametrize("hard", [False, True])
def test_sparse_path_matches_dense(hard):
    """Local columns carry distinct +-1 codes, so each one's best local key is itself: the
    hardmax picks the same keys on both paths and the softmax differs only by the leakage of
    the other local keys (weight <= n exp(-2 lam)). Scoped units are zero off their scope."""
    rng = np.random.default_rng(5)
    d, n, g, bits, lam = 7, 12, 2, 4, 12.0
    X = rng.standard_normal((2, d, n))
    codes = ((np.arange(n)[:, None] >> np.arange(bits)) & 1) * 2.0 - 1.0
    X[:, :bits, :] = codes.T[None]
    X[:, :bits, :g] = np.sign(rng.standard_normal((2, bits, g)))   # scratch queries: any code
    sel = np.eye(d)[:bits]
    base = _layer(rng, d=d, h=6, n_heads=1)
    head = AttentionHead(sel, sel, base.heads[0].V, lam)
    W1 = base.W1.copy()
    W1[1, bits] = W1[2, bits] = 0.0
    W1[1, bits + 1] = 100.0                       # unit 1 only fires where row bits+1 > 0
    W1[2, bits + 1] = -100.0
    X[:, bits + 1, :g] = 1.0
    X[:, bits + 1, g:] = -1.0
    b1 = base.b1.copy()
    b1[1] = b1[2] = -50.0
    dense = Layer((head,), W1, b1, base.W2, base.b2)
    scoped = Layer((head,), W1, b1, base.W2, base.b2, scope=np.array([0, SCOPE_GLOBAL,
                                                                       SCOPE_LOCAL, 0, 0, 0]))
    X = asarray(X)
    Yd, _ = layer_forward(X, _device(dense), hard=hard)
    Ys = layer_forward_sparse(X, _device(scoped), n_global=g, hard=hard)
    tol = 1e-12 if hard else 1e-6
    np.testing.assert_allclose(to_host(Ys), to_host(Yd), rtol=0, atol=tol)

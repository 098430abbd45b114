"""Backward through T loop iterations of the SUBLEQ machine, against finite differences."""

import numpy as np

from tpcore.looped.diff import loop_backward, loop_forward, weight_arrays, with_weights
from tpcore.nn.gradcheck import assert_gradients, random_like
from tpcore.subleq.examples import example
from tpcore.subleq.machine import build, punchcard


def test_loop_backward_matches_finite_differences():
    p = example("multiply")
    machine = build(p.layout, lam=3.0, snap=False)
    rng = np.random.default_rng(0)
    # move off ReLU kinks and exact ties so the function is smooth where it is probed
    layers = [with_weights(ly, {k: v + 1e-3 * rng.standard_normal(v.shape)
                                for k, v in weight_arrays(ly).items()}) for ly in machine.layers]
    X0 = punchcard(p) + 1e-3 * rng.standard_normal((p.layout.d, p.layout.n))
    T = 3
    XT, tape = loop_forward(X0, layers, T)
    G = random_like(XT, seed=1)
    dX0, grads = loop_backward(G, tape, len(layers))

    def loss_x(x):
        return float((loop_forward(x, layers, T)[0] * G).sum())

    assert_gradients(loss_x, [X0], [dX0], tol=1e-5, max_entries=40)
    for li, name in ((0, "Q0"), (1, "K1"), (1, "W1"), (2, "V0"), (3, "b1")):
        w = weight_arrays(layers[li])[name].copy()

        def loss_w(wv, li=li, name=name):
            ls = list(layers)
            ls[li] = with_weights(ls[li], {name: wv})
            return float((loop_forward(X0, ls, T)[0] * G).sum())

        assert_gradients(loss_w, [w], [weight_arrays(grads[li])[name]], tol=1e-5,
                         max_entries=25)

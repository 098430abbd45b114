"""Backward through T loop iterations of the SUBLEQ machine, against finite differences; the
weights as parameters of the training loop (on the active backend)."""

import numpy as np

from tpcore.backend import asarray, get_xp, to_host
from tpcore.looped.diff import (
    StackParameters,
    loop_backward,
    loop_forward,
    weight_arrays,
    with_weights,
)
from tpcore.nn.gradcheck import assert_gradients, random_like
from tpcore.nn.optim import Adam
from tpcore.subleq.examples import example
from tpcore.subleq.machine import build, punchcard
from tpcore.train import TrainConfig, fit


def test_loop_backward_matches_finite_differences():
    p = example("multiply")
    machine = build(p.layout, lam=3.0, snap=False, xp=get_xp())
    rng = np.random.default_rng(0)
    # move off ReLU kinks and exact ties so the function is smooth where it is probed
    layers = [with_weights(ly, {k: v + asarray(1e-3 * rng.standard_normal(v.shape))
                                for k, v in weight_arrays(ly).items()}) for ly in machine.layers]
    X0 = punchcard(p, get_xp()) + asarray(1e-3 * rng.standard_normal((p.layout.d, p.layout.n)))
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


def test_stack_parameters_train_in_the_training_loop():
    """Noise on the construction's non-zero weights, pulled back towards the exact layers'
    outputs by ``train.fit``: the parameters start as the noisy layers, masked gradients leave
    the zero entries alone, and the loop evaluates after the steps ``eval_at`` picks and the
    last."""
    p = example("multiply")
    exact = build(p.layout, lam=3.0, snap=False, xp=get_xp()).layers[:2]
    rng = np.random.default_rng(0)
    noisy = [with_weights(ly, {k: v + asarray(1e-4 * rng.standard_normal(v.shape)) * (v != 0)
                               for k, v in weight_arrays(ly).items()}) for ly in exact]
    masks = [{k: (v != 0).astype(float) for k, v in weight_arrays(ly).items()} for ly in exact]
    model = StackParameters(noisy)
    for got, want in zip(model.current(), noisy):
        for k, v in weight_arrays(want).items():
            np.testing.assert_array_equal(to_host(weight_arrays(got)[k]), to_host(v))
    X = asarray(np.stack([punchcard(p)] * 4))
    Y = loop_forward(X, exact, 1)[0]

    def loss(grad):
        Z, tape = loop_forward(X, model.current(), 1)
        if grad:
            for params, g, mask in zip(model.layers, loop_backward(Z - Y, tape, 2)[1], masks):
                params.set_grads(g, mask)
        return 0.5 * ((Z - Y) ** 2).sum()  # left on the device: the loop reads it

    before = float(loss(False))
    result = fit(model, Adam(model.parameters(), lr=2e-5), iter(lambda: {}, None),
                 lambda m, b, ctx: loss(True),
                 TrainConfig(steps=5, eval_at=lambda step: step % 3 == 0, quiet=True),
                 evaluate=lambda m: {"val": float(loss(False))})
    assert [h["step"] for h in result.history] == [1, 4, 5]
    assert result.history[-1]["val"] < before / 2
    zero = to_host(masks[0]["W1"] == 0)
    np.testing.assert_array_equal(to_host(model.layers[0].W1.data)[zero],
                                  to_host(noisy[0].W1)[zero])

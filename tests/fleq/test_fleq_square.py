"""x^2 two ways (§6.3): the 2-layer Lemma 7 block and Yarotsky's sawtooth ReLU network."""

import numpy as np
import pytest

from tpcore.backend import to_host
from tpcore.errors import TpcoreError
from tpcore.fleq.blocks import matmul_block, run_block
from tpcore.fleq.sawtooth import hidden_layers, relu_forward, sawtooth_square_net

GRID = np.linspace(-1.0, 1.0, 2**14 + 1)                # holds k / 2^13: every m <= 12's midpoints


@pytest.mark.parametrize("m", range(1, 13))
def test_sawtooth_error_is_two_to_minus_2m_minus_2(m):
    net = sawtooth_square_net(m)
    assert hidden_layers(net) == m and max(W.shape[0] for W, _ in net) == 4
    err = np.abs(relu_forward(net, GRID) - GRID**2)
    assert err.max() == pytest.approx(2.0 ** (-2 * m - 2), rel=1e-9)
    worst = np.abs(GRID[err.argmax()]) * 2 ** (m + 1)    # the worst point is a midpoint
    assert worst == pytest.approx(round(worst)) and round(worst) % 2 == 1
    knots = np.arange(-2**m, 2**m + 1) / 2**m            # interpolation: exact at k / 2^m
    np.testing.assert_allclose(relu_forward(net, knots), knots**2, atol=1e-15)


def test_sawtooth_needs_a_composition():
    with pytest.raises(TpcoreError, match="m = 0"):
        sawtooth_square_net(0)


def _attention_square_error(c, symmetric=False):
    x = np.linspace(-1.0, 1.0, 201)
    blk = matmul_block(1, 3, c=c, C=30.0, symmetric=symmetric)
    assert (blk.n_layers, blk.n_heads) == (2, 2 if symmetric else 1)
    out = to_host(run_block(blk, x[:, None, None], x[:, None, None]))[:, 0, 0]
    return np.abs(out - x**2).max()


def test_attention_square_error_falls_with_c_to_the_float64_floor():
    cs = [1e-2, 1e-3, 1e-4, 1e-5, 1e-6]
    errs = [_attention_square_error(c) for c in cs]
    for c, e in zip(cs, errs):                            # Taylor term c z^2 / 2, z = x^2 <= 1
        assert e == pytest.approx(c / 2, rel=0.05)
    floor = min(_attention_square_error(c) for c in (1e-7, 1e-8))
    assert floor < 1e-7 < errs[-1]
    assert _attention_square_error(1e-10) > 100 * floor   # round-off eps / c takes over
    assert _attention_square_error(1e-5, symmetric=True) < 1e-9

"""Function blocks against NumPy: alone, with extra non-scratchpad columns, batched, hard/soft."""

import numpy as np
import pytest

from tpcore.backend import to_host
from tpcore.errors import TpcoreError
from tpcore.fleq.blocks import (
    DEFAULT_GATE,
    combine_block,
    matmul_block,
    run_block,
    sigmoid_block,
    sigmoid_width_block,
    transpose_block,
)
from tpcore.fleq.fits import SigmoidFit, fit_sigmoids

D, S = 4, 3 * 4 + 16


def _run(*args, **kwargs):
    """``run_block``'s output on the host."""
    return to_host(run_block(*args, **kwargs))


def _pad(M, d=D):
    out = np.zeros((d, d))
    out[: M.shape[0], : M.shape[1]] = M
    return out


@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (1.0, -1.0), (0.01, 0.0)])
@pytest.mark.parametrize("hard", [False, True])
def test_combine_matches_numpy(rng, alpha, beta, hard):
    A, B = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    blk = combine_block(D, S, alpha, beta)
    out = _run(blk, A, B, n_extra=7, hard=hard)
    np.testing.assert_allclose(out, _pad(alpha * A + beta * B), atol=1e-12)
    assert blk.n_layers == 2 and blk.n_heads == 1


def test_matmul_error_follows_taylor_term(rng):
    A, B = rng.normal(size=(4, 3)), rng.normal(size=(4, 2))
    errs = []
    for c in (1e-4, 1e-7):
        out = _run(matmul_block(D, S, c=c, C=30.0), A, B, n_extra=5)
        np.testing.assert_allclose(out[3:], 0, atol=1e-6)
        np.testing.assert_allclose(out[:, 2:], 0, atol=1e-6)
        errs.append(np.abs(out[:3, :2] - A.T @ B).max())
    assert errs[1] < 1e-6 < errs[0]
    assert errs[0] / errs[1] > 100         # error ~ c z^2 / 2 falls with c


def test_symmetric_matmul_is_more_accurate(rng):
    A, B = rng.uniform(-1, 1, size=(4, 4)), rng.uniform(-1, 1, size=(4, 4))
    best = min(np.abs(_run(matmul_block(D, S, c=c), A, B) - A.T @ B).max()
               for c in (1e-6, 1e-7, 1e-8))
    sym = _run(matmul_block(D, S, c=1e-5, symmetric=True), A, B)
    assert np.abs(sym - A.T @ B).max() < min(1e-8, best / 50)


def test_matmul_batched_equals_single(rng):
    A, B = rng.normal(size=(5, 4, 4)), rng.normal(size=(5, 4, 4))
    blk = matmul_block(D, S, c=1e-6)
    out = _run(blk, A, B)
    np.testing.assert_allclose(out, np.swapaxes(A, 1, 2) @ B, atol=1e-4)
    np.testing.assert_allclose(out[2], _run(blk, A[2], B[2]), atol=1e-13)


@pytest.mark.parametrize("hard", [False, True])
def test_transpose(rng, hard):
    A = rng.normal(size=(3, 4))
    out = _run(transpose_block(D, S), A, n_extra=3, hard=hard)
    np.testing.assert_allclose(out, _pad(A.T), atol=1e-12)


def test_transpose_needs_room():
    with pytest.raises(TpcoreError, match="3d \\+ d\\^2"):
        transpose_block(D, 3 * D)


def test_sigmoid_block_is_exact_sum_of_sigmoids(rng):
    fits = [fit_sigmoids(np.sin, -2, 2, 12), fit_sigmoids(np.cos, -2, 2, 9)]
    blk = sigmoid_block(D, S, fits)
    x = rng.uniform(-2, 2, size=(1, 4))
    for j, f in enumerate(fits):
        e = np.zeros((2, 1))
        e[j] = 1.0
        out = _run(blk, x, e, n_extra=4)
        np.testing.assert_allclose(out[0], f(x[0]), atol=1e-11)
    assert blk.n_layers == 3 and blk.n_heads == 12


def test_multivariate_sigmoid_block(rng):
    a, b, c = rng.normal(size=(5, 3)), rng.normal(size=5), rng.normal(size=5)
    fit = SigmoidFit(a, b, c)
    X = rng.normal(size=(3, 4))
    out = _run(sigmoid_block(D, S, [fit]), X, np.ones((1, 1)))
    ref = (c / (1 + np.exp(-(X.T @ a.T + b)))).sum(1)
    np.testing.assert_allclose(out[0], ref, atol=1e-12)


def test_bad_block_arguments():
    with pytest.raises(TpcoreError, match="s >= 3d"):
        combine_block(4, 8, 1, 1)
    with pytest.raises(TpcoreError, match="matmul constants"):
        matmul_block(4, 12, c=-1.0)
    with pytest.raises(TpcoreError, match="exceeds"):
        _run(combine_block(2, 6, 1, 1), np.ones((3, 1)))


def test_corollary6_one_head_sigmoid_sum():
    fit = fit_sigmoids(np.sin, -2, 2, 12)
    x = np.array([[0.7]])
    errs = []
    for C in (5.0, 30.0):
        blk = sigmoid_width_block(2, 3 * 2 + 12 + 3, fit, C=C)
        out = _run(blk, x, n_extra=2)
        errs.append(abs(out[0, 0] - fit(0.7)))
        assert blk.n_heads == 1 and blk.n_layers == 3
    # off-diagonal leakage ~ e^-C; at C = 30 only rounding is left, and the fit's coefficients
    # (|c| summing to ~1.5e8) cancel, so its floor depends on the summation order (the GPU's
    # differs from the CPU's): a bound of 100 ulps of sum |c|
    floor = 100 * np.finfo(np.float64).eps * np.abs(fit.c).sum()
    assert errs[1] < floor < errs[0]
    with pytest.raises(TpcoreError, match="s >= 3d \\+ m"):
        sigmoid_width_block(2, 10, fit)


def test_smaller_gate_lowers_the_float32_floor(rng):
    A, B = rng.uniform(-1, 1, (4, 4)), rng.uniform(-1, 1, (4, 4))
    errs = []
    for C in (DEFAULT_GATE, 100.0):
        blk = combine_block(D, S, 1.0, 1.0, gate=C)
        errs.append(np.abs(_run(blk, A, B, dtype=np.float32) - (A + B)).max())
    assert errs[1] < errs[0] / 20
    with pytest.raises(TpcoreError, match="gating constant"):
        combine_block(D, S, 1.0, 1.0, gate=0.0)

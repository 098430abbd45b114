"""Function blocks against NumPy: alone, with extra non-scratchpad columns, batched, hard/soft."""

import numpy as np
import pytest

from tpcore.errors import TpcoreError
from tpcore.looped import functions as F

D, S = 4, 3 * 4 + 16


def _pad(M, d=D):
    out = np.zeros((d, d))
    out[: M.shape[0], : M.shape[1]] = M
    return out


@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (1.0, -1.0), (0.01, 0.0)])
@pytest.mark.parametrize("hard", [False, True])
def test_combine_matches_numpy(rng, alpha, beta, hard):
    A, B = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    blk = F.combine_block(D, S, alpha, beta)
    out = F.run_block(blk, A, B, n_extra=7, hard=hard)
    np.testing.assert_allclose(out, _pad(alpha * A + beta * B), atol=1e-12)
    assert blk.n_layers == 2 and blk.n_heads == 1


def test_matmul_error_follows_taylor_term(rng):
    A, B = rng.normal(size=(4, 3)), rng.normal(size=(4, 2))
    errs = []
    for c in (1e-4, 1e-7):
        out = F.run_block(F.matmul_block(D, S, c=c, C=30.0), A, B, n_extra=5)
        np.testing.assert_allclose(out[3:], 0, atol=1e-6)
        np.testing.assert_allclose(out[:, 2:], 0, atol=1e-6)
        errs.append(np.abs(out[:3, :2] - A.T @ B).max())
    assert errs[1] < 1e-6 < errs[0]
    assert errs[0] / errs[1] > 100         # error ~ c z^2 / 2 falls with c


def test_symmetric_matmul_is_more_accurate(rng):
    A, B = rng.uniform(-1, 1, size=(4, 4)), rng.uniform(-1, 1, size=(4, 4))
    best = min(np.abs(F.run_block(F.matmul_block(D, S, c=c), A, B) - A.T @ B).max()
               for c in (1e-6, 1e-7, 1e-8))
    sym = F.run_block(F.matmul_block(D, S, c=1e-5, symmetric=True), A, B)
    assert np.abs(sym - A.T @ B).max() < min(1e-8, best / 50)


def test_matmul_batched_equals_single(rng):
    A, B = rng.normal(size=(5, 4, 4)), rng.normal(size=(5, 4, 4))
    blk = F.matmul_block(D, S, c=1e-6)
    out = F.run_block(blk, A, B)
    np.testing.assert_allclose(out, np.swapaxes(A, 1, 2) @ B, atol=1e-4)
    np.testing.assert_allclose(out[2], F.run_block(blk, A[2], B[2]), atol=1e-13)


@pytest.mark.parametrize("hard", [False, True])
def test_transpose(rng, hard):
    A = rng.normal(size=(3, 4))
    out = F.run_block(F.transpose_block(D, S), A, n_extra=3, hard=hard)
    np.testing.assert_allclose(out, _pad(A.T), atol=1e-12)


def test_transpose_needs_room():
    with pytest.raises(TpcoreError, match="3d \\+ d\\^2"):
        F.transpose_block(D, 3 * D)


def test_sigmoid_block_is_exact_sum_of_sigmoids(rng):
    fits = [F.fit_sigmoids(np.sin, -2, 2, 12), F.fit_sigmoids(np.cos, -2, 2, 9)]
    blk = F.sigmoid_block(D, S, fits)
    x = rng.uniform(-2, 2, size=(1, 4))
    for j, f in enumerate(fits):
        e = np.zeros((2, 1))
        e[j] = 1.0
        out = F.run_block(blk, x, e, n_extra=4)
        np.testing.assert_allclose(out[0], f(x[0]), atol=1e-11)
    assert blk.n_layers == 3 and blk.n_heads == 12


def test_multivariate_sigmoid_block(rng):
    a, b, c = rng.normal(size=(5, 3)), rng.normal(size=5), rng.normal(size=5)
    fit = F.SigmoidFit(a, b, c)
    X = rng.normal(size=(3, 4))
    out = F.run_block(F.sigmoid_block(D, S, [fit]), X, np.ones((1, 1)))
    ref = (c / (1 + np.exp(-(X.T @ a.T + b)))).sum(1)
    np.testing.assert_allclose(out[0], ref, atol=1e-12)


def test_least_squares_fit_improves_with_m():
    xs = np.linspace(0.5, 4, 999)
    errs = [np.abs(F.fit_sigmoids(lambda x: 1 / x, 0.5, 4, m)(xs) - 1 / xs).max()
            for m in (10, 40)]
    assert errs[1] < errs[0] / 10 and errs[1] < 1e-3


def test_lemma10_and_lemma11_fits():
    inv = F.inverse_fit(0.05, 0.2, 8.0, steep=40.0)
    xs = np.linspace(0.25, 8, 2000)
    assert np.abs(inv(xs) - 1 / xs).max() < 0.1
    sq = F.sqrt_fit(0.05, 4.0)
    xs = np.linspace(0.05, 4, 2000)
    assert np.abs(sq(xs) - np.sqrt(xs)).max() < 0.1
    assert sq.m == int(np.ceil(np.sqrt(4.0) / 0.05))


def test_bad_block_arguments():
    with pytest.raises(TpcoreError, match="s >= 3d"):
        F.combine_block(4, 8, 1, 1)
    with pytest.raises(TpcoreError, match="matmul constants"):
        F.matmul_block(4, 12, c=-1.0)
    with pytest.raises(TpcoreError, match="exceeds"):
        F.run_block(F.combine_block(2, 6, 1, 1), np.ones((3, 1)))


def test_corollary6_one_head_sigmoid_sum():
    fit = F.fit_sigmoids(np.sin, -2, 2, 12)
    x = np.array([[0.7]])
    errs = []
    for C in (5.0, 30.0):
        blk = F.sigmoid_width_block(2, 3 * 2 + 12 + 3, fit, C=C)
        out = F.run_block(blk, x, n_extra=2)
        errs.append(abs(out[0, 0] - fit(0.7)))
        assert blk.n_heads == 1 and blk.n_layers == 3
    assert errs[1] < 1e-8 < errs[0]                # off-diagonal leakage ~ e^-C
    with pytest.raises(TpcoreError, match="s >= 3d \\+ m"):
        F.sigmoid_width_block(2, 10, fit)


def test_smaller_gate_lowers_the_float32_floor(rng):
    A, B = rng.uniform(-1, 1, (4, 4)), rng.uniform(-1, 1, (4, 4))
    errs = []
    for C in (F.GATE, 100.0):
        with F.gate_constant(C):
            blk = F.combine_block(D, S, 1.0, 1.0)
        errs.append(np.abs(F.run_block(blk, A, B, dtype=np.float32) - (A + B)).max())
    assert errs[1] < errs[0] / 20
    assert F.current_gate() == F.GATE
    with pytest.raises(TpcoreError, match="gating constant"), F.gate_constant(0.0):
        pass

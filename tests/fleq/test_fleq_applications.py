"""The paper's applications as FLEQ programs against NumPy (small instances, float64)."""

import numpy as np

from tpcore.fleq import applications as AP

K = AP.Constants(lam=30.0, c=1e-5, C=30.0, symmetric=True, m=120)


def test_calculator_batch(rng):
    a, b, c = rng.uniform(0.5, 1, 4), rng.uniform(0.5, 1, 4), rng.uniform(0, 0.5, 4)
    d = rng.uniform(0.6, 3.8, 4) / ((a + b) - c)
    r = AP.calculator(a, b, c, d, K)
    assert r["max_rel_error"] < 1e-6
    assert r["stats"]["layers"] == 6 + 3 < 12          # Theorem 4: 12 layers


def test_calculator_error_falls_with_m(rng):
    a, b, c = rng.uniform(0.5, 1, 3), rng.uniform(0.5, 1, 3), rng.uniform(0, 0.5, 3)
    d = rng.uniform(0.6, 3.8, 3) / ((a + b) - c)
    errs = [AP.calculator(a, b, c, d, AP.Constants(m=m))["max_rel_error"] for m in (8, 40)]
    assert errs[1] < errs[0] / 10


def test_newton_inverse(rng):
    A = rng.normal(size=(3, 3)) + 2 * np.eye(3)
    r = AP.newton_inverse(A, T=16, k=K)
    assert r["numpy_newton_vs_inv"] < 1e-12
    assert r["rel_error_vs_inv"] < 1e-6


def test_power_iteration(rng):
    Q, _ = np.linalg.qr(rng.normal(size=(2, 2)))
    A = Q @ np.diag([2.0, 0.5]) @ Q.T
    r = AP.power_iteration(A, T=8, T2=2, k=K)
    assert r["rel_error_vs_numpy_steps"] < 1e-6
    assert r["numpy_steps_vs_eigvec"] < 1e-3


def test_linear_sgd_with_pointer_increments(rng):
    X = rng.normal(size=(3, 2))
    y = X @ rng.normal(size=2)
    r = AP.linear_sgd(X, y, eta=0.2, T=2, k=K)
    assert r["rel_error_vs_numpy"] < 1e-6
    assert r["steps"] == 2 * (9 * 3 + 5)             # T (9 D + 5)


def test_mlp_sgd(rng):
    X, y = rng.normal(size=(2, 2)), rng.normal(size=2)
    W1, b1, W2 = rng.normal(size=(2, 2)) * 0.5, rng.normal(size=2) * 0.1, rng.normal(size=2)
    r = AP.mlp_sgd(X, y, W1, b1, W2, 0.1, eta=0.3, T=1, k=K)
    assert r["rel_error_vs_numpy"] < 1e-6


def test_mlp_sgd_with_algorithm11_element_loop(rng):
    X, y = rng.normal(size=(1, 2)), rng.normal(size=1)
    W1, b1, W2 = rng.normal(size=(2, 2)) * 0.5, rng.normal(size=2) * 0.1, rng.normal(size=2)
    r = AP.mlp_sgd(X, y, W1, b1, W2, 0.1, eta=0.3, T=1, k=K, hadamard="loop")
    assert r["rel_error_vs_numpy"] < 1e-6

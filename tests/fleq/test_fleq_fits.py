"""Sums of sigmoids: least-squares fits and the Lemma 10/11 constructions."""

import numpy as np
import pytest

from tpcore.fleq.fits import fit_sigmoids, inverse_fit, sqrt_fit

pytestmark = pytest.mark.host_only("sigmoid fits are least-squares problems solved on the host")


def test_least_squares_fit_improves_with_m():
    xs = np.linspace(0.5, 4, 999)
    errs = [np.abs(fit_sigmoids(lambda x: 1 / x, 0.5, 4, m)(xs) - 1 / xs).max()
            for m in (10, 40)]
    assert errs[1] < errs[0] / 10 and errs[1] < 1e-3


def test_lemma10_and_lemma11_fits():
    inv = inverse_fit(0.05, 0.2, 8.0, steep=40.0)
    xs = np.linspace(0.25, 8, 2000)
    assert np.abs(inv(xs) - 1 / xs).max() < 0.1
    sq = sqrt_fit(0.05, 4.0)
    xs = np.linspace(0.05, 4, 2000)
    assert np.abs(sq(xs) - np.sqrt(xs)).max() < 0.1
    assert sq.m == int(np.ceil(np.sqrt(4.0) / 0.05))

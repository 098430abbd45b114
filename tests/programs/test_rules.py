"""Rules for numerical MLP tables: exact on every key they are fitted on, and short where the
table is piecewise constant."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from tpcore.programs import rules

pytestmark = pytest.mark.host_only("rule fitting is host code over tables")


def _grid(xs, ys):
    x, y = np.meshgrid(xs, ys, indexing="ij")
    return np.stack([x.ravel(), y.ravel()], axis=1)


@pytest.mark.parametrize("lo, hi, want", [
    (Fraction(1, 3), Fraction(1, 2), Fraction(2, 5)),
    (Fraction(-1, 2), Fraction(1, 2), Fraction(0)),
    (Fraction(7, 2), float("inf"), Fraction(4)),
    (float("-inf"), Fraction(-7, 2), Fraction(-4)),
    (Fraction(0), Fraction(1, 10), Fraction(1, 11)),
    (Fraction(3), Fraction(4), Fraction(7, 2)),
])
def test_simplest_between(lo, hi, want):
    got = rules.simplest_between(lo, hi)
    assert got == want and lo < got < hi


def test_one_input_intervals():
    x = np.arange(20)[:, None]
    labels = np.where(x[:, 0] <= 6, 3, np.where(x[:, 0] <= 13, 1, 5))
    r = rules.fit(x, labels)
    assert r.outer is None and not r.exceptions
    assert [(c.p, c.q, c.r, c.out) for c in r.bands[0].cuts] == [(0, 1, 6, 3), (0, 1, 13, 1)]
    assert r.bands[0].last == 5 and r.size() == 5


def test_sloped_cut_is_exact_and_simple():
    keys = _grid(np.arange(40), np.arange(300))
    labels = np.where(3 * keys[:, 1] <= 17 * keys[:, 0] + 5, 2, 7)
    r = rules.fit(keys, labels)
    assert len(r.bands) == 1 and r.size() == 3
    (cut,) = r.bands[0].cuts
    assert Fraction(cut.p, cut.q) == Fraction(17, 3)
    assert np.array_equal(r.evaluate(keys), labels)


def test_rare_outputs_become_exceptions():
    keys = _grid(np.arange(30), np.arange(30))
    labels = np.where(keys[:, 0] + keys[:, 1] <= 20, 0, 1)
    odd = (keys[:, 0] == 7) & (keys[:, 1] == 13) | (keys[:, 0] == 20) & (keys[:, 1] == 1)
    labels[odd] = 4
    r = rules.fit(keys, labels)
    assert sorted(o for _, o in r.exceptions) == [4, 4]
    assert np.array_equal(r.evaluate(keys), labels)


def test_random_tables_are_reproduced_on_their_keys():
    rng = np.random.default_rng(0)
    for trial in range(30):
        keys = _grid(rng.choice(50, 12, replace=False), rng.choice(80, 15, replace=False))
        keys = keys[rng.random(len(keys)) < 0.7]
        w = rng.normal(size=(3, 4))
        labels = np.argmax(keys @ w[:2] + w[2], axis=1) if trial % 2 else rng.integers(
            0, 3, len(keys))
        r = rules.fit(keys, labels)
        assert r is not None and np.array_equal(r.evaluate(keys), labels)


def test_fractions_get_horizontal_cuts_at_their_own_values():
    keys = _grid([0.25, 0.5, 1 / 3], [0.1, 0.2, 0.7])
    labels = (keys[:, 1] > 0.2).astype(int)
    r = rules.fit(keys, labels)
    assert all(c.p == 0 and c.r in keys[:, 1] for b in r.bands for c in b.cuts)
    assert np.array_equal(r.evaluate(keys), labels)


def test_set_tests_cover_every_key():
    rng = np.random.default_rng(1)
    for _ in range(20):
        keys = _grid(np.arange(6), np.arange(9))
        labels = np.where(keys[:, 1] >= 5, 2, rng.integers(0, 4, len(keys)))
        tests, default = rules.fit_sets(keys, labels)
        got = []
        for k in map(tuple, keys.tolist()):
            for t in tests:
                if (k if t.arg is None else k[t.arg]) in t.values:
                    got.append(t.out)
                    break
            else:
                got.append(default)
        assert got == labels.tolist()
    keys = _grid(np.arange(4), np.arange(5))
    tests, default = rules.fit_sets(keys, np.where(keys[:, 1] >= 3, 6, 1))
    assert [(t.arg, t.values, t.out) for t in tests] in ([(1, (3, 4), 6)], [(1, (0, 1, 2), 1)])

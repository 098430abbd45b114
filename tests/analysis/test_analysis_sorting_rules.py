"""The two sorting algorithms and the agreement measurement."""

import numpy as np
import pytest

from tpcore.analysis.sorting_rules import (
    concave_argmax,
    min_greater_previous,
    rule_agreement,
)
from tpcore.tasks.sorting import TASKS, generate

pytestmark = pytest.mark.host_only("the sorting rules run on host lists")


def _truth(lists, lengths, v):
    valid = np.arange(lists.shape[1]) < lengths[:, None]
    return np.sort(np.where(valid, lists, v), axis=1)


def test_concave_argmax_is_the_order_statistic(rng):
    for name in ("causal", "bidirectional"):
        task = TASKS[name]
        for gen in ("random", "hard"):
            lists, lengths = generate(task, gen, 2000, rng)
            assert (concave_argmax(lists, lengths, 10) == _truth(lists, lengths, 10)).all()


def test_min_greater_previous_exact_on_distinct_values(rng):
    task = TASKS["distinct"]
    lists, lengths = generate(task, "random", 2000, rng)
    assert (min_greater_previous(lists, lengths, 15) == _truth(lists, lengths, 15)).all()


def test_min_greater_previous_fails_on_repeats():
    lists = np.array([[1, 2, 1, 5]])
    lengths = np.array([3])
    assert min_greater_previous(lists, lengths, 10).tolist() == [[1, 2, 2, 10]]
    # nothing greater than the previous item: the rule repeats it
    assert min_greater_previous(np.array([[4, 4]]), np.array([2]), 10).tolist() == [[4, 4]]


def test_rule_agreement_counts():
    lists = np.array([[1, 2, 1]])
    lengths = np.array([3])
    truth = np.array([[1, 1, 2]])
    g = rule_agreement(truth, lists, lengths, 10)
    assert g["concave"] == 1.0 and g["items"] == 3 and g["items_differ"] == 1
    assert abs(g["min_greater"] - 2 / 3) < 1e-12
    assert g["differ_follows_concave"] == 1.0 and g["differ_follows_min_greater"] == 0.0
    rule1 = np.array([[1, 2, 2]])
    g = rule_agreement(rule1, lists, lengths, 10)
    assert g["min_greater"] == 1.0 and g["differ_follows_min_greater"] == 1.0
    assert g["items_wrong"] == 1 and g["wrong_follows_min_greater"] == 1.0
    g = rule_agreement(np.array([[1, 1, 5]]), lists, lengths, 10)
    assert g["items_wrong"] == 1 and g["wrong_follows_min_greater"] == 0.0
    distinct = rule_agreement(np.array([[0, 1]]), np.array([[1, 0]]), np.array([2]), 10)
    assert distinct["items_differ"] == 0 and distinct["differ_follows_concave"] is None

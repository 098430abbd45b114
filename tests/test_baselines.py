"""Unigram tagger and multinomial Naive Bayes against hand-computed values."""

import math

import numpy as np
import pytest

from tpcore.baselines import NaiveBayes, UnigramTagger
from tpcore.errors import TpcoreError

pytestmark = pytest.mark.host_only("the count-based baselines are host code")


def test_unigram_most_frequent_tag_ties_and_unseen():
    tokens = np.array([[5, 6, 7, 5], [5, 6, 8, 0]])
    targets = np.array([[1, 2, 0, 1], [2, 2, 1, 0]])
    mask = np.array([[True, True, True, True], [True, True, True, False]])
    t = UnigramTagger.fit(tokens, targets, mask, vocab_size=10, n_tags=3)
    # word 5: tag 1 twice, tag 2 once -> 1; word 6: tag 2; word 7: 0; 8: 1; unseen (and the
    # padding id 0, never under the mask) -> default 0
    assert t.table[[5, 6, 7, 8, 9, 0]].tolist() == [1, 2, 0, 1, 0, 0]
    assert t.predict(np.array([[9, 5]])).tolist() == [[0, 1]]
    tie = UnigramTagger.fit(np.array([[3, 3]]), np.array([[2, 1]]), np.ones((1, 2), bool), 4, 3)
    assert tie.table[3] == 1
    with pytest.raises(TpcoreError):
        UnigramTagger.fit(tokens, targets, mask, 10, 3, default=3)


def test_naive_bayes_matches_formula():
    # vocabulary 0..4; id 0 is padding (ignored)
    tokens = np.array([[1, 1, 2, 0], [3, 4, 0, 0], [1, 3, 3, 0]])
    labels = np.array([0, 1, 1])
    nb = NaiveBayes.fit(tokens, labels, vocab_size=5, n_classes=2, alpha=1.0, ignore=(0,))
    # class 0 counts: w1=2, w2=1 (3 words); class 1: w1=1, w3=3, w4=1 (5 words); V' = 4
    assert nb.log_like[1, 0] == pytest.approx(math.log(3 / 7))
    assert nb.log_like[3, 1] == pytest.approx(math.log(4 / 9))
    assert nb.log_prior.tolist() == pytest.approx([math.log(1 / 3), math.log(2 / 3)])
    x = np.array([[2, 2, 0], [3, 0, 0]])
    s0 = math.log(1 / 3) + 2 * math.log(2 / 7)
    s1 = math.log(2 / 3) + 2 * math.log(1 / 9)
    assert nb.predict(x)[0] == int(s1 > s0)
    assert nb.predict(x)[1] == 1
    with pytest.raises(TpcoreError, match="word id 7"):
        nb.predict(np.array([[7]]))
    with pytest.raises(TpcoreError, match="alpha"):
        NaiveBayes.fit(tokens, labels, 5, 2, alpha=0.0)

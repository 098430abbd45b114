"""The synthetic corpora: seeded, valid IOB2, context-dependent by construction."""

from collections import defaultdict

import pytest

from tpcore.baselines import UnigramTagger
from tpcore.metrics import entities
from tpcore.tasks.nlp import prepare_classification, prepare_ner, tag_sequences
from tpcore.tasks.synthetic_text import (
    AMBIGUOUS,
    CUES,
    classification_corpus,
    ner_corpus,
)

pytestmark = pytest.mark.host_only("task data generation on the host")


def test_seeded_and_split_streams_differ():
    a, b = ner_corpus(40, 10, 10, seed=5), ner_corpus(40, 10, 10, seed=5)
    assert [s.words for s in a["train"]] == [s.words for s in b["train"]]
    assert [s.words for s in a["train"][:10]] != [s.words for s in a["dev"]]
    c = ner_corpus(40, 10, 10, seed=6)
    assert [s.words for s in a["train"]] != [s.words for s in c["train"]]
    assert all(len(s.words) <= 30 for s in a["train"])


def test_previous_word_decides_ambiguous_names():
    types = defaultdict(set)
    for s in ner_corpus(500, 1, 1, seed=0)["train"]:
        for kind, i, _ in entities(s.tags):
            if s.words[i] in AMBIGUOUS:
                types[s.words[i]].add(kind)
                assert s.words[i - 1] in CUES[kind]
        assert all(t == "O" or t[:2] in ("B-", "I-") for t in s.tags)
        assert not any(t.startswith("I-") and p == "O" for p, t in zip(s.tags, s.tags[1:]))
    assert all(types[w] == {"PER", "LOC", "ORG"} for w in AMBIGUOUS)


def test_unigram_baseline_is_far_from_perfect():
    from tpcore.metrics import conll_scores

    data = prepare_ner(ner_corpus(1000, 10, 300, seed=0))
    tr, te = data.splits["train"], data.splits["test"]
    t = UnigramTagger.fit(tr["tokens"], tr["targets"], tr["mask"], len(data.vocab),
                          len(data.labels))
    s = conll_scores(tag_sequences(te["targets"], te["mask"], data.labels),
                     tag_sequences(t.predict(te["tokens"]), te["mask"], data.labels))
    assert 40 < s.f1 < 75


def test_negation_flips_the_label():
    ex = classification_corpus(300, 1, 1, seed=0)["train"]
    data = prepare_classification({"train": ex})
    assert data.labels.names == ["pos", "neg"] or data.labels.names == ["neg", "pos"]
    negated = [e for e in ex if "not" in e.words]
    assert negated and any(e.label == "pos" for e in negated)
    assert any(e.label == "neg" for e in negated)

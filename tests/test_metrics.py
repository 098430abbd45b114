"""conlleval entity scores: hand-computed cases, the script's own streaming algorithm on random
tag sequences, and seqeval when it is installed."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpcore.errors import TpcoreError
from tpcore.metrics import accuracy, conll_scores, entities

pytestmark = pytest.mark.host_only("metrics of host label sequences")


def test_entities_iob2_and_edge_cases():
    assert entities(["B-PER", "I-PER", "O", "B-LOC"]) == [("PER", 0, 1), ("LOC", 3, 3)]
    # I after O opens a chunk (IOB1 / broken IOB2)
    assert entities(["O", "I-ORG", "I-ORG"]) == [("ORG", 1, 2)]
    # a type change inside I tags splits the chunk
    assert entities(["B-PER", "I-LOC"]) == [("PER", 0, 0), ("LOC", 1, 1)]
    # B after I of the same type starts a new chunk
    assert entities(["B-PER", "I-PER", "B-PER"]) == [("PER", 0, 1), ("PER", 2, 2)]
    # chunk running to the end of the sentence; IOBES
    assert entities(["O", "B-MISC", "I-MISC"]) == [("MISC", 1, 2)]
    assert entities(["S-PER", "B-LOC", "E-LOC", "I-LOC"]) == [
        ("PER", 0, 0), ("LOC", 1, 2), ("LOC", 3, 3)]
    # types may contain dashes (split at the first one)
    assert entities(["B-X-Y", "I-X-Y"]) == [("X-Y", 0, 1)]
    assert entities(["O", "O"]) == []


def test_hand_computed_scores():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "B-MISC"]]
    s = conll_scores(gold, pred)
    # gold: PER(0-1) LOC(3) ORG(0); predicted: PER(0-1) ORG(3) ORG(0) MISC(1); correct: 2
    assert (s.correct, s.predicted, s.gold) == (2, 4, 3)
    assert s.precision == pytest.approx(50.0)
    assert s.recall == pytest.approx(200 / 3)
    assert s.f1 == pytest.approx(2 * 50 * (200 / 3) / (50 + 200 / 3))
    assert s.accuracy == pytest.approx(100 * 4 / 6)
    assert s.per_type["ORG"]["precision"] == pytest.approx(50.0)
    assert s.per_type["LOC"]["recall"] == 0.0
    # a partial match (wrong boundary) counts as wrong
    s = conll_scores([["B-PER", "I-PER"]], [["B-PER", "O"]])
    assert (s.correct, s.predicted, s.gold) == (0, 1, 1)
    # chunks never run across sentences
    s = conll_scores([["B-PER"], ["I-PER"]], [["B-PER", ], ["I-PER"]])
    assert (s.correct, s.predicted, s.gold) == (2, 2, 2)


def test_degenerate_scores_and_errors():
    s = conll_scores([["O", "O"]], [["O", "O"]])
    assert (s.precision, s.recall, s.f1, s.accuracy) == (0.0, 0.0, 0.0, 100.0)
    s = conll_scores([["B-PER"]], [["O"]])
    assert (s.precision, s.recall, s.f1) == (0.0, 0.0, 0.0)
    with pytest.raises(TpcoreError, match="sentence 0"):
        conll_scores([["O"]], [["O", "O"]])
    with pytest.raises(TpcoreError, match="2 gold"):
        conll_scores([["O"], ["O"]], [["O"]])
    assert accuracy([1, 2, 3, 4], [1, 2, 0, 4]) == 75.0
    with pytest.raises(TpcoreError):
        accuracy([1], [1, 2])


def _conlleval_counts(gold, pred):
    """The counting loop of conlleval.pl, transcribed: a token stream with an ``inCorrect`` flag,
    sentence boundaries acting as ``O`` (independent of :func:`entities`)."""

    def split(t):
        return tuple(t.split("-", 1)) if "-" in t else (t, "")

    def end(pt, t, ptype, ty):
        return ((pt, t) in {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"), ("E", "E"),
                            ("E", "I"), ("E", "O"), ("B", "S"), ("I", "S"), ("E", "B"),
                            ("E", "S"), ("S", "B"), ("S", "I"), ("S", "O"), ("S", "E"),
                            ("S", "S")}
                or (pt != "O" and ptype != ty))

    def start(pt, t, ptype, ty):
        return (t in ("B", "S") or (pt, t) in {("E", "E"), ("E", "I"), ("O", "E"), ("O", "I"),
                                               ("S", "E"), ("S", "I")}
                or (t != "O" and ptype != ty))

    stream = []
    for g, p in zip(gold, pred):
        stream += list(zip(g, p)) + [("O", "O")]
    correct = found_g = found_p = 0
    in_correct = False
    lc, lct, lg, lgt = "O", "", "O", ""
    for gtag, ptag in stream:
        c, ct = split(gtag)
        g, gt = split(ptag)
        if in_correct:
            ec, eg = end(lc, c, lct, ct), end(lg, g, lgt, gt)
            if ec and eg and lgt == lct:
                in_correct = False
                correct += 1
            elif ec != eg or gt != ct:
                in_correct = False
        sc, sg = start(lc, c, lct, ct), start(lg, g, lgt, gt)
        if sc and sg and gt == ct:
            in_correct = True
        found_g += sc
        found_p += sg
        lc, lct, lg, lgt = c, ct, g, gt
    return correct, found_p, found_g


TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "E-PER", "S-LOC"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from(TAGS), st.sampled_from(TAGS)),
                         min_size=1, max_size=8), min_size=1, max_size=4))
def test_matches_conlleval_streaming_algorithm(sentences):
    gold = [[g for g, _ in s] for s in sentences]
    pred = [[p for _, p in s] for s in sentences]
    s = conll_scores(gold, pred)
    assert (s.correct, s.predicted, s.gold) == _conlleval_counts(gold, pred)


def test_matches_seqeval_when_installed():
    metrics = pytest.importorskip("seqeval.metrics")
    gen = random.Random(0)
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
    for _ in range(50):
        gold = [[gen.choice(tags) for _ in range(gen.randint(1, 10))] for _ in range(5)]
        pred = [[gen.choice(tags) for _ in g] for g in gold]
        s = conll_scores(gold, pred)
        assert s.f1 / 100 == pytest.approx(metrics.f1_score(gold, pred), abs=1e-9)
        assert s.precision / 100 == pytest.approx(metrics.precision_score(gold, pred), abs=1e-9)
        assert s.recall / 100 == pytest.approx(metrics.recall_score(gold, pred), abs=1e-9)

"""Readers, preprocessing and encoding of NER and classification files; GloVe reading."""

import numpy as np
import pytest

from tpcore.errors import TpcoreError
from tpcore.tasks import nlp
from tpcore.tasks.glove import project, read_glove
from tpcore.tasks.synthetic_text import classification_corpus, ner_corpus

pytestmark = pytest.mark.host_only("task data generation and reading on the host")

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP B-LOC
1996-08-22 CD I-NP O
"""


def test_read_conll(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(CONLL)
    sents = nlp.read_conll(path)
    assert [s.words for s in sents] == [["EU", "rejects", "German", "call"],
                                        ["Peter", "Blackburn"], ["BRUSSELS", "1996-08-22"]]
    assert sents[1].tags == ["B-PER", "I-PER"]
    assert [s.line for s in sents] == [3, 8, 13]


@pytest.mark.parametrize("bad, line, what", [
    ("EU NNP B-NP B-ORG\nrejects\n", 2, "columns"),
    ("EU NNP B-NP B-ORG\n\nx NN O X-PER\n", 3, "tag 'X-PER'"),
    ("EU NNP B-NP ORG\n", 1, "tag 'ORG'"),
])
def test_read_conll_reports_file_and_line(tmp_path, bad, line, what):
    path = tmp_path / "bad.txt"
    path.write_text(bad)
    with pytest.raises(TpcoreError, match=f"bad.txt:{line}: .*{what}"):
        nlp.read_conll(path)


def test_read_classification(tmp_path):
    path = tmp_path / "trec.tsv"
    path.write_text("DESC\tHow did serfdom develop ?\n\nENTY\tWhat films featured 2 men ?\n")
    ex = nlp.read_classification(path)
    assert [(e.label, e.words[0], e.line) for e in ex] == [("DESC", "How", 1), ("ENTY", "What", 3)]
    path.write_text("DESC\tok\nno tab here\n")
    with pytest.raises(TpcoreError, match=r"trec.tsv:2: expected 'LABEL<TAB>TEXT'"):
        nlp.read_classification(path)
    path.write_text("\tempty label\n")
    with pytest.raises(TpcoreError, match="trec.tsv:1"):
        nlp.read_classification(path)


def test_normalise_digit_runs():
    assert nlp.normalise("19.99") == "#.#"
    assert nlp.normalise("1996-08-22") == "#-#-#"
    assert nlp.normalise("B52s", lowercase=True) == "b#s"
    assert nlp.normalise_all([["19.99", "Ab3"], [], ["x"]]) == [["#.#", "Ab#"], [], ["x"]]


def test_vocab_most_common_with_ties_and_unk():
    v = nlp.Vocab.build([["b", "a", "c"], ["a", "c", "d"]], size=2)
    # a and c twice (a first seen after b but counted more); b, d once
    assert v.words == [*nlp.SPECIALS, "a", "c"]
    assert v.encode(["c", "zzz", "a"]) == [5, v.index[nlp.UNK], 4]
    v = nlp.Vocab.build([["y", "x", "x", "y", "z"]], size=10)
    assert v.words[4:] == ["y", "x", "z"]
    with pytest.raises(TpcoreError):
        nlp.Vocab(["a", "b"])


def test_prepare_ner_arrays_filter_and_unknown_tags(tmp_path):
    train = [nlp.TaggedSentence(["Mr.", "Smith", "paid", "7"], ["O", "B-PER", "O", "O"], 1),
             nlp.TaggedSentence(["w"] * 5, ["O"] * 5, 7)]
    dev = [nlp.TaggedSentence(["Smith", "2"], ["B-PER", "O"], 3)]
    data = nlp.prepare_ner({"train": train, "dev": dev}, max_words=4)
    assert data.dropped == {"train": 1, "dev": 0}
    assert data.max_len == 6
    assert data.labels.names == ["O", "B-PER"]
    a = data.splits["dev"]
    v = data.vocab.index
    assert a["tokens"].tolist() == [[v[nlp.BOS], v["Smith"], v["#"], v[nlp.EOS]]]
    assert a["mask"].tolist() == [[False, True, True, False]]
    assert a["targets"][0, 1:3].tolist() == [1, 0]
    tr = data.splits["train"]
    assert tr["tokens"].shape == (1, 6) and not tr["pad"].any()
    bad = [nlp.TaggedSentence(["x", "y"], ["O", "O"], 4), nlp.TaggedSentence(["x"], ["B-LOC"], 9)]
    with pytest.raises(TpcoreError, match="dev.txt:9: label 'B-LOC'"):
        nlp.prepare_ner({"train": train, "dev": bad}, sources={"dev": "dev.txt"})


def test_conll_round_trip_of_synthetic_corpus(tmp_path):
    corpus = ner_corpus(50, 10, 10, seed=3)
    nlp.write_conll(tmp_path / "train.txt", corpus["train"])
    back = nlp.read_conll(tmp_path / "train.txt")
    assert [s.words for s in back] == [s.words for s in corpus["train"]]
    assert [s.tags for s in back] == [s.tags for s in corpus["train"]]
    ex = classification_corpus(30, 5, 5, seed=1)["train"]
    nlp.write_classification(tmp_path / "train.tsv", ex)
    back = nlp.read_classification(tmp_path / "train.tsv")
    assert [(e.words, e.label) for e in back] == [(e.words, e.label) for e in ex]


def test_prepare_classification_padding():
    ex = [nlp.Example(["good", "film"], "pos"), nlp.Example(["bad"], "neg"),
          nlp.Example(["x"] * 9, "neg")]
    data = nlp.prepare_classification({"train": ex}, max_words=8)
    a = data.splits["train"]
    assert data.dropped["train"] == 1
    assert a["tokens"].shape == (2, 4)
    assert a["pad"].tolist() == [[False] * 4, [False, False, False, True]]
    assert a["targets"].tolist() == [0, 1]


def test_hold_out_is_seeded_partition():
    kept, out = nlp.hold_out(list(range(100)), 0.1, seed=0)
    assert len(out) == 10 and sorted(kept + out) == list(range(100))
    assert nlp.hold_out(list(range(100)), 0.1, seed=0) == (kept, out)


def test_glove_reader_and_projection(tmp_path):
    path = tmp_path / "glove.txt"
    path.write_text("the 1 0 0\nsmith 0 1 0\nparis 0 0 1\nSmith 0 2 0\n")
    vec, found = read_glove(path, ["<pad>", "the", "Smith", "Paris", "absent"])
    assert found.tolist() == [False, True, True, True, False]
    assert vec[2].tolist() == [0, 2, 0]  # the exact-case entry wins over the lowercase one
    assert vec[3].tolist() == [0, 0, 1]  # lowercase fallback
    emb = project(vec, found, 8, seed=0)
    assert emb.shape == (5, 8) and emb.dtype == np.float32
    assert np.allclose(emb, project(vec, found, 8, seed=0))
    path.write_text("the 1 0 0\nsmith 0 1\n")
    with pytest.raises(TpcoreError, match="glove.txt:2: .*2 values, expected 3"):
        read_glove(path, ["smith"])
    path.write_text("the 1 x 0\n")
    with pytest.raises(TpcoreError, match="glove.txt:1"):
        read_glove(path, ["the"])


def test_glove_projection_keeps_neighbours():
    gen = np.random.default_rng(0)
    base = gen.normal(size=(50, 300))
    vec = np.concatenate([base, base + 0.05 * gen.normal(size=base.shape)]).astype(np.float32)
    emb = project(vec, np.ones(100, dtype=bool), 128, seed=1)
    e = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    sims = e[:50] @ e[50:].T
    assert (sims.argmax(axis=1) == np.arange(50)).all()
    assert 0.5 < emb.std() < 2.0

"""End to end on tiny synthetic corpora: training runs, the decompiled NER program agrees with
the discrete model through both interpreter engines, and the CLI writes its outputs."""

import json

import numpy as np
import pytest

from tpcore.backend import to_host
from tpcore.cli import main
from tpcore.experiments import ner, ner_demo, text_classification, text_models
from tpcore.programs.describe import embedding_table
from tpcore.tasks.nlp import prepare_classification, prepare_ner, write_classification, write_conll
from tpcore.tasks.synthetic_text import classification_corpus, ner_corpus

TINY_PROGRAM = text_models.ProgramSettings(n_layers=1, n_heads=2, n_embed_vars=2, k=8, d_mlp=8,
                                  epochs=1, batch_size=32)
TINY_TRANSFORMER = text_models.TransformerSettings(d_model=16, n_layers=1, n_heads=2, epochs=1,
                                          batch_size=32)


@pytest.fixture(scope="module")
def ner_data():
    return prepare_ner(ner_corpus(160, 40, 40, seed=1))


def test_program_ner_fidelity_and_embedding_table(ner_data):
    model, info = ner.train_ner(ner_data, "program", TINY_PROGRAM)
    assert info["steps"] == 5 and 0 <= info["test"]["f1"] <= 100
    program = text_models.extract_program(model, ner_data.vocab, ner_data.labels.names, "ner")
    fid = ner.ner_fidelity(model, program, ner_data.splits["test"])
    assert fid == {"numpy": 1.0, "numba": 1.0}
    rows = embedding_table(program, max_words=10**6).splitlines()[2:]
    # every vocabulary word (specials aside) takes exactly one value of each variable
    for var in ("embed_0", "embed_1"):
        words = [w for r in rows if r.startswith(f"| {var} |")
                 for w in r.rsplit(" | ", 1)[1].rstrip(" |").split(", ")]
        assert sorted(words) == sorted(ner_data.vocab.words[4:])


def test_program_show_lists_the_words_of_each_embedding_value(ner_data, tmp_path, capsys):
    from tpcore.programs.ir import save

    model, _ = ner.train_ner(ner_data, "program", TINY_PROGRAM)
    save(text_models.extract_program(model, ner_data.vocab, ner_data.labels.names, "ner"),
         tmp_path / "ner.json")
    assert main(["program", "show", str(tmp_path / "ner.json"), "--no-source"]) == 0
    out = capsys.readouterr().out
    assert "Figure 7 table" in out and "| embed_0 | " in out


def test_class_gap_table_sorted_by_magnitude(ner_data):
    model = text_models.build_program(TINY_PROGRAM, len(ner_data.vocab), ner_data.max_len,
                             len(ner_data.labels))
    program = text_models.extract_program(model, ner_data.vocab, ner_data.labels.names, "ner")
    rows = ner.class_gap_table(program, "B-LOC", "B-ORG", top=6).splitlines()[2:]
    gaps = [float(r.split(" | ")[2]) for r in rows]
    assert len(gaps) == 6 and gaps == sorted(gaps, key=lambda g: -abs(g))
    c = program.classifier
    a, b = c.classes.index("B-LOC"), c.classes.index("B-ORG")
    best = max(abs(w[i, a] - w[i, b]) for w in c.weights.values() for i in range(len(w)))
    assert abs(gaps[0]) == pytest.approx(best, abs=0.01)


def test_predict_batches_agree(ner_data):
    model = text_models.build_program(TINY_PROGRAM, len(ner_data.vocab), ner_data.max_len,
                             len(ner_data.labels))
    split = ner_data.splits["dev"]
    assert np.array_equal(text_models.predict(model, split, batch_size=7),
                          text_models.predict(model, split))


def test_glove_initialises_program_embedding(tmp_path, ner_data):
    words = ner_data.vocab.words
    lines = [f"{w} " + " ".join(str(x) for x in np.random.default_rng(i).normal(size=6))
             for i, w in enumerate(words[4:40])]
    (tmp_path / "g.txt").write_text("\n".join(lines) + "\n")
    emb = text_models.glove_init(tmp_path / "g.txt", ner_data.vocab, 16, seed=0)
    model = text_models.build_program(TINY_PROGRAM, len(words), ner_data.max_len,
                                      len(ner_data.labels), emb)
    assert np.allclose(to_host(model.embedding.data).reshape(len(words), 16), emb)
    t = text_models.build_transformer(TINY_TRANSFORMER, len(words), ner_data.max_len,
                             len(ner_data.labels), emb)
    assert np.allclose(to_host(t.tok_emb.data), emb)


def test_classification_both_models():
    data = prepare_classification(classification_corpus(160, 40, 40, seed=2))
    res = text_classification.compare_classification(data, TINY_PROGRAM, TINY_TRANSFORMER)
    for key in ("naive_bayes", "transformer", "program"):
        assert 0 <= res[key]["test"]["accuracy"] <= 100
    assert "Transformer Program" in text_classification.classification_table(res)
    assert res["program"]["written"]["fidelity"] == {"numpy": 1.0}


def test_cli_conll_and_classify(tmp_path, capsys):
    corpus = ner_corpus(120, 30, 30, seed=4)
    for split, sents in corpus.items():
        write_conll(tmp_path / f"{split}.txt", sents)
    out = tmp_path / "run"
    args = ["nlp", "conll", "--train", str(tmp_path / "train.txt"), "--dev",
            str(tmp_path / "dev.txt"), "--test", str(tmp_path / "test.txt"), "--out", str(out),
            "--epochs", "0.5", "--layers", "1", "--heads", "1,2", "--embed-vars", "2", "--k", "8",
            "--models", "program", "--quiet"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "Unigram baseline" in text and "paper F1" in text and "numba 100.00%" in text
    res = json.loads((out / "results.json").read_text())
    assert set(res) >= {"unigram", "program", "data"} and "transformer" not in res
    grid = res["program"]["grid"]
    assert [g["settings"]["n_heads"] for g in grid] == [1, 2]
    assert res["program"]["dev"]["f1"] == max(g["dev"] for g in grid)
    for f in ("program/program.json", "program/program/ner.py", "program/embeddings.md",
              "table.md"):
        assert (out / f).is_file(), f
    ex_ = classification_corpus(100, 1, 30, seed=5)
    write_classification(tmp_path / "tr.tsv", ex_["train"])
    write_classification(tmp_path / "te.tsv", ex_["test"])
    assert main(["nlp", "classify", "--train", str(tmp_path / "tr.tsv"), "--test",
                 str(tmp_path / "te.tsv"), "--out", str(tmp_path / "c"), "--epochs", "0.5",
                 "--k", "8", "--embed-vars", "2", "--heads", "1", "--layers", "1",
                 "--d-model", "16", "--t-layers", "1", "--quiet"]) == 0
    assert "Bag of words" in capsys.readouterr().out
    assert (tmp_path / "c" / "results.json").is_file()


def test_cli_bad_input_is_one_line(tmp_path, capsys):
    (tmp_path / "bad.txt").write_text("EU NNP B-NP B-ORG\nrejects\n")
    assert main(["nlp", "conll", "--train", str(tmp_path / "bad.txt"), "--dev",
                 str(tmp_path / "bad.txt"), "--test", str(tmp_path / "bad.txt")]) == 2
    err = capsys.readouterr().err
    assert "bad.txt:2" in err and len(err.strip().splitlines()) == 1
    assert main(["nlp", "conll", "--train", str(tmp_path / "missing.txt"), "--dev", "x",
                 "--test", "y"]) == 2
    (tmp_path / "ok.tsv").write_text("pos\tgood film\nneg\tbad film\n")
    assert main(["nlp", "classify", "--train", str(tmp_path / "ok.tsv"), "--dev",
                 str(tmp_path / "ok.tsv"), "--test", str(tmp_path / "ok.tsv"), "--models",
                 "lstm"]) == 2
    assert "--models 'lstm'" in capsys.readouterr().err
    assert main(["nlp", "classify", "--train", str(tmp_path / "ok.tsv"), "--test",
                 str(tmp_path / "ok.tsv"), "--layers", "1,two"]) == 2
    assert "--layers '1,two'" in capsys.readouterr().err


def test_reproduce_verbs_registered():
    from tpcore.cli import build_parser

    parser = build_parser()
    for verb in ("ner-demo", "classify-demo"):
        args = parser.parse_args(["reproduce", verb, "--budget", "0.5", "--out", "x"])
        assert (args.verb, args.budget, args.out) == (verb, 0.5, "x")
    with pytest.raises(ValueError, match="budget"):
        ner_demo.budget(0)

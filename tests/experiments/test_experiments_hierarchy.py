import json
from pathlib import Path

import numpy as np

from tpcore.cli import main
from tpcore.experiments.against_bp import TreeRun, compare_probs, mask_leaves, train_against_bp
from tpcore.experiments.grammar_learning import match_permutation
from tpcore.experiments.hierarchy import BUDGETS
from tpcore.io import read_text, write_json
from tpcore.tasks.trees import random_grammar

TINY = dict(BUDGETS["tiny"].sizes)


def test_compare_probs_kl_agreement_spearman():
    p = np.array([[1.0, 0, 0, 0], [0.1, 0.2, 0.3, 0.4]])
    r = compare_probs(p, p)
    assert abs(r["kl"]) < 1e-12 and r["agree"] == 1.0 and abs(r["spearman"] - 1) < 1e-12
    v = np.array([[0.7, 0.1, 0.1, 0.1], [0.4, 0.3, 0.2, 0.1]])
    r = compare_probs(p, v)
    np.testing.assert_allclose(r["kl"], (np.log(1 / 0.7) + (p[1] * np.log(p[1] / v[1])).sum()) / 2)
    assert r["agree"] == 0.5 and abs(r["spearman"]) < 1e-12  # rows: +1 (ties) and -1


def test_mask_leaves_masks_one_position_per_row():
    x = np.array([[0, 1, 2, 3], [3, 2, 1, 0]], dtype=np.int8)
    b = mask_leaves(x, np.array([1, 3]), 4)
    assert b["tokens"].tolist() == [[0, 4, 2, 3], [3, 2, 1, 4]]
    assert b["mask"].sum(axis=1).tolist() == [1, 1] and b["targets"].tolist() == x.tolist()


def test_match_permutation_undoes_a_relabelling():
    M = random_grammar(4, 1.0, seed=3).M
    pi = [2, 0, 3, 1]
    inv = np.argsort(pi)
    found, tv = match_permutation(M[np.ix_(inv, inv, inv)], M)
    assert tv < 1e-12 and list(found) == pi


def test_tiny_root_run_learns_and_reports(tmp_path):
    out = train_against_bp(TreeRun(task="root", **TINY), log=lambda s: None)
    first, last = out["history"][0], out["history"][-1]
    assert last["0"]["acc"] > first["0"]["acc"] + 0.2
    assert set(last) >= {"0", "1", "2", "uniform"} and "acc" not in last["uniform"]
    assert len(out["attention"]["maps"]) == 2


def test_reproduce_hierarchy_tiny_mlm(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the encoder is saved under runs/
    assert main(["reproduce", "hierarchy", "--budget", "tiny", "--parts", "mlm,probe,finetune",
                 "--mlm-steps", "40", "--out", str(tmp_path)]) == 0
    out = json.loads(read_text(tmp_path / "hierarchy_tiny.json.gz", "results"))
    assert [r["run"]["task"] for r in out["runs"]] == ["mlm"]
    assert np.array(out["probes"]["all_positions"]).shape == (3, 2)  # layers 0..2 x levels 0..1
    assert len(out["finetune"]["rows"]) == 9
    assert out["probes"]["probe"] == {"n_train": 1024, "epochs": 10}  # at most the budget's P
    text = (tmp_path / "hierarchy_tiny.md").read_text()
    assert "KL BP_0" in text and "Ancestor probes" in text and "| 256 |" in text
    assert "probes trained 10 epochs of 1024 sequences" in text
    assert main(["reproduce", "hierarchy", "--parts", "bogus"]) == 2


def test_probes_train_as_asked_and_are_kept_only_as_asked(tmp_path, monkeypatch, capsys):
    """--probe-samples and --probe-epochs set every probe's training and are recorded with it;
    with --hours, probes of another training are done again, those of the same kept."""
    monkeypatch.chdir(tmp_path)
    args = ["reproduce", "hierarchy", "--budget", "tiny", "--out", "out", "--mlm-steps", "20",
            "--k-train", "1", "--hours", "1"]
    assert main(args + ["--parts", "mlm,probe,mlm-k", "--probe-samples", "64",
                        "--probe-epochs", "2"]) == 0
    out = json.loads(read_text(Path("out/hierarchy_tiny.json.gz"), "results"))
    assert out["probes"]["probe"] == {"n_train": 64, "epochs": 2}
    assert [r["probe"] for r in out["probes_k"]] == [{"n_train": 64, "epochs": 2}]
    assert "--k-train 1 --probe-samples 64 --probe-epochs 2 --hours 1" in out["commands"][-1]
    capsys.readouterr()
    assert main(args + ["--parts", "probe,mlm-k", "--probe-samples", "64",
                        "--probe-epochs", "2"]) == 0
    assert "probes" not in capsys.readouterr().out
    assert main(args + ["--parts", "probe,mlm-k", "--probe-samples", "32"]) == 0
    said = capsys.readouterr().out
    assert "probes:" in said and "probes of the MLM model k_train=1" in said
    again = json.loads(read_text(Path("out/hierarchy_tiny.json.gz"), "results"))
    assert again["probes"]["probe"] == {"n_train": 32, "epochs": 10}
    assert [r["probe"] for r in again["probes_k"]] == [{"n_train": 32, "epochs": 10}]


def test_reproduce_hierarchy_reuses_only_its_own_encoder_and_table(tmp_path, monkeypatch,
                                                                   capsys):
    """A saved MLM encoder of other settings, or a results file of other budget settings, is
    refused in one line naming the differing setting, before any training."""
    monkeypatch.chdir(tmp_path)
    encoder = tmp_path / "runs" / "hierarchy" / "tiny_mlm_seed0.json"
    encoder.parent.mkdir(parents=True)
    saved_run = TreeRun(task="mlm", **dict(TINY, steps=40))
    encoder.write_text(json.dumps({"run": saved_run.__dict__}))
    args = ["reproduce", "hierarchy", "--budget", "tiny", "--out", str(tmp_path)]
    assert main(args + ["--parts", "probe", "--mlm-steps", "30"]) == 2
    assert "steps: 40 recorded, 30 requested" in capsys.readouterr().err
    write_json(tmp_path / "hierarchy_tiny.json.gz",
               {"budget": "tiny", "config": {**TINY, "lr": 1.0}, "runs": [], "commands": []})
    assert main(args + ["--parts", "root-long"]) == 2
    assert "lr: 1.0 recorded, 0.003 requested" in capsys.readouterr().err


def test_reproduce_hierarchy_root_long_with_more_samples(tmp_path, monkeypatch):
    """``--long-samples`` sets the root-long run's training-set size; it is reported and kept
    apart from a run of the same steps on the budget's P."""
    monkeypatch.chdir(tmp_path)  # the models are saved under runs/
    args = ["reproduce", "hierarchy", "--budget", "tiny", "--parts", "root-long", "--long-k",
            "1", "--out", str(tmp_path)]
    assert main(args + ["--long-samples", "3000"]) == 0
    assert main(args) == 0
    out = json.loads(read_text(tmp_path / "hierarchy_tiny.json.gz", "results"))
    assert sorted(r["run"]["P"] for r in out["runs"]) == [TINY["P"], 3000]
    assert all(r["run"]["k_train"] == 1 for r in out["runs"])
    assert "3000 training trees" in (tmp_path / "hierarchy_tiny.md").read_text()
    assert "--long-samples 3000" in out["commands"][0]


def test_reproduce_hierarchy_with_dropout_keeps_its_own_run(tmp_path, monkeypatch, capsys):
    """``--dropout`` trains with dropout (another run than without it), saved under its own
    name beside the run without; the table and the command say so. Evaluation never drops."""
    monkeypatch.chdir(tmp_path)  # the models are saved under runs/
    args = ["reproduce", "hierarchy", "--budget", "tiny", "--parts", "root", "--k-train", "1",
            "--out", "out"]
    assert main(args + ["--dropout", "0.3"]) == 0
    assert main(args) == 0
    out = json.loads(read_text(tmp_path / "out" / "hierarchy_tiny.json.gz", "results"))
    runs = {r["run"]["dropout"]: r for r in out["runs"]}
    assert sorted(runs) == [0.0, 0.3]
    assert runs[0.3]["history"][-1]["loss"] != runs[0.0]["history"][-1]["loss"]
    saved = tmp_path / "runs" / "hierarchy"
    assert (saved / "tiny_root_k1_drop0p3_seed0.npz").is_file()
    assert (saved / "tiny_root_k1_seed0.npz").is_file()
    assert "--dropout 0.3" in out["commands"][0] and "dropout" not in out["commands"][1]
    text = (tmp_path / "out" / "hierarchy_tiny.md").read_text()
    assert text.count("dropout 0.3, ") == 1
    again = train_against_bp(TreeRun(task="root", **dict(TINY, k_train=1, dropout=0.3)),
                             log=lambda s: None)
    assert again["history"] == [{**h, "train_seconds": g["train_seconds"]} for h, g in
                                zip(runs[0.3]["history"], again["history"])]
    capsys.readouterr()
    assert main(args + ["--dropout", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "expected a probability in [0, 1), got '1'" in err[0]
